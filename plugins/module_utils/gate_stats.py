# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Statistics and the decision rule of the throughput gate (stdlib only).

Decision rule (docs/measurement.md, after asv and Chromium Pinpoint):

- FAIL iff median(current) < median(baseline) x (1 - tolerance) AND a one-sided Mann-Whitney
  test (current smaller than baseline) gives p < alpha;
- PASS iff the drop is within the tolerance, or the test is clearly not significant
  (p >= ``clear_p``);
- otherwise UNKNOWN: the caller runs one more round of trials and decides again.

A baseline of fewer than ``MIN_TRIALS`` (5) trials gives no statistical verdict: with 3 vs 3 trials
Mann-Whitney can never reach p < 0.05. The absolute floor (``min_output_tokens_per_s``) fails on
its own, whatever the baseline.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

MIN_TRIALS = 5
# Above this many observations in total the exact distribution is replaced by the normal
# approximation with tie correction (the exact one is then both slow and unnecessary).
EXACT_MAX_N = 40
# p at or above which a drop beyond the tolerance is "clearly not significant": the current
# trials do not even tend to rank below the baseline.
CLEAR_P = 0.5


def median(values: list[float]) -> float:
    """Median of a non-empty list."""
    if not values:
        raise ValueError("median of an empty list")
    s = sorted(values)
    mid = len(s) // 2
    return float(s[mid]) if len(s) % 2 else (s[mid - 1] + s[mid]) / 2.0


def _midranks_doubled(values: list[float]) -> list[int]:
    """Twice the midrank of every value (integers even with ties), in input order."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        doubled = (i + 1) + (j + 1)  # 2 x the average of ranks i+1..j+1
        for k in range(i, j + 1):
            ranks[order[k]] = doubled
        i = j + 1
    return ranks


def _exact_cdf(doubled: list[int], n1: int, observed: int) -> float:
    """P(sum of n1 doubled ranks drawn without replacement <= observed) over all subsets."""
    total = sum(doubled)
    # counts[k][s]: number of k-subsets of the elements seen so far whose doubled-rank sum is s
    counts = [[0] * (total + 1) for _row in range(n1 + 1)]
    counts[0][0] = 1
    seen = 0
    for r in doubled:
        seen += r
        for k in range(n1, 0, -1):
            row, prev = counts[k], counts[k - 1]
            for s in range(seen, r - 1, -1):
                c = prev[s - r]
                if c:
                    row[s] += c
    final = counts[n1]
    hits = sum(final[: observed + 1])
    return hits / math.comb(len(doubled), n1)


def mann_whitney_less(current: list[float], baseline: list[float]) -> tuple[float, float]:
    """One-sided Mann-Whitney U test that ``current`` is stochastically smaller than ``baseline``.

    Returns ``(U, p)`` with U the statistic of ``current`` (pairs where current > baseline, ties
    counting one half) and p = P(U' <= U) under the null hypothesis. The p-value is exact
    (permutation distribution of the midrank sum, so ties are handled exactly) up to
    ``EXACT_MAX_N`` observations, else the normal approximation with tie and continuity correction.
    Without ties the exact value equals ``scipy.stats.mannwhitneyu(current, baseline,
    alternative="less", method="exact")``.
    """
    n1, n2 = len(current), len(baseline)
    if n1 == 0 or n2 == 0:
        raise ValueError(f"Mann-Whitney needs two non-empty samples (got {n1} current, {n2} baseline)")
    for name, sample in (("current", current), ("baseline", baseline)):
        for v in sample:
            if not isinstance(v, (int, float)) or isinstance(v, bool) or math.isnan(v) or math.isinf(v):
                raise ValueError(f"{name} sample holds a value that is not a finite number: {v!r}")
    doubled = _midranks_doubled(list(current) + list(baseline))
    r1_doubled = sum(doubled[:n1])
    u = r1_doubled / 2.0 - n1 * (n1 + 1) / 2.0
    n = n1 + n2
    if n <= EXACT_MAX_N:
        return u, min(1.0, _exact_cdf(doubled, n1, r1_doubled))
    # normal approximation with tie correction and continuity correction
    mean = n1 * n2 / 2.0
    tie_term = 0.0
    counts: dict[int, int] = {}
    for d in doubled:
        counts[d] = counts.get(d, 0) + 1
    for t in counts.values():
        tie_term += t**3 - t
    var = n1 * n2 / 12.0 * ((n + 1) - tie_term / (n * (n - 1)))
    if var <= 0:
        return u, 1.0
    z = (u - mean + 0.5) / math.sqrt(var)
    return u, 0.5 * math.erfc(-z / math.sqrt(2.0))


@dataclass
class Decision:
    verdict: str  # "pass" | "fail" | "unknown"
    reason: str
    current_median: float
    baseline_median: float | None
    delta_pct: float | None
    p_value: float | None
    threshold: float | None

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def decide(
    current: list[float],
    baseline: list[float] | None,
    *,
    tolerance: float,
    alpha: float,
    min_output_tokens_per_s: float = 0.0,
    clear_p: float = CLEAR_P,
) -> Decision:
    """Apply the decision rule to valid trial throughputs (tok/s). See the module docstring.

    Reasons: ``below_floor``, ``regression``, ``within_tolerance``, ``not_significant``,
    ``inconclusive``, ``baseline_insufficient``, ``no_baseline``.
    """
    if not current:
        raise ValueError("no valid current trials to decide on")
    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance must be in [0, 1), got {tolerance!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    cur_med = median(current)
    base = list(baseline or [])
    base_med = median(base) if base else None
    delta = None if not base_med else (cur_med - base_med) / base_med * 100.0
    threshold = None if base_med is None else base_med * (1.0 - tolerance)
    p = None
    if len(base) >= 1 and len(current) >= 1:
        p = mann_whitney_less(current, base)[1]

    def make(verdict: str, reason: str) -> Decision:
        return Decision(verdict, reason, cur_med, base_med, delta, p, threshold)

    if min_output_tokens_per_s and cur_med < min_output_tokens_per_s:
        return make("fail", "below_floor")
    if not base:
        return make("pass", "no_baseline")
    if len(base) < MIN_TRIALS:
        return make("pass", "baseline_insufficient")
    if threshold is None or p is None:  # unreachable: a non-empty baseline sets both
        raise ValueError("internal: baseline median or p-value missing")
    if cur_med >= threshold:
        return make("pass", "within_tolerance")
    if p < alpha:
        return make("fail", "regression")
    if p >= clear_p:
        return make("pass", "not_significant")
    return make("unknown", "inconclusive")
