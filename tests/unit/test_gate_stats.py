# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Mann-Whitney (exact, against scipy inside the test only) and the decision table."""

from __future__ import annotations

import itertools
import random

import pytest
from scipy import stats as scipy_stats  # the reference, in the tests only (requirements.txt)

from ansible_collections.gpufleet.sglang.plugins.module_utils.gate_stats import (
    Decision,
    decide,
    mann_whitney_less,
    median,
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
    # median far down but current ranks higher overall: clearly not significant
    ([10.0, 10.0, 10.0, 500.0, 500.0], [100.0, 100.0, 100.0, 1.0, 1.0], {}, "pass", "not_significant"),
    ([50.0] * 5, [], {}, "pass", "no_baseline"),
    ([50.0] * 5, [100.0, 100.0, 100.0], {}, "pass", "baseline_insufficient"),
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
