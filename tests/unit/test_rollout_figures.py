# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""tests/tools/rollout_figures.py: the figures of a rolling upgrade under traffic that the lab
(lab.sh upgrade) and molecule/fleet print, read from the play's own lines (made here by the
rollout's own functions), the gateway watcher's samples and the traffic summary; and when the lab's
report fails (a failed request, the floor crossed, no drain that waited)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from tools.rollout_figures import (
    FiguresError,
    check_summary,
    drains,
    healthy_counts,
    main,
    max_unavailable_used,
    read_samples,
    upgrade_report,
)

from ansible_collections.gpufleet.sglang.plugins.module_utils.fleet.rollout_plan import Load, Node, drain_line, room

FIGURES = Path(__file__).resolve().parents[1] / "tools" / "rollout_figures.py"
WATCH = Path(__file__).resolve().parents[2] / "extensions" / "molecule" / "fleet" / "watch.py"
URLS = [f"http://127.0.0.1:3000{i}" for i in (1, 2, 3)]


def drain(host: str, running: int, seconds: float, queued: int = 0) -> str:
    """The rollout's own drain line for host."""
    return drain_line(
        host,
        {
            "seconds": seconds,
            "running_at_start": running,
            "queued_at_start": queued,
            "budget_s": 101,
            "stragglers": 0,
            "outcome": "drained",
        },
    )


def room_line(host: str, max_unavailable: int) -> str:
    """The capacity check's line as the play prints it (its message from rollout_plan.room)."""
    nodes = [Node(f"n{i}", True, Load(2, 0), 64) for i in range(3)]
    decision = room(nodes, ["n0"], max_unavailable, 0.8)
    assert decision.allowed
    return f'ok: [{host}] => {{\n    "msg": "{host}: room to leave the gateway after 1 look(s): {decision.msg}"\n}}'


def play_log(max_unavailable: int = 1, running: tuple[int, int, int] = (3, 0, 5)) -> str:
    parts = []
    for i, r in enumerate(running, 1):
        host = f"lab-sglang{i}"
        parts.append(room_line(host, max_unavailable))
        parts.append(f'ok: [{host}] => {{\n    "msg": "{drain(host, r, 4.2 + i if r else 0.31)}"\n}}')
    return "\n".join(parts)


def summary(**over: object) -> dict[str, object]:
    doc = {
        "sent": 120,
        "ok": 120,
        "failed": 0,
        "in_flight": 0,
        "reasons": {},
        "rate_rps": 1.68,
        "capacity": {"tokens_per_s": 11050.2, "source": "metrics"},
        "phases": {
            "capacity_probe": {"ttft": {"n": 36, "p50_s": 0.01, "p99_s": 0.02}},
            "before": {"ttft": {"n": 25, "p50_s": 0.0123, "p99_s": 0.0456}},
            "rollout": {"ttft": {"n": 80, "p50_s": 0.0150, "p99_s": 0.2}},
        },
    }
    doc.update(over)
    return doc


def samples(counts: list[int], t0: float = 100.0) -> list[dict]:
    return [
        {"t": t0 + 0.5 * i, "workers": {u: j < c for j, u in enumerate(URLS)}, "marks": [], "up": {}}
        for i, c in enumerate(counts)
    ]


def report(log: str = "", doc: dict | None = None, smp: list[dict] | None = None) -> tuple[list[str], list[str]]:
    return upgrade_report(
        log or play_log(),
        check_summary(doc or summary()),
        samples([3, 3, 2, 3, 2, 3]) if smp is None else smp,
        window=(100.0, 103.0),
        nodes=3,
        token_mix="2000,4000,6000",
    )


def test_lab_host_names_and_the_rollouts_own_lines_read_back() -> None:
    found = drains(play_log())
    assert [(d["node"], d["running"], d["seconds"], d["budget_s"]) for d in found] == [
        ("lab-sglang1", 3, 5.2, "101"),
        ("lab-sglang2", 0, 0.31, "101"),
        ("lab-sglang3", 5, 7.2, "101"),
    ]
    assert max_unavailable_used(play_log(max_unavailable=2)) == 2
    assert max_unavailable_used("no capacity check ran") is None


def test_the_report_prints_every_figure_and_passes_a_good_rollout() -> None:
    lines, problems = report()
    assert problems == []
    text = "\n".join(lines)
    assert "sent 120, ok 120, failed 0" in text
    assert "capacity 11050.2 tok/s, metrics), streams of 2000,4000,6000 tokens" in text
    assert "TTFT p50/p99: before 12 ms/46 ms (25 requests); rollout 15 ms/200 ms (80 requests)" in text
    assert "drain lab-sglang1: 3 running, 0 queued at removal, waited 5.2 s (budget 101 s" in text
    assert "drain lab-sglang3: 5 running, 0 queued at removal, waited 7.2 s" in text
    assert "started with running requests and waited for them: 2 of 3" in text
    assert "min 2 during the rollout (6 samples); floor 2 (3 - max_unavailable 1)" in text


@pytest.mark.parametrize(
    ("log", "doc", "smp", "problem"),
    [
        ("", summary(failed=2, ok=118, reasons={"stream_truncated": 2}), None, "2 request(s) failed"),
        ("", summary(sent=0, ok=0), None, "no request was sent"),
        ("", summary(in_flight=3), None, "3 request(s) still in flight"),
        ("", None, samples([3, 1, 3]), "listed 1 healthy worker(s), below the floor 2"),
        ("", None, samples([3, 3], t0=500.0), "no sample of the gateway's workers during the rollout"),
        (play_log(running=(0, 0, 0)), None, None, "no drain started with running requests and waited"),
        ("", summary(phases={"rollout": {"ttft": {"n": 3}}}), None, "no TTFT measured before the rollout"),
    ],
)
def test_the_report_fails_with_its_reason(log: str, doc: dict | None, smp: list[dict] | None, problem: str) -> None:
    assert any(problem in p for p in report(log, doc, smp)[1])


def test_the_floor_follows_the_max_unavailable_the_play_ran_with() -> None:
    lines, problems = report(log=play_log(max_unavailable=2), smp=samples([3, 1, 2]))
    assert problems == []
    assert any("floor 1 (3 - max_unavailable 2)" in line for line in lines)


def test_healthy_counts_skip_a_gateway_that_did_not_answer() -> None:
    smp = [*samples([3, 2]), {"t": 100.9, "workers": None}]
    assert healthy_counts(smp, 100.0, 101.0) == [3, 2]


def test_a_real_watcher_sample_is_read(tmp_path: Path) -> None:
    """watch.py's own output (no gateway: workers null, every node down) is a valid sample."""
    out, stop = tmp_path / "w.jsonl", tmp_path / "stop"
    argv = ["--gateway", "http://127.0.0.1:9", "--node", "http://127.0.0.1:9", "--out", str(out)]
    proc = subprocess.Popen(
        [sys.executable, str(WATCH), *argv, "--stop-file", str(stop), "--key-env", "NO_SUCH_KEY", "--every-s", "0.05"]
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and proc.poll() is None:
            if out.exists() and out.read_text().count("\n") >= 2:
                break
            time.sleep(0.05)
    finally:
        stop.touch()
        proc.wait(timeout=10)
    got = read_samples(out.read_text())
    assert len(got) >= 2
    assert all(s["workers"] is None and math.isfinite(s["t"]) for s in got)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("{not json", "line 1 is not JSON"),
        ('\n{"workers": null}', "line 2 has no time"),
        ('{"t": 1, "workers": {"u": "yes"}}', "'workers' is neither null"),
        ('{"t": NaN, "workers": null}', "line 1 has no time"),
    ],
)
def test_a_bad_sample_is_named(text: str, named: str) -> None:
    with pytest.raises(FiguresError, match=named):
        read_samples(text)


@pytest.mark.parametrize(
    ("doc", "named"),
    [
        ([], "is not a JSON object"),
        (summary(sent="12"), "'sent' is not a count"),
        (summary(failed=-1), "'failed' is not a count"),
        (summary(ok=True), "'ok' is not a count"),
        (summary(reasons={"x": "2"}), "reasons 'x' is not a count"),
        (summary(phases=[]), "'phases' is not"),
    ],
)
def test_a_bad_summary_is_named(doc: object, named: str) -> None:
    with pytest.raises(FiguresError, match=named):
        check_summary(doc)


def test_the_command_exits_0_1_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log, traffic, watch = tmp_path / "log", tmp_path / "t.json", tmp_path / "w.jsonl"
    log.write_text(play_log())
    traffic.write_text(json.dumps(summary()))
    watch.write_text("\n".join(json.dumps(s) for s in samples([3, 2, 3])) + "\n")
    argv = ["--play-log", str(log), "--traffic", str(traffic), "--watch", str(watch)]
    argv += ["--t0", "100", "--t1", "103", "--nodes", "3"]
    assert main(argv) == 0
    assert "min 2 during the rollout" in capsys.readouterr().out
    traffic.write_text(json.dumps(summary(failed=1, ok=119)))
    assert main(argv) == 1
    assert "FAILED: 1 request(s) failed" in capsys.readouterr().out
    watch.write_text("garbage\n")
    assert main(argv) == 2
    assert "watcher sample line 1 is not JSON" in capsys.readouterr().err
    # run as the lab runs it: a plain python3, the file by its path
    out = subprocess.run(
        [sys.executable, str(FIGURES), *argv[:5], str(tmp_path / "none.jsonl"), *argv[6:]],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 2
    assert "none.jsonl" in out.stderr


HOSTS = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,20}", fullmatch=True)


@given(
    host=HOSTS,
    running=st.integers(0, 500),
    queued=st.integers(0, 500),
    seconds=st.decimals(0, 999, places=2),
    noise=st.text(max_size=60),
)
def test_any_hosts_drain_line_reads_back(*, host: str, running: int, queued: int, seconds, noise: str) -> None:
    """The rollout's line for any inventory host name, after arbitrary text, reads back as printed;
    the text alone never raises."""
    drains(noise)
    line = drain(host, running, float(seconds), queued)
    found = [d for d in drains(f"{noise}\n{line}\n") if d["node"] == host]
    assert found
    if not drains(noise):
        assert (found[0]["running"], found[0]["queued"], found[0]["seconds"]) == (running, queued, float(seconds))


@given(k=st.integers(1, 3), noise=st.text(max_size=40))
def test_the_room_line_reads_back(k: int, noise: str) -> None:
    assert max_unavailable_used(f"{noise}\n{room_line('lab-sglang1', k)}\n{noise}") == k


@given(st.text(max_size=300))
def test_any_watcher_text_reads_or_is_named(text: str) -> None:
    error, got = "", []
    try:
        got = read_samples(text)
    except FiguresError as exc:
        error = str(exc)
    assert error.startswith("watcher sample line") or not error
    assert all(math.isfinite(s["t"]) and (s["workers"] is None or isinstance(s["workers"], dict)) for s in got)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
SUMMARY_KEYS = st.sampled_from(["sent", "ok", "failed", "in_flight", "reasons", "rate_rps", "capacity", "phases"])


@given(base=st.booleans(), over=st.dictionaries(SUMMARY_KEYS, JSON, max_size=4))
def test_any_summary_is_checked_or_named(*, base: bool, over: dict) -> None:
    """Any JSON in the summary's fields: a checked summary the report can print, or a named error."""
    doc = summary(**over) if base else over
    error, checked = "", None
    try:
        checked = check_summary(doc)
    except FiguresError as exc:
        error = str(exc)
    assert error.startswith("traffic summary") or checked is not None
    if checked is not None:
        lines, problems = upgrade_report(play_log(), checked, samples([3, 2]), window=(100.0, 101.0), nodes=3)
        assert lines
        assert all(isinstance(p, str) for p in problems)


# the lab's play output as it is printed (callback_result_format = yaml folds long messages)
LAB_YAML = """TASK [gpufleet.sglang.sglang_gateway : Print the room] **************************
ok: [lab-sglang1] =>
    msg: 'lab-sglang1: room to leave the gateway after 1 look(s): 1 of max_unavailable
        1 out; load 1 within 102.4 of the 2 staying node(s)'

TASK [Print the drain] *********************************************************
ok: [lab-sglang1] =>
    msg: 'lab-sglang1: drained in 2.78 s (4 running, 1 queued at removal; budget 120 s;
        0 straggler(s) drained), back in the gateway'
"""


def test_a_yaml_folded_play_output_reads_back() -> None:
    assert [(d["node"], d["running"], d["queued"], d["seconds"]) for d in drains(LAB_YAML)] == [
        ("lab-sglang1", 4, 1, 2.78)
    ]
    assert max_unavailable_used(LAB_YAML) == 1


@given(host=HOSTS, running=st.integers(0, 500), width=st.integers(20, 120), indent=st.integers(1, 8))
def test_any_yaml_folding_of_the_lines_reads_back(*, host: str, running: int, width: int, indent: int) -> None:
    """The drain and room lines dumped as YAML at any width (how Ansible's YAML results fold them)."""
    text = yaml.dump(
        {"msg": f"{drain(host, running, 3.5)} {room_line(host, 2).split(': ', 2)[2]}"},
        width=width,
        indent=indent,
        default_flow_style=False,
    )
    found = drains(text)
    assert [(d["node"], d["running"], d["seconds"]) for d in found] == [(host, running, 3.5)]
    assert max_unavailable_used(text) == 2
