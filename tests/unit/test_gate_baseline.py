# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Baseline rules of the throughput gate (module_utils/gate/baseline.py): key, version order,
choice and fallback, validation, write decision, atomic writes, the lock with real concurrent
processes, and secret masking."""

from __future__ import annotations

import hashlib
import json
import math
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lib.startup import COLD_START

from ansible_collections.gpufleet.sglang.plugins.module_utils.gate import baseline as gb

KEY = gb.make_key(
    host="node1", model="zai-org/GLM-5-NVFP4", profile="fast", sglang_version="0.5.13", gpu_model="RTX PRO 6000"
)
TRIALS = [1000.0, 1010.0, 990.0, 1005.0, 995.0]


def doc(key: dict[str, str] | None = None, trials: list[float] | None = None, override: dict | None = None) -> bytes:
    d = gb.baseline_document(key or KEY, trials or TRIALS, {"concurrency": 8}, "2026-11-30T00:00:00+00:00", None)
    d.update(override or {})
    return json.dumps(d).encode()


def with_(**changes: str) -> dict[str, str]:
    return gb.make_key(**dict(KEY, **changes))


# --------------------------------------------------------------------------- key


def test_key_is_structured_and_the_name_is_unique_per_key():
    # "test/model" and "test_model" give the same readable label, never the same file
    a = gb.Paths.for_key("/d", with_(model="test/model"))
    b = gb.Paths.for_key("/d", with_(model="test_model"))
    assert a.baseline != b.baseline
    assert a.baseline.startswith("/d/node1__test_model__unpinned__fast__0.5.13__RTX_PRO_6000__")
    assert a.history == a.baseline[: -len(".json")] + ".history.jsonl"
    assert a.lock == a.baseline[: -len(".json")] + ".lock"


@pytest.mark.parametrize(
    ("parts", "needle"),
    [
        ({"model": ""}, "'model' must be a non-empty string"),
        ({"profile": None}, "'profile' must be a non-empty string"),
        ({"gpu_model": "RTX\nPRO"}, "control character"),
        ({"colour": "red"}, "unknown baseline key parts: colour"),
    ],
)
def test_bad_key_parts_are_named(parts, needle):
    with pytest.raises(gb.BaselineError, match=needle.replace("(", r"\(")):
        gb.make_key(**dict(KEY, **parts))


# --------------------------------------------------------------------------- choosing


def files(*docs: tuple[str, bytes]) -> list[tuple[str, bytes]]:
    return list(docs)


def test_own_baseline_is_chosen():
    c = gb.choose(KEY, ("/d/own.json", doc()), [], fallback=True)
    assert c.baseline is not None
    assert c.trials == TRIALS
    assert not c.fallback
    assert c.exact_digest is not None


def test_fallback_takes_the_highest_earlier_version_not_the_newest_file():
    key = with_(sglang_version="0.5.14")
    others = files(
        ("/d/a.json", doc(with_(sglang_version="0.5.9"), [1.0] * 5)),
        ("/d/b.json", doc(with_(sglang_version="0.5.12.post1"), [2.0] * 5)),
        ("/d/c.json", doc(with_(sglang_version="0.5.13"), [3.0] * 5)),
        ("/d/d.json", doc(with_(sglang_version="0.5.20"), [4.0] * 5)),  # later, never a fallback
        ("/d/e.json", doc(with_(sglang_version="0.5.13", gpu_model="H200"), [5.0] * 5)),
        ("/d/f.json", doc(with_(sglang_version="0.5.13", host="node2"), [6.0] * 5)),
    )
    c = gb.choose(key, ("/d/own.json", None), others, fallback=True)
    assert c.fallback
    assert c.trials == [3.0] * 5
    assert "0.5.13" in c.note
    # 0.5.12.post1 beats 0.5.9 (string order would pick 0.5.9)
    c2 = gb.choose(with_(sglang_version="0.5.13"), ("/d/own.json", None), others[:2], fallback=True)
    assert c2.trials == [2.0] * 5


def test_a_new_model_revision_is_gated_against_the_revision_it_replaces():
    old_rev, new_rev = "a" * 40, "b" * 40
    key = with_(model_revision=new_rev)
    others = files(
        ("/d/old.json", doc(with_(model_revision=old_rev), [3.0] * 5)),
        ("/d/older.json", doc(with_(model_revision="c" * 40, sglang_version="0.5.12.post1"), [2.0] * 5)),
        ("/d/other-model.json", doc(with_(model="x/y", model_revision=old_rev), [9.0] * 5)),
    )
    c = gb.choose(key, ("/d/own.json", None), others, fallback=True)
    assert c.fallback
    assert c.trials == [3.0] * 5
    assert "model revision aaaaaaaaaaaa" in c.note
    # between two baselines of the same version, the newer one is the one replaced
    newer = json.loads(doc(with_(model_revision="d" * 40), [4.0] * 5))
    newer["updated"] = "2026-12-01T00:00:00+00:00"
    c2 = gb.choose(key, ("/d/own.json", None), [*others, ("/d/newer.json", json.dumps(newer).encode())], fallback=True)
    assert c2.trials == [4.0] * 5
    # the same revision's own file is never a fallback for itself
    assert gb.choose(with_(model_revision=old_rev), ("/d/own.json", None), others[:1], fallback=True).baseline is None
    # a key without a revision is 'unpinned'
    assert gb.make_key(**{k: v for k, v in KEY.items() if k != "model_revision"})["model_revision"] == "unpinned"


def test_a_profile_that_is_a_prefix_of_another_never_matches():
    others = files(("/d/x.json", doc(with_(profile="fast__tp8", sglang_version="0.5.9"))))
    c = gb.choose(KEY, ("/d/own.json", None), others, fallback=True)
    assert c.baseline is None
    assert c.trials == []


def test_no_fallback_when_switched_off_or_version_has_no_order():
    others = files(("/d/x.json", doc(with_(sglang_version="0.5.9"))))
    assert gb.choose(KEY, ("/d/own.json", None), others, fallback=False).baseline is None
    unknown = with_(sglang_version="unknown")
    c = gb.choose(unknown, ("/d/own.json", None), others, fallback=True)
    assert c.baseline is None
    assert "has no order" in c.note


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b"", "is empty"),
        (b"  \n", "is empty"),
        (b"{not json", "is not valid JSON"),
        (b"\xff\xfe", "is not valid JSON"),
        (b"[1, 2]", "is not a throughput_gate baseline"),
        (json.dumps({"trials": [1, 2, 3, 4, 5]}).encode(), "is not a throughput_gate baseline"),
        (doc(override={"key": {"host": "x"}}), 'has no valid "key"'),
        (doc(override={"trials": ["fast", 1, 1, 1, 1]}), '"trials" must be a list'),
        (doc(override={"trials": [1, 2, float("nan"), 4, 5]}), '"trials" must be a list'),
        (doc(override={"trials": [1, 2, 3]}), "has 3 trials; a baseline needs at least 5"),
    ],
)
def test_unusable_own_file_is_named_with_the_fix(data, needle):
    with pytest.raises(gb.BaselineError) as err:
        gb.choose(KEY, ("/d/own.json", data), [], fallback=True)
    assert "/d/own.json" in str(err.value)
    assert needle in str(err.value)
    assert "throughput_gate_accept_baseline=true" in str(err.value)


def test_foreign_key_under_this_keys_name_is_refused():
    with pytest.raises(gb.BaselineError, match="belongs to another key"):
        gb.choose(KEY, ("/d/own.json", doc(with_(host="node2"))), [], fallback=True)


def test_a_corrupt_file_in_the_directory_stops_the_fallback_search():
    others = files(("/d/good.json", doc(with_(sglang_version="0.5.9"))), ("/d/bad.json", b"{"))
    with pytest.raises(gb.BaselineError, match=r"/d/bad\.json is not valid JSON"):
        gb.choose(KEY, ("/d/own.json", None), others, fallback=True)


def test_accepting_tolerates_unusable_files_and_says_so():
    c = gb.choose(KEY, ("/d/own.json", b"{"), [], fallback=True, tolerate=True)
    assert c.baseline is None
    assert c.exact_digest is not None
    assert "not valid JSON" in c.problems[0]


def test_shape_of_and_mismatch():
    shape = gb.shape_of({"api": "native", "concurrency": "8", "input_len": 32, "url": "x"})
    assert shape == {"api": "native", "concurrency": 8, "input_len": 32}
    assert gb.shape_mismatch({"concurrency": 8, "output_len": 32}, shape) == []
    assert gb.shape_mismatch({"concurrency": 64}, shape) == ["concurrency: 64 -> 8"]


# --------------------------------------------------------------------------- write decision

PASS = {"failed": False, "verdict": "pass", "reason": "within_tolerance", "valid_trial_values": TRIALS}


@pytest.mark.parametrize(
    ("result", "exists", "update", "accept", "write"),
    [
        (PASS, False, False, False, True),  # first baseline
        (PASS, True, False, False, False),  # exists, no update
        (PASS, True, True, False, True),  # update from a pass
        (dict(PASS, valid_trial_values=TRIALS[:3]), False, False, False, False),  # 3 trials: never
        (dict(PASS, valid_trial_values=TRIALS[:3]), False, False, True, False),  # not even accepted
        (dict(PASS, failed=True, verdict="fail", reason="regression"), True, True, False, False),
        (dict(PASS, failed=True, verdict="fail", reason="regression"), True, False, True, True),  # accepted
        (dict(PASS, failed=True, verdict="unknown", reason="invalid_trials"), True, False, True, False),
        (dict(PASS, failed=True, verdict="fail", reason="below_floor"), True, False, True, False),
        (dict(PASS, valid_trial_values=[1.0, 2.0, 3.0, 4.0, float("nan")]), False, False, False, False),
        ({"failed": True, "msg": "boom"}, False, False, False, False),
    ],
)
def test_write_decision(result, exists, update, accept, write):
    got, why = gb.write_decision(result, exact_exists=exists, update=update, accept=accept)
    assert got is write, why


def test_baseline_document_refuses_fewer_than_five():
    with pytest.raises(gb.BaselineError, match="refusing to write a baseline of 3 trials"):
        gb.baseline_document(KEY, TRIALS[:3], {}, "now", None)


# --------------------------------------------------------------------------- files


def test_writable_probe_and_check_mode(tmp_path):
    target = tmp_path / "new" / "dir"
    assert gb.check_writable(str(target), create=False) is None
    assert not target.exists()  # check mode creates nothing
    assert gb.check_writable(str(target), create=True) is None
    assert target.is_dir()
    assert list(target.iterdir()) == []  # the probe is removed
    afile = tmp_path / "file"
    afile.write_text("x")
    assert "is not a directory" in gb.check_writable(str(afile), create=True)


def test_read_only_directory_is_reported(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    with read_only(ro):
        problem = gb.check_writable(str(ro), create=True)
    assert problem is not None
    assert f"baseline directory {ro} is not writable" in problem


class read_only:
    """A directory nobody can write: ``chattr +i`` for root (who ignores modes), mode 0555 otherwise."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> None:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "+i", str(self.path)], check=True)
        else:
            self.path.chmod(0o555)

    def __exit__(self, *exc: object) -> None:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(self.path)], check=True)
        else:
            self.path.chmod(0o755)


def test_atomic_write_leaves_no_temp_and_keeps_the_old_file_on_error(tmp_path, monkeypatch):
    path = tmp_path / "b.json"
    gb.atomic_write(str(path), "old\n")

    def disk_full(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(gb.os, "replace", disk_full)
    with pytest.raises(OSError, match="No space left"):
        gb.atomic_write(str(path), "new\n")
    assert path.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.json"]


def test_append_line_closes_a_torn_last_line(tmp_path):
    path = tmp_path / "h.jsonl"
    path.write_text('{"a": 1}\n{"torn"')
    gb.append_line(str(path), '{"b": 2}')
    assert path.read_text().splitlines() == ['{"a": 1}', '{"torn"', '{"b": 2}']
    with pytest.raises(gb.BaselineError, match="line break"):
        gb.append_line(str(path), "a\nb")


def test_lock_wait_has_a_deadline(tmp_path):
    lock = str(tmp_path / "k.lock")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import fcntl,os,time; fd=os.open({lock!r}, os.O_RDWR|os.O_CREAT); "
            "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(30)",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout.readline() == b"held\n"
        start = time.monotonic()
        with (
            pytest.raises(gb.BaselineError, match=r"held the baseline lock .* for more than 0.5s"),
            gb.locked(lock, timeout=0.5),
        ):
            pass
        assert time.monotonic() - start < 10  # the holder keeps the lock for 30 s
    finally:
        holder.kill()
        holder.wait()
    with gb.locked(lock, timeout=1):  # released when its process ended
        pass


def test_commit_compare_and_swap(tmp_path):
    paths = gb.Paths.for_key(str(tmp_path), KEY)
    first = gb.baseline_document(KEY, TRIALS, {}, "t1", None)
    done = gb.commit(paths, {"run": 1}, first, expected_digest=None, accept=False)
    assert done.written
    # a second run that also started with no baseline must not replace the first one
    second = gb.baseline_document(KEY, [2000.0] * 5, {}, "t2", None)
    done2 = gb.commit(paths, {"run": 2}, second, expected_digest=None, accept=False)
    assert not done2.written
    assert "another run changed" in done2.note
    assert json.loads(Path(paths.baseline).read_text())["trials"] == TRIALS
    # accepting on purpose replaces whatever is there
    done3 = gb.commit(paths, {"run": 3}, second, expected_digest=None, accept=True)
    assert done3.written
    history = [json.loads(line) for line in Path(paths.history).read_text().splitlines()]
    assert [(h["run"], h["baseline_written"]) for h in history] == [(1, True), (2, False), (3, True)]


ROUNDS = 40


def _racer(directory: str, n: int, barrier) -> None:  # runs in a child process
    paths = gb.Paths.for_key(directory, KEY)
    barrier.wait()
    for i in range(ROUNDS):
        data = gb.read_file(paths.baseline)
        seen = None if data is None else json.loads(data)["updated"]
        digest = None if data is None else hashlib.sha256(data).hexdigest()
        accept = i % 5 == 0
        new = gb.baseline_document(KEY, [float(n * 1000 + i + 1)] * 5, {"pad": "x" * 20000}, f"{n}-{i}", None)
        record = {"run": f"{n}-{i}", "seen": seen, "accept": accept, "pad": "y" * 5000}
        gb.commit(paths, record, new, expected_digest=digest, accept=accept)


def test_concurrent_processes_lose_no_history_line_and_never_interleave_a_baseline(tmp_path):
    ctx = multiprocessing.get_context("fork")
    procs = 6
    barrier = ctx.Barrier(procs)
    workers = [ctx.Process(target=_racer, args=(str(tmp_path), n, barrier)) for n in range(procs)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
        assert w.exitcode == 0
    paths = gb.Paths.for_key(str(tmp_path), KEY)
    records = [json.loads(line) for line in Path(paths.history).read_text().splitlines()]  # every line whole
    assert sorted(r["run"] for r in records) == sorted(f"{n}-{i}" for n in range(procs) for i in range(ROUNDS))
    # the history order is the write order: each compare-and-swap saw the baseline the history says was current
    current = None
    for r in records:
        if r["baseline_written"]:
            assert r["accept"] or r["seen"] == current, r["run"]
            current = r["run"]
        else:
            assert not r["accept"], r["run"]
            assert r["seen"] != current, r["run"]
    final = gb.parse_baseline(paths.baseline, Path(paths.baseline).read_bytes())  # one whole document
    assert final.doc["updated"] == current
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_host_summary_row():
    assert gb.host_summary_row("node1", {"summary_row": "PASS     x"}) == f"{'node1':<24} PASS     x"
    line = gb.host_summary_row("node1", {"failed": True, "msg": "m" * 100})
    assert line.startswith(f"{'node1':<24} FAIL")
    assert line.endswith("...")


def test_run_record_carries_the_host_summary_row():
    result = {"verdict": "pass", "reason": "within_tolerance", "summary_row": "PASS     within_tolerance"}
    record = gb.run_record(KEY, result, {}, {"concurrency": 8}, when="2026-11-30T00:00:00+00:00", accepted=None)
    assert record["host_summary_row"] == gb.host_summary_row(KEY["host"], result)
    assert "summary_line" not in record  # its former name (docs/glossary.md); old history lines keep it


def test_gpu_health_goes_into_the_record_and_the_end_of_the_summary_row():
    result = {"verdict": "pass", "reason": "within_tolerance", "summary_row": "PASS     within_tolerance"}
    health = {"level": "degraded", "verdict": "degraded: gpu 3: PCIe link Gen3 x8\n(max Gen5 x16)"}
    record = gb.run_record(
        KEY, result, {}, {"concurrency": 8}, when="2026-11-30T00:00:00+00:00", accepted=None, gpu_health=health
    )
    assert record["gpu_health"] == health
    assert record["host_summary_row"] == (
        f"{KEY['host']:<24} PASS     within_tolerance; gpu degraded: gpu 3: PCIe link Gen3 x8 (max Gen5 x16)"
    )
    failed = gb.host_summary_row("node1", {"failed": True, "msg": "boom"}, {"level": "healthy", "verdict": "healthy"})
    assert failed == f"{'node1':<24} {'FAIL':<8} boom; gpu healthy"
    unchecked = gb.run_record(KEY, result, {}, {}, when="2026-11-30T00:00:00+00:00", accepted=None)
    assert unchecked["gpu_health"] is None
    assert unchecked["host_summary_row"].endswith("within_tolerance")


def test_gpu_health_option_is_checked_on_the_controller():
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator  # noqa: PLC0415

    from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.spec import CONTROLLER_ARGUMENT_SPEC  # noqa: PLC0415

    validator = ArgumentSpecValidator(CONTROLLER_ARGUMENT_SPEC)
    assert not validator.validate({"gpu_health": {"level": "failed", "verdict": "failed: x"}}).error_messages
    errors = validator.validate({"gpu_health": {"level": "sick", "verdict": "x"}}).error_messages
    assert errors
    assert errors[0] == "value of level must be one of: healthy, degraded, failed, got: sick found in gpu_health"


def test_cold_start_goes_into_the_record_checked():
    result = {"verdict": "pass", "reason": "within_tolerance", "summary_row": "PASS     within_tolerance"}
    when = "2026-11-30T00:00:00+00:00"
    record = gb.run_record(KEY, result, {}, {}, when=when, accepted=None, cold_start=COLD_START)
    assert record["cold_start"] == COLD_START
    assert "cold_start_problem" not in record
    # unknown: absent, not null
    for unknown in (None, {}):
        assert "cold_start" not in gb.run_record(KEY, result, {}, {}, when=when, accepted=None, cold_start=unknown)
    bad = gb.run_record(KEY, result, {}, {}, when=when, accepted=None, cold_start=dict(COLD_START, ready_s=-3))
    assert "cold_start" not in bad
    assert bad["cold_start_problem"] == "cold_start.ready_s is negative; left out"
    json.dumps(bad, allow_nan=False)  # what the history appends
    nan = gb.run_record(KEY, result, {}, {}, when=when, accepted=None, cold_start=dict(COLD_START, ready_s=math.nan))
    assert nan["cold_start_problem"].startswith("cold_start.ready_s is not finite")


def test_cold_start_option_is_a_controller_option():
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator  # noqa: PLC0415

    from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.spec import CONTROLLER_ARGUMENT_SPEC  # noqa: PLC0415

    validator = ArgumentSpecValidator(CONTROLLER_ARGUMENT_SPEC)
    checked = validator.validate({"cold_start": COLD_START})
    assert not checked.error_messages
    assert checked.validated_parameters["cold_start"] == COLD_START
    assert validator.validate({"cold_start": [1]}).error_messages
