# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A node that still serves in the gateway is not measured under the fleet's traffic (issue 26): its newest
gate run of the same baseline key stands when it passed (fleet_report.last_run, lookup gate_last_run, the
throughput_gate role's throughput_gate_reuse_pass); otherwise the gate measures. The history's end is read
defensively: a damaged line can only make an older run, or none, the newest one."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import yaml
from hypothesis import given
from hypothesis import strategies as st
from lib.playbook import Result, run_playbook

from ansible_collections.gpufleet.sglang.plugins.module_utils.fleet.report import last_run, passed
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.baseline import Paths, make_key

FIXTURE = sorted((Path(__file__).parent / "fixtures" / "report").glob("*0.5.12.post1*.history.jsonl"))[0]
RECORDS = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines() if line.strip()]
KEY = RECORDS[0]["key"]


def line(rec: dict) -> bytes:
    return json.dumps(rec, sort_keys=True, separators=(",", ":")).encode() + b"\n"


def run(**change: object) -> dict:
    return dict(RECORDS[0], **change)


def test_the_newest_run_of_the_key_is_read():
    data = b"".join(
        line(run(time=f"2026-11-0{i}T10:00:00+00:00", median_output_tokens_per_s=1000.0 + i)) for i in (1, 2)
    )
    row = last_run(data, KEY)
    assert row["time"] == "2026-11-02T10:00:00+00:00"
    assert row["median_output_tokens_per_s"] == 1002.0
    assert passed(row)


def test_a_newer_failure_is_not_a_pass_even_after_earlier_passes():
    data = line(run()) + line(run(failed=True, verdict="fail", reason="regression", time="2026-11-09T10:00:00+00:00"))
    row = last_run(data, KEY)
    assert row["verdict"] == "fail"
    assert not passed(row)


def test_damaged_lines_and_other_keys_are_passed_over():
    other = dict(KEY, sglang_version="0.5.13")
    data = (
        line(run(time="2026-11-01T10:00:00+00:00"))
        + line(run(key=other, time="2026-11-05T10:00:00+00:00"))
        + b'{"key": '
        + json.dumps(KEY).encode()
        + b', "failed": "no", "verdict": "pass"}\n'
        + line(run(median_output_tokens_per_s=float("nan")))  # NaN is not JSON the reader accepts
        + line(run(time="2026-11-07T10:00:00+00:00"))[:100]  # cut off mid-write
    )
    row = last_run(data, KEY)
    assert row["time"] == "2026-11-01T10:00:00+00:00"
    assert last_run(data, other)["time"] == "2026-11-05T10:00:00+00:00"
    assert last_run(b"", KEY) is None
    assert last_run(b"\x00\xff garbage\n[1,2]\nnull\n", KEY) is None


def test_a_pass_without_a_measured_throughput_is_not_reused():
    for value in (None, 0, -5.0):
        assert not passed(last_run(line(run(median_output_tokens_per_s=value)), KEY))
    assert not passed(None)


@given(
    st.lists(
        st.one_of(
            st.binary(max_size=80),
            st.builds(lambda r: line(r)[: max(1, len(line(r)) // 2)], st.just(RECORDS[0])),
            st.builds(
                lambda v, f, m: line(run(verdict=v, failed=f, median_output_tokens_per_s=m)),
                st.sampled_from(["pass", "fail", "unknown", "PASS", ""]),
                st.booleans(),
                st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False), st.integers()),
            ),
        ),
        max_size=12,
    )
)
def test_any_history_gives_a_run_of_the_key_or_none(chunks):
    data = b"\n".join(chunks)
    row = last_run(data, KEY)
    if row is not None:
        assert row["host"] == KEY["host"]
        assert row["sglang_version"] == KEY["sglang_version"]
        # a pass needs a positive measured figure and a passing, not failed, record
        if passed(row):
            assert row["verdict"].lower() == "pass"
            assert not row["failed"]
            assert row["median_output_tokens_per_s"] > 0


# ---- the role: with throughput_gate_reuse_pass, a passing newest run stands and nothing is measured ----


def gate_play(tmp_path: Path, history: bytes | None) -> Result:
    """The throughput_gate role on this machine against a port nothing listens on: a run that measures fails."""
    baselines = tmp_path / "baselines"
    baselines.mkdir()
    key = make_key(**KEY)
    if history is not None:
        Path(Paths.for_key(str(baselines), key).history).write_bytes(history)
    play = [
        {
            "name": "gate",
            "hosts": "node",
            "gather_facts": False,
            "vars": {
                "throughput_gate_reuse_pass": True,
                "throughput_gate_baseline_dir": str(baselines),
                "throughput_gate_url": "http://127.0.0.1:9",
                "throughput_gate_ready_timeout": 2,
                "throughput_gate_telemetry": False,
                "throughput_gate_baseline_model": KEY["model"],
                "throughput_gate_model_revision": KEY["model_revision"],
                "throughput_gate_profile": KEY["profile"],
                "throughput_gate_sglang_version": KEY["sglang_version"],
                "throughput_gate_gpu_model": KEY["gpu_model"],
            },
            "roles": ["gpufleet.sglang.throughput_gate"],
            "post_tasks": [{"name": "Show", "ansible.builtin.debug": {"var": "throughput_gate_result"}}],
        }
    ]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play), encoding="utf-8")
    inv = {"all": {"hosts": {KEY["host"]: None}, "children": {"node": {"hosts": {KEY["host"]: None}}}}}
    inv["all"]["vars"] = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inv), encoding="utf-8")
    # the default callback with JSON results: the tests read the summary row and the result's fields
    env = {"ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default", "ANSIBLE_CALLBACK_RESULT_FORMAT": "json"}
    return run_playbook(tmp_path / "play.yml", inventory=tmp_path / "hosts.yml", env=env, timeout=300)


def test_role_reuses_a_passing_newest_run_and_measures_nothing(tmp_path):
    history = line(run(time="2026-11-20T03:00:00+00:00", median_output_tokens_per_s=3737.5))
    proc = gate_play(tmp_path, history)
    assert proc.rc == 0, proc.stdout[-3000:]
    assert re.search(r"lab-sglang1\s+PASS\s+reused\s+3737\.5\s.*last gate 2026-11-20T03:00:00\+00:00", proc.stdout)
    assert re.search(r"Run the throughput gate\] \*+\nskipping: ", proc.stdout), proc.stdout[-3000:]
    assert '"reason": "reused"' in proc.stdout
    # nothing was appended: the history is the one line it had
    files = list((tmp_path / "baselines").glob("*.history.jsonl"))
    assert [f.read_bytes() for f in files] == [history]


def test_role_measures_when_the_newest_run_failed_or_there_is_none(tmp_path):
    failed = line(run()) + line(run(failed=True, verdict="fail", reason="regression"))
    for name, history in (("failed", failed), ("none", None)):
        case = tmp_path / name
        case.mkdir()
        proc = gate_play(case, history)
        # it measured: against a port nothing listens on, the gate fails
        assert proc.rc == 2, proc.stdout[-3000:]
        assert "not ready after 2s (2 polls of /health_generate)" in proc.stdout, proc.stdout[-3000:]
        assert "PASS     reused" not in proc.stdout
