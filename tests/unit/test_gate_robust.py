# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The throughput gate cannot PASS a regression (issue 22): a baseline with a far-off trial, the
guard at the one place a verdict is produced, the baseline spread refusal, and hypothesis over
baselines with outliers, zeros, ties and huge values against currents 15-60% slower."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpufleet.sglang.plugins.module_utils.gate import baseline as gate_baseline
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate import runner as gate_runner
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.limits import GateInputError
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.stats import (
    BASELINE_MAX_HIGH,
    BASELINE_MAX_LOW,
    BEYOND_TOLERANCE,
    WINSOR_SCALE_FLOOR,
    Decision,
    Design,
    baseline_spread_problem,
    decide,
    evaluate,
    guard,
    median,
    winsorised_logs,
)

SEQUENTIAL, FIXED = Design(), Design(name="fixed")
QUIET = (
    1.0,
    1.01,
    0.99,
    1.0,
    1.005,
    0.995,
    1.0,
    0.998,
    1.002,
    1.0,
    1.0,
    1.0,
    0.999,
    1.001,
    1.0,
    1.0,
    1.0,
    1.0,
    1.0,
    1.0,
)


def run_gate(current: list[float], baseline: list[float], design: Design) -> Decision:
    """Feed valid trials one at a time, as the gate does, until a verdict."""
    for i in range(1, len(current) + 1):
        d = evaluate(current[:i], baseline, design)
        if d is not None:
            return d
    raise AssertionError(f"no verdict after {len(current)} trials")


# ------------------------------------------------------------------ the reviewer's finding, named


# A stored baseline of four normal trials and one measured while another job held the GPUs. The
# sequential design used to average the far-off trial into the baseline's geometric mean and
# report PASS (within_tolerance) for a server 30-50% slower, while its message printed the -50%
# median delta; the fixed design failed it.
REVIEWER = [
    ("one trial at 5%, server 50% slower", [1000.0, 1010.0, 990.0, 1005.0, 50.0], 0.5),
    ("one trial at 5%, server 40% slower", [1000.0, 1010.0, 990.0, 1005.0, 50.0], 0.6),
    ("one trial at 5%, server 30% slower", [1000.0, 1010.0, 990.0, 1005.0, 50.0], 0.7),
    ("one trial at 15%, server 30% slower", [1000.0, 1010.0, 990.0, 1005.0, 150.0], 0.7),
    ("tied trials and one at 10%, server 40% slower", [1000.0] * 4 + [100.0], 0.6),
    ("tied trials and one at 10%, server 30% slower", [1000.0] * 4 + [100.0], 0.7),
]


@pytest.mark.parametrize(("name", "baseline", "ratio"), REVIEWER, ids=[r[0] for r in REVIEWER])
@pytest.mark.parametrize("design", [SEQUENTIAL, FIXED], ids=["sequential", "fixed"])
def test_reviewer_baseline_with_a_far_off_trial_never_passes_a_slow_server(name, baseline, ratio, design):
    del name
    current = [median(baseline) * ratio * f for f in QUIET]
    d = run_gate(current, baseline, design)
    assert d.verdict == "fail", d
    assert d.delta_pct == pytest.approx((ratio - 1) * 100, abs=1.0)


def test_reviewer_baseline_is_refused_where_it_is_stored(tmp_path):
    key = gate_baseline.make_key(
        host="node1", model="m", profile="p", sglang_version="0.5.23", gpu_model="g", model_revision="r1"
    )
    doc = {"format": gate_baseline.FORMAT, "key": key, "trials": [1000.0, 1010.0, 990.0, 1005.0, 50.0]}
    path = str(tmp_path / "node1.json")
    with pytest.raises(gate_baseline.BaselineError) as err:
        gate_baseline.parse_baseline(path, json.dumps(doc).encode())
    text = str(err.value)
    assert path in text
    assert "[1000, 1010, 990, 1005, 50] tok/s, median 1000" in text
    assert "the furthest 50 (-95.0%)" in text
    assert (
        "ansible-playbook playbooks/bench.yml -i <inventory> --limit node1 -e throughput_gate_accept_baseline=true"
        in text
    )
    # accepting a new baseline on purpose tolerates the refused one (the run re-baselines)
    choice = gate_baseline.choose(key, (path, json.dumps(doc).encode()), [], fallback=False, tolerate=True)
    assert choice.baseline is None
    assert "spread too far" in choice.problems[0]


def test_a_run_whose_trials_spread_too_far_is_never_written_as_baseline():
    result = {"failed": False, "verdict": "pass", "reason": "no_baseline", "valid_trial_values": [100.0] * 4 + [40.0]}
    write, why = gate_baseline.write_decision(result, exact_exists=False, update=False, accept=False)
    assert not write
    assert "spread too far" in why
    write, why = gate_baseline.write_decision(result, exact_exists=True, update=False, accept=True)
    assert not write


def test_module_refuses_a_caller_supplied_baseline_that_spreads_too_far():
    p = gate_runner.GateParams(baseline=[1000.0, 1010.0, 990.0, 1005.0, 50.0])
    with pytest.raises(GateInputError, match="baseline: its trials spread too far"):
        gate_runner.validate(p)
    gate_runner.validate(gate_runner.GateParams(baseline=[1000.0, 1010.0, 990.0, 1005.0, 900.0]))


# ------------------------------------------------------------------ the guard and the pieces


def test_guard_turns_a_contradicted_pass_into_a_named_fail():
    d = Decision("pass", "within_tolerance", 80.0, 100.0, -20.0, 0.3, 90.0)
    assert (guard(d).verdict, guard(d).reason) == ("fail", BEYOND_TOLERANCE)
    ok = Decision("pass", "within_tolerance", 95.0, 100.0, -5.0, 0.3, 90.0)
    assert (guard(ok).verdict, guard(ok).reason) == ("pass", "within_tolerance")
    unknown = Decision("unknown", "inconclusive", 80.0, 100.0, -20.0, 0.1, 90.0)
    assert guard(unknown).verdict == "unknown"
    assert guard(Decision("pass", "no_baseline", 80.0, None, None, None, None)).verdict == "pass"


def test_sequential_pass_that_the_medians_contradict_measures_on_and_the_cap_fails_it():
    # the baseline's mean is dragged down by a low trial that stays within the spread bound; the
    # current median is 12% down: never a PASS, at the latest at the cap
    baseline = [1000.0, 1000.0, 1000.0, 760.0, 760.0]
    d = run_gate([880.0 * f for f in QUIET], baseline, SEQUENTIAL)
    assert d.verdict == "fail", d


def test_winsorising_pulls_one_far_trial_in_and_leaves_normal_noise_alone():
    normal = [1000.0, 1030.0, 970.0, 1010.0, 990.0]
    assert winsorised_logs("b", normal) == pytest.approx([math.log(v) for v in normal])
    clipped = winsorised_logs("b", [1000.0, 1010.0, 990.0, 1005.0, 50.0])
    assert min(clipped) >= math.log(1000.0) - 4 * WINSOR_SCALE_FLOOR - 1e-12
    assert winsorised_logs("b", [1000.0, 50.0, 1000.0]) == pytest.approx([math.log(v) for v in [1000.0, 50.0, 1000.0]])


def test_spread_bounds_are_symmetric_on_the_log_scale():
    assert math.log(1 - BASELINE_MAX_LOW) == pytest.approx(-math.log(1 + BASELINE_MAX_HIGH))
    assert baseline_spread_problem([100.0, 100.0, 100.0, 100.0, 75.0]) is None
    assert baseline_spread_problem([100.0, 100.0, 100.0, 100.0, 133.0]) is None
    assert "1 trial(s) outside" in baseline_spread_problem([100.0, 100.0, 100.0, 100.0, 74.0])
    assert "not a positive finite" in baseline_spread_problem([100.0, 0.0, 100.0])


# ------------------------------------------------------------------ hypothesis: never PASS a regression

TRIAL_FACTOR = st.one_of(
    st.just(1.0),  # ties
    st.floats(0.97, 1.03),  # normal noise
    st.sampled_from([0.0, 1e-9, 0.05, 0.5, 2.0, 1e6, 1e300]),  # zeros, far-off and huge trials
)


@given(
    scale=st.floats(1e-3, 1e12),
    factors=st.lists(TRIAL_FACTOR, min_size=5, max_size=12),
    drop=st.floats(0.15, 0.60),
    noise=st.lists(st.floats(0.97, 1.03), min_size=20, max_size=20),
    design=st.sampled_from([SEQUENTIAL, FIXED, Design(min_trials=5), Design(name="fixed", trials=7)]),
)
def test_a_server_15_to_60_percent_slower_never_passes(scale, factors, drop, noise, design):
    baseline = [scale * f for f in factors]
    target = median(baseline) * (1 - drop)
    current = [target * f for f in noise]
    if not all(math.isfinite(v) and v > 0 for v in baseline + current):
        # a zero (or a value that overflows to inf) in the baseline: a named error, never a verdict
        with pytest.raises(ValueError, match="not a positive finite number"):
            run_gate(current, baseline, design)
        return
    d = run_gate(current, baseline, design)
    assert d.verdict != "pass", d
    if d.verdict == "fail" and d.reason == BEYOND_TOLERANCE:
        assert d.current_median < d.threshold


@given(
    current=st.lists(st.floats(1e-6, 1e12), min_size=1, max_size=12),
    baseline=st.lists(st.floats(1e-6, 1e12), min_size=0, max_size=12),
    tolerance=st.floats(0.0, 0.5),
)
def test_decide_never_passes_a_median_beyond_the_tolerance(current, baseline, tolerance):
    d = decide(current, baseline, tolerance=tolerance, alpha=0.05)
    if baseline and median(current) < median(baseline) * (1 - tolerance):
        assert d.verdict != "pass", d


@given(values=st.lists(st.one_of(st.floats(), st.integers(-5, 10**6), st.booleans(), st.text(max_size=3)), max_size=30))
def test_spread_check_names_a_problem_or_accepts(values):
    problem = baseline_spread_problem(values)
    assert problem is None or isinstance(problem, str)
    if problem is None:
        mid = median(values)
        assert all(mid * (1 - BASELINE_MAX_LOW) <= v <= mid * (1 + BASELINE_MAX_HIGH) for v in values)
