# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Mann-Whitney (exact, against scipy inside the test only), the decision table, Student's t and the
sequential design's stopping rule (known sequences and seeded error rates)."""

from __future__ import annotations

import itertools
import math
import random

import pytest
from scipy import stats as scipy_stats  # the reference, in the tests only (requirements.txt)

from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.stats import (
    SIGMA_FLOOR,
    Decision,
    Design,
    decide,
    evaluate,
    mann_whitney_less,
    median,
    sequential_step,
    t_sf,
    t_to_z,
)


def test_median():
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 2.0, 3.0]) == 2.5
    with pytest.raises(ValueError, match="empty"):
        median([])


def test_exact_matches_scipy_on_random_cases_without_ties():
    rng = random.Random(20261130)
    for _case in range(300):
        a = [rng.gauss(100, 10) for _trial in range(rng.randint(1, 12))]
        b = [rng.gauss(rng.choice([90, 100, 110]), 10) for _trial in range(rng.randint(1, 12))]
        u, p = mann_whitney_less(a, b)
        ref = scipy_stats.mannwhitneyu(a, b, alternative="less", method="exact")
        assert u == pytest.approx(ref.statistic, abs=1e-9)
        assert p == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-12), (a, b)


def test_exact_with_ties_is_a_permutation_test():
    # brute force over every split of the pooled sample, midranks for ties
    a = [1.0, 2.0, 2.0, 3.0]
    b = [2.0, 3.0, 3.0, 4.0, 5.0]
    pooled = a + b

    def rank_sum(idx):
        s = sorted(pooled)
        ranks = {v: (s.index(v) + 1 + len(s) - s[::-1].index(v)) / 2 for v in set(pooled)}
        return sum(ranks[pooled[i]] for i in idx)

    obs = rank_sum(range(len(a)))
    combos = list(itertools.combinations(range(len(pooled)), len(a)))
    expected = sum(1 for c in combos if rank_sum(c) <= obs + 1e-9) / len(combos)
    assert mann_whitney_less(a, b)[1] == pytest.approx(expected, rel=1e-12)


def test_large_samples_use_normal_approximation_like_scipy():
    rng = random.Random(7)
    a = [rng.gauss(100, 10) for _trial in range(30)]
    b = [rng.gauss(103, 10) for _trial in range(30)]
    p = mann_whitney_less(a, b)[1]
    ref = scipy_stats.mannwhitneyu(a, b, alternative="less", method="asymptotic", use_continuity=True)
    assert p == pytest.approx(ref.pvalue, rel=1e-6)


def test_five_vs_five_fully_separated_is_1_over_252():
    assert mann_whitney_less([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])[1] == pytest.approx(1 / 252)
    # three versus three can never be significant at 0.05
    assert mann_whitney_less([1, 2, 3], [4, 5, 6])[1] == pytest.approx(0.05)


@pytest.mark.parametrize("bad", [[float("nan")], [float("inf")], ["fast"], [True]])
def test_bad_samples_are_named(bad):
    with pytest.raises(ValueError, match="current sample holds a value"):
        mann_whitney_less(bad, [1.0])
    with pytest.raises(ValueError, match="two non-empty samples"):
        mann_whitney_less([], [1.0])


BASE = [100.0, 101.0, 99.0, 100.5, 99.5]

# (current, baseline, kwargs, verdict, reason)
DECISIONS = [
    ([100.2, 99.8, 100.1, 99.9, 100.0], BASE, {}, "pass", "within_tolerance"),
    ([95.0, 95.5, 94.5, 95.2, 94.8], BASE, {}, "pass", "within_tolerance"),  # -5% < 10% tolerance
    ([80.0, 81.0, 79.0, 80.5, 79.5], BASE, {}, "fail", "regression"),
    ([85.0, 84.0, 86.0, 85.5, 84.5], BASE, {}, "fail", "regression"),  # the 15% drop
    # median down 20% but the samples overlap so much that p is not small: UNKNOWN
    ([80.0, 80.0, 80.0, 120.0, 120.0], [60.0, 100.0, 100.0, 100.0, 140.0], {}, "unknown", "inconclusive"),
    # median far down but current ranks higher overall: "clearly not significant" to the rank test,
    # but never a PASS with the median 90% down (the guard, issue 22)
    ([10.0, 10.0, 10.0, 500.0, 500.0], [100.0, 100.0, 100.0, 1.0, 1.0], {}, "fail", "median_beyond_tolerance"),
    ([50.0] * 5, [], {}, "pass", "no_baseline"),
    ([95.0] * 5, [100.0, 100.0, 100.0], {}, "pass", "baseline_insufficient"),
    # no statistical verdict, but the medians alone rule out a PASS
    ([50.0] * 5, [100.0, 100.0, 100.0], {}, "fail", "median_beyond_tolerance"),
    ([100.0] * 5, BASE, {"min_output_tokens_per_s": 150}, "fail", "below_floor"),
    ([100.0] * 5, [], {"min_output_tokens_per_s": 150}, "fail", "below_floor"),
    ([80.0, 81.0, 79.0, 80.5, 79.5], BASE, {"tolerance": 0.25}, "pass", "within_tolerance"),
]


@pytest.mark.parametrize(("current", "baseline", "kwargs", "verdict", "reason"), DECISIONS)
def test_decision_table(current, baseline, kwargs, verdict, reason):
    args = {"tolerance": 0.10, "alpha": 0.05, **kwargs}
    d = decide(current, baseline, **args)
    assert isinstance(d, Decision)
    assert (d.verdict, d.reason) == (verdict, reason), d
    if baseline:
        assert d.baseline_median == median(baseline)
        assert d.delta_pct == pytest.approx((median(current) - median(baseline)) / median(baseline) * 100)
        assert d.p_value is not None
        assert 0 <= d.p_value <= 1
    else:
        assert d.baseline_median is None
        assert d.p_value is None


def test_decision_rejects_bad_parameters():
    with pytest.raises(ValueError, match="tolerance must be in"):
        decide([1.0], [1.0] * 5, tolerance=1.2, alpha=0.05)
    with pytest.raises(ValueError, match="alpha must be in"):
        decide([1.0], [1.0] * 5, tolerance=0.1, alpha=0)
    with pytest.raises(ValueError, match="no valid current trials"):
        decide([], [1.0] * 5, tolerance=0.1, alpha=0.05)


def test_false_fail_and_detection_rates():
    """The decision rule's quality on simulated trials (the benchmark prints the full figures)."""
    rng = random.Random(5)
    false_fail = 0
    detected = 0
    n = 200
    for _case in range(n):
        base = [1000 * (1 + rng.gauss(0, 0.03)) for _trial in range(5)]
        same = [1000 * (1 + rng.gauss(0, 0.03)) for _trial in range(5)]
        drop = [850 * (1 + rng.gauss(0, 0.03)) for _trial in range(5)]
        false_fail += decide(same, base, tolerance=0.10, alpha=0.05).verdict == "fail"
        detected += decide(drop, base, tolerance=0.10, alpha=0.05).verdict == "fail"
    assert false_fail / n <= 0.01
    assert detected / n >= 0.95


# --------------------------------------------------------------------------- Student's t


@pytest.mark.parametrize("df", [1, 2, 4, 6, 13, 30, 200])
def test_student_t_matches_scipy(df):
    for t in (-40.0, -3.0, -0.5, 0.0, 0.7, 2.5, 10.0, 60.0):
        assert t_sf(t, df) == pytest.approx(scipy_stats.t.sf(t, df), rel=1e-9, abs=1e-300)
        # the same tail probability, taken on the side where it is small (precise)
        norm, dist = scipy_stats.norm, scipy_stats.t
        ref = norm.isf(dist.sf(t, df)) if t >= 0 else norm.ppf(dist.cdf(t, df))
        assert t_to_z(t, df) == pytest.approx(ref, rel=1e-7, abs=1e-9)


# --------------------------------------------------------------------------- the sequential design

SEQ = Design()


def verdicts(current, baseline=None, design=SEQ):
    """evaluate() after each trial of ``current``: None (go on) or (verdict, reason, trials, stop)."""
    baseline = BASE if baseline is None else baseline
    out = []
    for i in range(1, len(current) + 1):
        d = evaluate(current[:i], baseline, design)
        out.append(None if d is None else (d.verdict, d.reason, d.trials, d.stop))
    return out


def first_verdict(current, baseline=None, design=SEQ):
    return next(v for v in verdicts(current, baseline, design) if v is not None)


def test_clear_pass_stops_at_the_minimum():
    assert verdicts([100.2, 99.8, 100.1, 100.0]) == [
        None,
        None,
        ("pass", "within_tolerance", 3, "pass_boundary"),
        ("pass", "within_tolerance", 4, "pass_boundary"),
    ]


def test_clear_fail_stops_at_the_minimum():
    assert first_verdict([80.0, 81.0, 79.0, 80.0]) == ("fail", "regression", 3, "fail_boundary")
    assert first_verdict([85.0, 84.0, 86.0]) == ("fail", "regression", 3, "fail_boundary")  # the 15% drop


def test_one_lucky_trial_never_decides():
    # two trials 20% faster than the baseline: still no verdict before min_trials
    assert verdicts([120.0, 120.0, 100.0]) == [None, None, ("pass", "within_tolerance", 3, "pass_boundary")]
    assert verdicts([50.0, 50.0]) == [None, None]
    assert verdicts([100.0] * 4, design=Design(min_trials=5)) == [None] * 4


def test_cap_decides_by_the_side_of_the_tolerance_line():
    wobble = [1.04, 0.96] * 5  # sits on the tolerance line: no boundary is crossed
    assert verdicts([89.5 * f for f in wobble]) == [None] * 9 + [("fail", "regression", 10, "cap")]
    assert verdicts([90.5 * f for f in wobble]) == [None] * 9 + [("pass", "within_tolerance", 10, "cap")]
    assert verdicts([89.5 * f for f in wobble][:6], design=Design(max_trials=6)) == [None] * 5 + [
        ("fail", "regression", 6, "cap")
    ]


def test_noisy_drop_needs_more_trials_than_a_quiet_one():
    quiet = first_verdict([85.0, 84.0, 86.0, 85.0, 85.0])
    noisy_base = [100.0, 108.0, 92.0, 104.0, 96.0]
    noisy = first_verdict([85.0 * f for f in (1.08, 0.92, 1.04, 0.96, 1.0, 1.02, 0.98, 1.0)], baseline=noisy_base)
    assert quiet[2] == 3
    assert noisy[0] == "fail", noisy
    assert noisy[2] > 3, noisy


def test_log_likelihood_ratio_by_hand():
    cur, base = [92.0, 95.0, 90.0, 93.0], [100.0, 101.0, 99.0, 100.5, 99.5]
    step = sequential_step(cur, base, SEQ)
    lc, lb = [math.log(x) for x in cur], [math.log(x) for x in base]
    d = sum(lc) / 4 - sum(lb) / 5
    ss = sum((x - sum(lc) / 4) ** 2 for x in lc) + sum((x - sum(lb) / 5) ** 2 for x in lb)
    s = max(math.sqrt(ss / 7), SIGMA_FLOOR)
    se = s * math.sqrt(1 / 4 + 1 / 5)
    th_pass, th_fail = math.log(0.95), math.log(0.85)
    z = scipy_stats.norm.ppf(scipy_stats.t.cdf((d - (th_pass + th_fail) / 2) / se, 7))
    assert step.llr == pytest.approx(-(th_pass - th_fail) * z / se, rel=1e-6)
    assert step.lower == pytest.approx(math.log(0.005 / 0.95))
    assert step.upper == pytest.approx(math.log(0.995 / 0.05))
    assert (step.df, step.n, step.pass_ratio, step.fail_ratio) == (7, 4, 0.95, 0.85)
    assert step.ratio == pytest.approx(math.exp(d))


def test_noise_floor_keeps_identical_trials_from_certainty():
    step = sequential_step([95.0] * 3, [100.0] * 5, SEQ)
    assert step.sigma == SIGMA_FLOOR
    assert step.decision == "pass"


def test_floor_and_missing_baselines_in_the_sequential_design():
    d = evaluate([100.0, 100.0, 100.0], BASE, Design(min_output_tokens_per_s=150))
    assert (d.verdict, d.reason, d.trials) == ("fail", "below_floor", 3)
    # without a usable baseline: exactly `trials` trials, no statistical verdict
    assert verdicts([50.0] * 5, baseline=[]) == [None] * 4 + [("pass", "no_baseline", 5, "round")]
    assert verdicts([95.0] * 4, baseline=[100.0] * 3, design=Design(trials=4)) == [None] * 3 + [
        ("pass", "baseline_insufficient", 4, "round")
    ]


def test_fixed_design_keeps_its_round_and_extra_round():
    fixed = Design(name="fixed")
    assert verdicts([100.2, 99.8, 100.1, 99.9, 100.0], design=fixed) == [None] * 4 + [
        ("pass", "within_tolerance", 5, "round")
    ]
    # inconclusive after 5 (the decision table's UNKNOWN case), decided on all 10
    cur = [80.0, 80.0, 80.0, 120.0, 120.0]
    base = [60.0, 100.0, 100.0, 100.0, 140.0]
    seen = verdicts(cur + [80.0] * 5, baseline=base, design=fixed)
    assert seen[:9] == [None] * 9
    assert seen[9][2:] == (10, "extra_round")


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"name": "bayes"}, "design must be one of"),
        ({"min_trials": 11}, "min_trials (11) must be between 1 and max_trials (10)"),
        ({"margin": 0.0}, "margin must be > 0"),
        ({"tolerance": 0.96}, "tolerance + margin below 1"),
        ({"alpha": 0.6, "beta": 0.45}, "alpha + beta must be below 1"),
    ],
)
def test_design_settings_are_checked(changes, needle):
    with pytest.raises(ValueError, match=needle.replace("(", r"\(").replace(")", r"\)").replace("+", r"\+")):
        evaluate([100.0] * 3, BASE, Design(**changes))


def _simulate(rng, design, ratio, noise, gates):
    fails, trials = 0, []
    for _gate in range(gates):
        base = [1000 * (1 + rng.gauss(0, noise)) for _trial in range(5)]
        cur = []
        while True:
            cur.append(1000 * ratio * (1 + rng.gauss(0, noise)))
            d = evaluate(cur, base, design)
            if d is not None:
                break
        fails += d.verdict != "pass"
        trials.append(len(cur))
    return fails / gates, sum(trials) / gates


def test_sequential_error_rates_and_trials_by_seeded_simulation():
    """The issue's targets at 3% noise and 10% tolerance; the benchmark prints 20,000 gates per condition."""
    rng = random.Random(20261130)
    false_fail, n_same = _simulate(rng, SEQ, 1.0, 0.03, 3000)
    detection, n_drop = _simulate(rng, SEQ, 0.85, 0.03, 3000)
    at_pass_hypothesis, _n = _simulate(rng, SEQ, 0.95, 0.03, 3000)
    at_tolerance, _n = _simulate(rng, SEQ, 0.90, 0.03, 2000)
    assert false_fail <= 0.005
    assert detection >= 0.995
    assert at_pass_hypothesis <= SEQ.alpha  # the design's alpha, at a drop of tolerance - margin
    assert 0.4 <= at_tolerance <= 0.6  # the tolerance line is the middle of the design, as in the fixed one
    # fewer trials than the fixed design's 5 (it never runs fewer)
    assert n_same < 3.5
    assert n_drop < 3.5
