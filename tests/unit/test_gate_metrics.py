# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The gate's textfile (module_utils/gate/metrics.py, module gate_metrics; issue 23 part 4): a gate run's
record as the metrics the alert rules read (GpufleetThroughputBelowBaseline had no writer of its
gpufleet_gate_* series; GpufleetGateBelowBaseline and GpufleetGateStale read the run's own delta and time),
label values escaped, written atomically, changed only when the state changed."""

from __future__ import annotations

import os
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from lib.module import run_module as run_module_at
from lib.playbook import REPO
from lib.prometheus import parse

from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.baseline import make_key, run_record
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.metrics import (
    METRICS,
    GateMetricsError,
    render,
    same_state,
)

MODULE = REPO / "plugins/modules/gate_metrics.py"
WHEN = "2026-12-01T03:41:07.123456+00:00"
# the gate's key of the records (gate_baseline.make_key); all but the host are labels of gpufleet_gate_info
KEY = {
    "host": "sglang-01",
    "model": "GLM-5-NVFP4",
    "model_revision": "0123abcd",
    "profile": "default",
    "sglang_version": "0.5.23",
    "gpu_model": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
}


def record(verdict: str = "fail", **result) -> dict:
    """A record as the action plugin builds it (gate_baseline.run_record) from a module result."""
    key = make_key(**KEY)
    res = {
        "failed": verdict == "fail",
        "verdict": verdict,
        "reason": "regression" if verdict == "fail" else "within_tolerance",
        "msg": "FAIL",
        "median_output_tokens_per_s": 850.0,
        "baseline_median": 1000.0,
        "delta_pct": -15.0,
        "p_value": 0.004,
        "valid_trial_values": [850.0, 840.0, 860.0],
        **result,
    }
    info = {"file": "x.json", "source": "x.json", "problems": []}
    shape = {"api": "native", "concurrency": 32, "input_len": 1024, "output_len": 256, "requests_per_trial": 256}
    return run_record(key, res, info, shape, when=WHEN, accepted=None)


def samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for name, labels, value in parse(text):
        found.setdefault(name, []).append((labels, value))
    return found


def test_a_failed_run_gives_the_series_the_alerts_read() -> None:
    got = samples(render(record(), 0.1))
    assert got["gpufleet_gate_verdict"] == [({}, 2.0)]
    assert got["gpufleet_gate_failed"] == [({}, 1.0)]
    assert got["gpufleet_gate_output_tokens_per_second"] == [({}, 850.0)]
    assert got["gpufleet_gate_baseline_tokens_per_second"] == [({}, 1000.0)]
    assert got["gpufleet_gate_delta_ratio"] == [({}, -0.15)]
    assert got["gpufleet_gate_tolerance_ratio"] == [({}, 0.1)]
    assert got["gpufleet_gate_baseline_concurrency"] == [({}, 32.0)]
    expected_time = datetime(2026, 12, 1, 3, 41, 7, 123456, tzinfo=timezone.utc).timestamp()
    assert got["gpufleet_gate_timestamp_seconds"] == [({}, expected_time)]
    assert got["gpufleet_gate_info"] == [
        (
            {**{k: v for k, v in KEY.items() if k != "host"}, "verdict": "fail", "reason": "regression"},
            1.0,
        )
    ]
    # no node label: the scrape adds it
    assert all("node" not in sample[0] for series in got.values() for sample in series)


def test_a_run_that_wrote_the_baseline_is_the_baseline_and_has_no_delta() -> None:
    first = record("pass", reason="no_baseline", baseline_median=None, delta_pct=None, median_output_tokens_per_s=990.0)
    got = samples(render(first, 0.1, baseline_written=True))
    assert got["gpufleet_gate_baseline_tokens_per_second"] == [({}, 990.0)]
    assert "gpufleet_gate_delta_ratio" not in got
    assert got["gpufleet_gate_verdict"] == [({}, 0.0)]
    # an update of the baseline from a passing run: the new baseline, no drift from it yet
    updated = samples(render(record("pass", delta_pct=-3.0), 0.1, baseline_written=True))
    assert updated["gpufleet_gate_baseline_tokens_per_second"] == [({}, 850.0)]
    assert "gpufleet_gate_delta_ratio" not in updated


def test_label_values_from_outside_are_escaped() -> None:
    hostile = record()
    hostile["key"]["model"] = 'evil"} 1\ngpufleet_gate_failed 0\n\\'
    hostile["reason"] = "a\ud800b"
    text = render(hostile, 0.1)
    got = samples(text)
    assert got["gpufleet_gate_info"][0][0]["model"] == 'evil"} 1\ngpufleet_gate_failed 0\n\\'
    assert got["gpufleet_gate_info"][0][0]["reason"] == "a\ufffdb"
    assert got["gpufleet_gate_failed"] == [({}, 1.0)]


@pytest.mark.parametrize(
    ("change", "tolerance", "message"),
    [
        ({"verdict": "FAIL"}, 0.1, "verdict is 'FAIL', not one of pass, unknown, fail"),
        ({"failed": "yes"}, 0.1, "failed is not true or false"),
        ({"median_output_tokens_per_s": "850"}, 0.1, "median_output_tokens_per_s is '850', not a finite number"),
        ({"delta_pct": float("nan")}, 0.1, "delta_pct is nan, not a finite number"),
        ({"baseline_median": 0}, 0.1, "baseline_median is 0, not above 0"),
        ({"time": "yesterday"}, 0.1, "time 'yesterday' is not an ISO 8601 date and time"),
        ({"time": "2026-12-01T03:41:07"}, 0.1, "has no time zone"),
        ({"key": ["m"]}, 0.1, "key is not a mapping"),
        ({"shape": {"concurrency": -1}}, 0.1, "concurrency is -1, not above 0"),
        ({}, 1.5, r"tolerance 1.5 is not a number in \(0, 1\)"),
        ({}, True, r"tolerance True is not a number in \(0, 1\)"),
    ],
)
def test_a_record_of_the_wrong_shape_is_named(change: dict, tolerance: object, message: str) -> None:
    with pytest.raises(GateMetricsError, match=message):
        render({**record(), **change}, tolerance)


def test_a_new_measurement_of_the_same_state_is_no_change() -> None:
    old = render(record(), 0.1)
    again = render(
        {**record(median_output_tokens_per_s=845.0, delta_pct=-15.5), "time": "2026-12-02T03:40:00+00:00"}, 0.1
    )
    assert old != again
    assert same_state(old, again)
    assert not same_state(old, render(record("pass"), 0.1))
    assert not same_state(old, render(record(baseline_median=1100.0), 0.1))
    assert not same_state(old, render(record(), 0.05))


@given(
    st.fixed_dictionaries(
        {},
        optional={
            "verdict": st.sampled_from(["pass", "fail", "unknown", "PASS", "", None]),
            "failed": st.one_of(st.booleans(), st.none(), st.text(max_size=3)),
            "median_output_tokens_per_s": st.one_of(st.none(), st.floats(), st.integers(), st.text(max_size=3)),
            "baseline_median": st.one_of(st.none(), st.floats(), st.integers(-5, 5)),
            "delta_pct": st.one_of(st.none(), st.floats(allow_nan=True)),
            "time": st.one_of(st.none(), st.text(max_size=30), st.just(WHEN)),
            "key": st.one_of(
                st.dictionaries(st.sampled_from(["model", "profile"]), st.text(max_size=10)), st.text(max_size=3)
            ),
            "shape": st.one_of(st.dictionaries(st.just("concurrency"), st.integers(-2, 64)), st.none()),
            "reason": st.one_of(st.text(max_size=20), st.integers()),
        },
    ),
    st.one_of(st.floats(), st.just(0.1)),
    st.booleans(),
)
def test_any_record_renders_a_valid_file_or_a_named_error(change: dict, tolerance: float, written: bool) -> None:
    message = ""
    try:
        text = render({**record(), **change}, tolerance, baseline_written=written)
    except GateMetricsError as exc:
        message = str(exc)
    if message:
        assert re.match(
            r"^(verdict|failed|median|baseline|delta|time|key|shape|concurrency|reason|tolerance|the record)", message
        )
        return
    got = samples(text)  # parses: every line a HELP, TYPE or sample of the format
    assert set(got) <= set(METRICS)
    assert all(len(series) == 1 for series in got.values())


# --------------------------------------------------------------------------- the module


def run_module(tmp_path: Path, args: dict) -> tuple[int, dict]:
    return run_module_at(MODULE, args, tmp_path)


def test_module_writes_the_file_and_reports_a_change_only_of_the_state(tmp_path: Path) -> None:
    prom = tmp_path / "gpufleet_gate.prom"
    rc, result = run_module(tmp_path, {"record": record(), "tolerance": 0.1, "textfile": str(prom)})
    assert rc == 0, result
    assert result["changed"] is True
    assert result["textfile"] == {"path": str(prom), "written": True}
    assert ("gpufleet_gate_delta_ratio", {}, -0.15) in parse(prom.read_text(encoding="utf-8"))
    again = {**record(median_output_tokens_per_s=851.0), "time": "2026-12-02T03:40:00+00:00"}
    rc, result = run_module(tmp_path, {"record": again, "tolerance": 0.1, "textfile": str(prom)})
    assert (rc, result["changed"]) == (0, False)
    assert ("gpufleet_gate_output_tokens_per_second", {}, 851.0) in parse(prom.read_text(encoding="utf-8"))
    rc, result = run_module(tmp_path, {"record": record("pass"), "tolerance": 0.1, "textfile": str(prom)})
    assert (rc, result["changed"]) == (0, True)
    assert sorted(os.listdir(tmp_path)) == ["args.json", "gpufleet_gate.prom"]  # no temporary file left


def test_module_takes_the_gate_modules_tolerance_and_writes_nothing_in_check_mode(tmp_path: Path) -> None:
    prom = tmp_path / "gpufleet_gate.prom"
    rc, result = run_module(tmp_path, {"record": record(), "textfile": str(prom), "_ansible_check_mode": True})
    assert (rc, result["changed"], result["textfile"]["written"]) == (0, False, False)
    assert not prom.exists()
    rc, result = run_module(tmp_path, {"record": record(), "textfile": str(prom)})
    assert rc == 0, result
    assert ("gpufleet_gate_tolerance_ratio", {}, 0.1) in parse(prom.read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("textfile", "change", "message"),
    [
        ("gate.txt", {}, "does not end in .prom"),
        ("missing/gate.prom", {}, "does not exist"),
        ("gate.prom", {"verdict": "maybe"}, "verdict is 'maybe'"),
    ],
)
def test_module_names_what_is_wrong_and_writes_nothing(
    tmp_path: Path, textfile: str, change: dict, message: str
) -> None:
    rc, result = run_module(tmp_path, {"record": {**record(), **change}, "textfile": str(tmp_path / textfile)})
    assert rc == 1
    assert result["msg"].startswith("gate_metrics: the textfile ")
    assert message in result["msg"]
    assert sorted(os.listdir(tmp_path)) == ["args.json"]


# --------------------------------------------------------------------------- writer and rules agree


def test_every_gate_metric_the_rules_read_has_a_writer() -> None:
    rules = (REPO / "roles/fleet_monitoring/templates/gpufleet-rules.yml.j2").read_text(encoding="utf-8")
    read = set(re.findall(r"\bgpufleet_gate_[a-z_]+\b", rules))
    assert read >= {"gpufleet_gate_baseline_tokens_per_second", "gpufleet_gate_delta_ratio"}
    assert read <= set(METRICS), read - set(METRICS)
    docs = (REPO / "docs/monitoring.md").read_text(encoding="utf-8")
    assert all(f"| `{name}` |" in docs for name in METRICS), [n for n in METRICS if f"| `{n}` |" not in docs]


def test_the_role_exports_the_gate_result_before_it_fails_the_host() -> None:
    tasks = yaml.safe_load((REPO / "roles/throughput_gate/tasks/main.yml").read_text(encoding="utf-8"))
    names = [t["name"] for t in tasks]
    export = names.index("Export the gate's result for the alert rules")
    assert names.index("Publish the gate result") < export < names.index("Fail the host whose gate failed")
    assert names.index("Refuse a gate textfile the collector would not read") < names.index(
        "Measure throughput against the baseline"
    )
    assert tasks[export]["gpufleet.sglang.gate_metrics"]["record"] == "{{ throughput_gate_result }}"
    assert "bench" in tasks[export]["tags"]
