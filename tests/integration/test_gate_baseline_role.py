# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The throughput_gate role's baselines through the action plugin, driven by ansible-runner.

Same harness as test_throughput_gate.py: tests/standins/sglang_api.py (an SGLang HTTP stand-in)
on a random loopback port. Stored baselines are seeded with the collection's own writer
(module_utils/gate/baseline.py), so they have the real format.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from lib.gate_play import GPU, RATE, ROLE_PLAY, SHAPE, role_vars, run_play

from ansible_collections.gpufleet.sglang.plugins.module_utils.gate import baseline as gb

TASK = "Run the throughput gate"
ROLE_SHAPE = {
    "api": "native",
    **{k: SHAPE[k] for k in ("concurrency", "requests_per_trial", "input_len", "output_len")},
}


def key(version: str = "0.5.23", profile: str = "glm5-tp8") -> dict[str, str]:
    return gb.make_key(host="localhost", model="test/model", profile=profile, sglang_version=version, gpu_model=GPU)


def paths(tmp_path: Path, **kw: str) -> gb.Paths:
    return gb.Paths.for_key(str(tmp_path / "baselines"), key(**kw))


def seed(tmp_path: Path, trials: list[float], **kw: str) -> Path:
    p = paths(tmp_path, **kw)
    Path(p.directory).mkdir(parents=True, exist_ok=True)
    gb.atomic_write(p.baseline, json.dumps(gb.baseline_document(key(**kw), trials, ROLE_SHAPE, "seeded", None)))
    return Path(p.baseline)


def history(tmp_path: Path, **kw: str) -> list[dict]:
    p = Path(paths(tmp_path, **kw).history)
    return [json.loads(line) for line in p.read_text().splitlines()] if p.exists() else []


def load_seen(url: str) -> float:
    """Prompt + generation tokens the stand-in processed (0: no generation request ever ran)."""
    with urllib.request.urlopen(url + "/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(("sglang:generation_tokens_total", "sglang:prompt_tokens_total"))
    )


def spread(median: float) -> list[float]:
    return [median * f for f in (0.99, 0.995, 1.0, 1.005, 1.01)]


# --------------------------------------------------------------------------- never a baseline from < 5 trials


def test_three_trial_run_never_writes_a_baseline(tmp_path, standin):
    server = standin(STANDIN_TOKENS_PER_S=str(RATE))
    r = run_play(tmp_path, ROLE_PLAY, role_vars(tmp_path, server.url, throughput_gate_trials=3), TASK)
    assert r.rc != 0
    assert "trials=3: a baseline needs at least 5 trials" in r.res["msg"], r.res["msg"]
    assert not Path(paths(tmp_path).baseline).exists()
    assert load_seen(server.url) == 0  # refused before any load

    # with a baseline to compare with, 3 trials are measured, but never stored, even with update_baseline
    # (max_trials 3 as well: the gate stops at the first clear verdict, and on a loaded machine 3 trials
    # were not always clear, so it took a 4th; make test saw 4 == 3 at load 5)
    stored = seed(tmp_path, spread(RATE))
    before = stored.read_bytes()
    r2 = run_play(
        tmp_path,
        ROLE_PLAY,
        role_vars(
            tmp_path,
            server.url,
            throughput_gate_trials=3,
            throughput_gate_max_trials=3,
            throughput_gate_update_baseline=True,
        ),
        TASK,
    )
    assert r2.rc == 0, r2.output
    assert r2.res["verdict"] == "pass"
    assert len(r2.res["valid_trial_values"]) == 3
    assert stored.read_bytes() == before
    assert r2.res["baseline"]["written"] is False
    assert "needs at least 5" in r2.res["baseline"]["write_reason"]
    assert [h["baseline_written"] for h in history(tmp_path)] == [False]


# --------------------------------------------------------------------------- choosing


def test_prefix_profile_is_not_picked(tmp_path, standin):
    server = standin(STANDIN_TOKENS_PER_S=str(RATE))
    # a 4x faster baseline of profile "glm5-tp8__x" (an earlier version): picking it would FAIL by -75%
    seed(tmp_path, spread(RATE * 4), version="0.5.9", profile="glm5-tp8__x")
    r = run_play(tmp_path, ROLE_PLAY, role_vars(tmp_path, server.url), TASK)
    assert r.rc == 0, r.output
    assert r.res["reason"] == "no_baseline"
    assert r.res["baseline"]["source"] is None
    # the first baseline of this key (written only from a passing run of >= 5 valid trials: the reason says why not)
    assert Path(paths(tmp_path).baseline).exists(), (r.res["baseline"], r.res.get("valid_trial_values"))
    assert r.res["changed"] is True


def test_upgrade_is_compared_with_the_highest_earlier_version(tmp_path, standin):
    server = standin(STANDIN_TOKENS_PER_S=str(RATE))
    seed(tmp_path, spread(RATE * 1.3), version="0.5.12.post1")  # the one to choose: this run is -23%
    seed(tmp_path, spread(RATE * 0.5), version="0.5.20")  # later: never a fallback
    newest = seed(tmp_path, spread(RATE), version="0.5.9")  # lower version, newest file
    os.utime(newest, (2e9, 2e9))
    r = run_play(tmp_path, ROLE_PLAY, role_vars(tmp_path, server.url, version="0.5.13"), TASK)
    assert r.rc != 0, r.output
    assert r.res["verdict"] == "fail"
    assert r.res["reason"] == "regression"
    assert r.res["baseline"]["fallback"] is True
    assert r.res["baseline"]["source_sglang_version"] == "0.5.12.post1"
    assert not Path(paths(tmp_path, version="0.5.13").baseline).exists()  # a failed run stores nothing
    [h] = history(tmp_path, version="0.5.13")
    assert h["baseline_source_sglang_version"] == "0.5.12.post1"
    assert h["failed"] is True


# --------------------------------------------------------------------------- unusable files and directories


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"", "is empty"),
        (b'{"trials": [1000.0, 1000', "is not valid JSON"),
        (json.dumps({"trials": ["fast", 1]}).encode(), "is not a throughput_gate baseline"),
        (
            json.dumps({"format": gb.FORMAT, "key": dict(key(), host="other"), "trials": [1.0] * 5}).encode(),
            "another key",
        ),
    ],
    ids=["empty", "corrupt", "foreign", "other-key"],
)
def test_unusable_baseline_is_named_before_any_load(tmp_path, standin, content, needle):
    server = standin(STANDIN_TOKENS_PER_S=str(RATE))
    p = Path(paths(tmp_path).baseline)
    p.parent.mkdir(parents=True)
    p.write_bytes(content)
    r = run_play(tmp_path, ROLE_PLAY, role_vars(tmp_path, server.url), TASK)
    assert r.rc != 0
    assert r.res["reason"] == "baseline_error"
    assert str(p) in r.res["msg"]
    assert needle in r.res["msg"]
    assert "throughput_gate_accept_baseline=true" in r.res["msg"]
    assert "Traceback" not in r.output
    assert load_seen(server.url) == 0
    assert p.read_bytes() == content  # untouched
    summary = [m for m in r.debug_msgs if isinstance(m, list) and m and m[0].startswith("host")]
    assert summary, r.output
    assert "FAIL" in summary[0][1]


def test_check_mode_plans_with_the_chosen_baseline_and_refuses_a_bad_one(tmp_path, standin):
    server = standin(STANDIN_TOKENS_PER_S=str(RATE))
    seed(tmp_path, spread(RATE), version="0.5.9")
    before = sorted(p.name for p in (tmp_path / "baselines").iterdir())
    r = run_play(tmp_path, ROLE_PLAY, role_vars(tmp_path, server.url), TASK, check=True)
    assert r.rc == 0, r.output
    plan = r.res["baseline_plan"]
    assert plan["fallback"] is True
    assert plan["source_sglang_version"] == "0.5.9"
    assert plan["would_write"].startswith("only from a passing run")
    assert r.res["plan"]["baseline_trials"] == 5
    (tmp_path / "baselines" / "notes.json").write_text("{")
    bad = run_play(tmp_path, ROLE_PLAY, role_vars(tmp_path, server.url), TASK, check=True)
    assert bad.rc != 0
    assert "notes.json is not valid JSON" in bad.res["msg"]
    assert sorted(p.name for p in (tmp_path / "baselines").iterdir()) == sorted([*before, "notes.json"])
    assert load_seen(server.url) == 0


def test_read_only_directory_fails_before_the_load(tmp_path, standin):
    server = standin(STANDIN_TOKENS_PER_S=str(RATE))
    base = tmp_path / "baselines"
    base.mkdir()
    immutable = os.geteuid() == 0  # root ignores modes: make the directory immutable instead
    subprocess.run(["chattr", "+i", str(base)], check=True) if immutable else base.chmod(0o555)
    try:
        r = run_play(tmp_path, ROLE_PLAY, role_vars(tmp_path, server.url), TASK)
    finally:
        subprocess.run(["chattr", "-i", str(base)], check=True) if immutable else base.chmod(0o755)
    assert r.rc != 0
    assert f"baseline directory {base} is not writable" in r.res["msg"], r.res["msg"]
    assert "nothing was measured" in r.res["msg"]
    assert load_seen(server.url) == 0
    assert list(base.iterdir()) == []


# --------------------------------------------------------------------------- concurrency


def test_two_concurrent_runs_on_one_key(tmp_path, standin):
    server = standin(STANDIN_TOKENS_PER_S=str(RATE * 2))
    results: dict[int, object] = {}

    def go(n: int) -> None:
        results[n] = run_play(tmp_path / f"r{n}", ROLE_PLAY, role_vars(tmp_path, server.url), TASK)

    for n in (1, 2):
        (tmp_path / f"r{n}").mkdir()
    threads = [threading.Thread(target=go, args=(n,)) for n in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert all(results[n].rc == 0 for n in (1, 2)), [results[n].output for n in (1, 2)]
    runs = history(tmp_path)
    assert len(runs) == 2  # no lost line
    # both started without a baseline; never both wrote it. When the two measurements overlapped in
    # time they shared the stand-in's rate, so a run's trials can spread too far to be a baseline
    # (gate_stats.baseline_spread_problem, issue 22): such a run says so and writes nothing
    written_flags = sorted(h["baseline_written"] for h in runs)
    notes = [
        str(results[n].res["baseline"]["write_reason"]) for n in (1, 2) if not results[n].res["baseline"]["written"]
    ]
    if written_flags == [False, False]:
        assert all("spread too far" in n for n in notes), notes
        assert not Path(paths(tmp_path).baseline).exists()
        return
    assert written_flags == [False, True]
    assert "another run changed this key's baseline" in notes[0] or "spread too far" in notes[0], notes
    written = next(h for h in runs if h["baseline_written"])
    stored = json.loads(Path(paths(tmp_path).baseline).read_text())
    assert stored["trials"] == written["trials"]


# --------------------------------------------------------------------------- accepting a lower baseline


def test_accept_a_lower_baseline_on_purpose(tmp_path, standin):
    # the stored baseline is seeded at RATE rather than measured: a loaded machine can only make the
    # slower server read slower still, never as fast as the baseline (a measured baseline read as slow
    # as the 0.7x server once, at load average 40, and the regression passed as within tolerance)
    seed(tmp_path, spread(RATE))
    slow = standin(STANDIN_TOKENS_PER_S=str(RATE * 0.7))

    no_reason = run_play(tmp_path, ROLE_PLAY, role_vars(tmp_path, slow.url, throughput_gate_accept_baseline=True), TASK)
    assert no_reason.rc != 0
    assert "accept_baseline needs accept_reason" in no_reason.res["msg"]
    assert load_seen(slow.url) == 0

    why = "new model revision, slower by design (TICKET-42)"
    r = run_play(
        tmp_path,
        ROLE_PLAY,
        role_vars(tmp_path, slow.url, throughput_gate_accept_baseline=True, throughput_gate_accept_reason=why),
        TASK,
    )
    assert r.rc == 0, r.output
    assert r.res["verdict"] == "fail"  # the regression is reported ...
    assert r.res["record"]["failed"] is False  # ... and accepted
    assert "baseline ACCEPTED on purpose" in r.res["msg"]
    stored = json.loads(Path(paths(tmp_path).baseline).read_text())
    assert stored["trials"] == r.res["valid_trial_values"]
    assert stored["accepted"]["reason"] == why
    runs = history(tmp_path)
    assert runs[-1]["accepted"]["reason"] == why
    assert runs[-1]["accepted"]["by"]
    assert runs[-1]["accepted"]["at"] == runs[-1]["time"]

    # from now on the slower speed is the reference
    again = run_play(tmp_path, ROLE_PLAY, role_vars(tmp_path, slow.url), TASK)
    assert again.rc == 0, again.output
    assert again.res["verdict"] == "pass"
    assert again.res["changed"] is False  # only the history grew


def test_changed_shape_is_refused_then_replaced_on_purpose(tmp_path, standin):
    server = standin(STANDIN_TOKENS_PER_S=str(RATE))
    stored = seed(tmp_path, spread(RATE))
    before = stored.read_bytes()
    wider = role_vars(tmp_path, server.url, throughput_gate_concurrency=4, throughput_gate_requests_per_trial=8)
    r = run_play(tmp_path, ROLE_PLAY, wider, TASK)
    assert r.rc != 0
    assert "was measured with another request shape (concurrency: 8 -> 4; requests_per_trial: 16 -> 8)" in r.res["msg"]
    assert load_seen(server.url) == 0
    assert stored.read_bytes() == before

    why = "gate shape halved for the smaller lab"
    wider.update(throughput_gate_accept_baseline=True, throughput_gate_accept_reason=why)
    accepted = run_play(tmp_path, ROLE_PLAY, wider, TASK)
    assert accepted.rc == 0, accepted.output
    assert accepted.res["reason"] == "no_baseline"  # not compared with the other shape
    new = json.loads(stored.read_text())
    assert new["shape"]["concurrency"] == 4, (accepted.res["baseline"], accepted.res.get("valid_trial_values"))
    assert new["accepted"]["reason"] == why
    [h] = history(tmp_path)
    assert "another request shape" in h["baseline_problems"][0]


# --------------------------------------------------------------------------- secrets


def test_no_secret_in_any_output_of_a_failing_run(tmp_path, standin):
    server = standin("--api-key", "the-right-key", STANDIN_TOKENS_PER_S=str(RATE))
    wrong_key = "Wr0ng-K3y-9f2c"
    injected_key = "Wr0ng-K3y\r\nX-Injected: yes"  # refused by the module before anything is sent
    password = "pa:ss@w0rd/%"
    url = server.url.replace("http://", "http://gate:" + urllib.parse.quote(password, safe="") + "@")
    gate_vars = role_vars(tmp_path, url, throughput_gate_api_key=wrong_key, throughput_gate_ready_timeout=3)
    plan = run_play(tmp_path, ROLE_PLAY, gate_vars, TASK, check=True)  # the check-mode plan shows the URL
    assert plan.res["plan"]["endpoint"].startswith("POST http://gate:********@127.0.0.1:"), plan.res["plan"]
    r = run_play(tmp_path, ROLE_PLAY, gate_vars, TASK)
    assert r.rc != 0
    injected_vars = dict(gate_vars, throughput_gate_api_key=injected_key)
    refused = run_play(tmp_path, ROLE_PLAY, injected_vars, TASK)
    assert refused.rc != 0
    outputs = [plan.output, json.dumps(plan.res), r.output, json.dumps(r.res), refused.output, json.dumps(refused.res)]
    artifacts = tmp_path.glob("runner-*/artifacts/**/*")
    outputs += [p.read_text(errors="replace") for p in artifacts if p.is_file()]
    outputs += [p.read_text(errors="replace") for p in (tmp_path / "baselines").iterdir() if p.is_file()]
    forms = set()
    for s in (wrong_key, injected_key, password, "Wr0ng-K3y", urllib.parse.quote(password, safe="")):
        forms |= {s, repr(s)[1:-1], json.dumps(s)[1:-1], json.dumps(json.dumps(s))[1:-1]}
    for text in outputs:
        for form in forms:
            assert form not in text, (form, text[:2000])
    assert history(tmp_path), "the failing run is in the history"


# --------------------------------------------------------------------------- the server role's readiness


def test_role_waits_like_the_server_role_when_it_ran(tmp_path, standin):
    server = standin(STANDIN_TOKENS_PER_S=str(RATE))
    facts = {"url": server.url, "ready_path": "/ready", "ready_timeout_s": 42, "model_revision": ""}
    v = role_vars(tmp_path, server.url, sglang_server_facts=facts)
    del v["throughput_gate_url"], v["throughput_gate_ready_timeout"]  # from sglang_server_facts
    r = run_play(tmp_path, ROLE_PLAY, v, TASK, check=True)
    assert r.rc == 0, r.output
    assert r.res["plan"]["ready_check"] == f"GET {server.url}/ready until 200 (up to 42s)"

    # without the server role's facts (bench.yml publishes only the model revision): the module's defaults
    bench = role_vars(tmp_path, server.url, sglang_server_facts={"model_revision": ""})
    del bench["throughput_gate_ready_timeout"]
    r2 = run_play(tmp_path, ROLE_PLAY, bench, TASK, check=True)
    assert r2.rc == 0, r2.output
    assert r2.res["plan"]["ready_check"] == f"GET {server.url}/health_generate until 200 (up to 1800s)"
    assert load_seen(server.url) == 0

    # nothing of the server's known at all: the module's own url (check mode sends nothing)
    bare = role_vars(tmp_path, server.url)
    del bare["throughput_gate_url"]
    r3 = run_play(tmp_path, ROLE_PLAY, bare, TASK, check=True)
    assert r3.rc == 0, r3.output
    assert r3.res["plan"]["ready_check"] == "GET http://127.0.0.1:30000/health_generate until 200 (up to 20s)"
