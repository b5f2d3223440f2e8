# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Statistics and the decision rules of the throughput gate (stdlib only).

Two designs (docs/measurement.md says why and names the sources); :func:`evaluate` applies either
after each valid trial and says whether to stop:

- ``sequential`` (the default): a truncated sequential probability ratio test on log throughput
  (:func:`sequential_step`), with the variance estimated from the baseline and the current trials;
  no verdict before ``min_trials``, a verdict by the side of the tolerance line at ``max_trials``.
- ``fixed``: the rule below on a round of ``trials``, one extra round on UNKNOWN.

Fixed-design rule (after asv and Chromium Pinpoint):

- FAIL iff median(current) < median(baseline) x (1 - tolerance) AND a one-sided Mann-Whitney
  test (current smaller than baseline) gives p < alpha;
- PASS iff the drop is within the tolerance (a drop beyond it that the test finds clearly not
  significant, p >= ``clear_p``, is a PASS of the rule that :func:`guard` turns into a FAIL);
- otherwise UNKNOWN: the caller runs one more round of trials and decides again.

A baseline of fewer than ``MIN_TRIALS`` (5) trials gives no statistical verdict: with 3 vs 3 trials
Mann-Whitney can never reach p < 0.05. The absolute floor (``min_output_tokens_per_s``) fails on
its own, whatever the baseline.

Robustness (docs/measurement.md, "Outliers"): the fixed design works on medians and ranks; the
sequential one on log throughputs winsorised at their median +- ``WINSOR_K`` robust standard
deviations (:func:`winsorised_logs`), so one far-off trial cannot move its estimate. A baseline
whose trials lie further than ``BASELINE_MAX_LOW`` / ``BASELINE_MAX_HIGH`` from their own median is
refused (:func:`baseline_spread_problem`). And one invariant, enforced in :func:`guard`, the one
place every verdict of :func:`decide` and :func:`evaluate` passes through: never PASS while the
current median is below the baseline median by more than the tolerance (reason
``median_beyond_tolerance``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from statistics import NormalDist

MIN_TRIALS = 5
# Above this many observations in total the exact distribution is replaced by the normal
# approximation with tie correction (the exact one is then both slow and unnecessary).
EXACT_MAX_N = 40
# p at or above which a drop beyond the tolerance is "clearly not significant": the current
# trials do not even tend to rank below the baseline.
CLEAR_P = 0.5
# A baseline trial further below (above) its baseline's median than this fraction is not a measurement
# of the same server: another job held the GPUs, a node was throttled. Such a baseline is refused
# (baseline_spread_problem): 25% below / 33.3% above (the same distance on the log scale) is more
# than 5 standard deviations of the noisiest server in docs/measurement.md.
BASELINE_MAX_LOW = 0.25
BASELINE_MAX_HIGH = 1.0 / (1.0 - BASELINE_MAX_LOW) - 1.0
# The sequential design winsorises each sample's log throughputs at median +- WINSOR_K robust standard
# deviations (1.4826 x MAD), the scale never taken below WINSOR_SCALE_FLOOR, for samples of at least
# WINSOR_MIN_N trials (the MAD of fewer is too unstable to clip by). The floor matters: the MAD of 5
# trials collapses when 3 of them tie, and clipping must then still leave the spread of a normal
# server alone (a 2% floor clips nothing within 8% of the median: 4 sd of a server with 2% noise).
WINSOR_K = 4.0
WINSOR_SCALE_FLOOR = 0.02
WINSOR_MIN_N = 4
MAD_TO_SD = 1.4826
# the reason of the invariant (guard): a PASS that the medians contradict is turned into a FAIL
BEYOND_TOLERANCE = "median_beyond_tolerance"


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
    # how many valid trials the verdict used and why the run stopped there (see evaluate)
    trials: int | None = None
    stop: str | None = None
    sequential: dict[str, object] | None = field(default=None)

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
    ``inconclusive``, ``baseline_insufficient``, ``no_baseline``, ``median_beyond_tolerance``
    (:func:`guard`).
    """
    if not current:
        raise ValueError("no valid current trials to decide on")
    _logs("current", current)  # throughputs: positive finite numbers, else a named ValueError
    _logs("baseline", list(baseline or []))
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
        return guard(make("fail", "below_floor"))
    if not base:
        return guard(make("pass", "no_baseline"))
    if len(base) < MIN_TRIALS:
        return guard(make("pass", "baseline_insufficient"))
    if threshold is None or p is None:  # unreachable: a non-empty baseline sets both
        raise ValueError("internal: baseline median or p-value missing")
    return guard(make(*_statistical_verdict(cur_med, threshold, p, alpha, clear_p)))


def beyond_tolerance(current_median: float, threshold: float | None) -> bool:
    """Whether the current median is below the baseline median by more than the tolerance."""
    return threshold is not None and current_median < threshold


def guard(d: Decision) -> Decision:
    """The gate's invariant, applied to every verdict :func:`decide` and :func:`evaluate` return: never
    PASS while the current median is below the baseline median by more than the tolerance. Such a
    PASS (a baseline with an outlier, a test the noise blinded) becomes a FAIL with reason
    ``median_beyond_tolerance``; a FAIL or UNKNOWN is left as it is."""
    if d.verdict == "pass" and beyond_tolerance(d.current_median, d.threshold):
        d.verdict, d.reason = "fail", BEYOND_TOLERANCE
    return d


def _statistical_verdict(cur_med: float, threshold: float, p: float, alpha: float, clear_p: float) -> tuple[str, str]:
    """(verdict, reason) against a usable baseline: the tolerance first, then the test's p-value."""
    if cur_med >= threshold:
        return "pass", "within_tolerance"
    if p < alpha:
        return "fail", "regression"
    if p >= clear_p:
        return "pass", "not_significant"
    return "unknown", "inconclusive"


# --------------------------------------------------------------------------- Student's t (stdlib only)


def _beta_cf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def _reg_beta(x: float, a: float, b: float) -> float:
    """Regularized incomplete beta I_x(a, b) for 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(ln) * _beta_cf(a, b, x) / a
    return 1.0 - math.exp(ln) * _beta_cf(b, a, 1.0 - x) / b


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom (accurate far into the tail)."""
    if df <= 0:
        raise ValueError(f"degrees of freedom must be > 0, got {df!r}")
    tail = 0.5 * _reg_beta(df / (df + t * t), df / 2.0, 0.5)
    return tail if t >= 0 else 1.0 - tail


_NORMAL = NormalDist()


def t_to_z(t: float, df: float) -> float:
    """The standard normal value with the same tail probability as ``t`` under Student's t(df)."""
    if t >= 0:
        return -_NORMAL.inv_cdf(max(t_sf(t, df), 1e-300))
    return _NORMAL.inv_cdf(max(t_sf(-t, df), 1e-300))


def _logs(name: str, values: list[float]) -> list[float]:
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise ValueError(f"{name} sample holds a value that is not a positive finite number: {v!r}")
        out.append(math.log(v))
    return out


def winsorised_logs(name: str, values: list[float]) -> list[float]:
    """Log values, each pulled in to median +- ``WINSOR_K`` robust standard deviations of the sample.

    The robust standard deviation is ``MAD_TO_SD`` x the median absolute deviation, at least
    ``WINSOR_SCALE_FLOOR``; samples of fewer than ``WINSOR_MIN_N`` values are returned unclipped.
    One far-off trial (a stall, another job on the GPUs) then moves the mean by at most
    ``WINSOR_K`` robust standard deviations / n instead of its whole distance / n.
    """
    logs = _logs(name, values)
    if len(logs) < WINSOR_MIN_N:
        return logs
    mid = median(logs)
    scale = max(MAD_TO_SD * median([abs(v - mid) for v in logs]), WINSOR_SCALE_FLOOR)
    low, high = mid - WINSOR_K * scale, mid + WINSOR_K * scale
    return [min(max(v, low), high) for v in logs]


def baseline_spread_problem(values: list[float]) -> str | None:
    """Why these baseline trials spread too far to compare with (their numbers named), or None.

    Every trial must lie within ``BASELINE_MAX_LOW`` below and ``BASELINE_MAX_HIGH`` above the
    median of the trials; a value that is not a positive finite number is named too.
    """
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            return f"trial {v!r} is not a positive finite tokens/s number"
    if not values:
        return "it has no trials"
    mid = median(values)
    low, high = mid * (1.0 - BASELINE_MAX_LOW), mid * (1.0 + BASELINE_MAX_HIGH)
    off = [v for v in values if not low <= v <= high]
    if not off:
        return None
    shown = ", ".join(f"{v:g}" for v in values[:20]) + (", ..." if len(values) > 20 else "")
    worst = max(off, key=lambda v: abs(math.log(v / mid)))
    return (
        f"its trials spread too far to compare with: [{shown}] tok/s, median {mid:g}; "
        f"{len(off)} trial(s) outside {low:g} .. {high:g} (-{BASELINE_MAX_LOW * 100:g}% / "
        f"+{BASELINE_MAX_HIGH * 100:.1f}% of the median), the furthest {worst:g} "
        f"({(worst - mid) / mid * 100:+.1f}%): measured while something else loaded the server?"
    )


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _ss(values: list[float]) -> float:
    m = _mean(values)
    return sum((v - m) ** 2 for v in values)


# --------------------------------------------------------------------------- the sequential design

DESIGNS = ("sequential", "fixed")
# Trial-to-trial noise (standard deviation of log throughput) below this is not believed: five
# quiet baseline trials must not make the test sure of itself. 0.5%, below any real server seen.
SIGMA_FLOOR = 0.005


@dataclass(frozen=True)
class Design:
    """How the gate decides (docs/measurement.md). Defaults are the module's."""

    name: str = "sequential"
    trials: int = 5  # fixed: trials per round; sequential: trials measured without a usable baseline
    min_trials: int = 3  # sequential: no verdict before this many valid trials
    max_trials: int = 10  # sequential: the cap; the verdict there is the side of the tolerance line
    tolerance: float = 0.10
    alpha: float = 0.05  # fixed: Mann-Whitney level; sequential: P(FAIL) at a drop of tolerance - margin
    beta: float = 0.005  # sequential: P(PASS) at a drop of tolerance + margin
    margin: float = 0.05  # sequential: half-width of the indifference zone around the tolerance
    min_output_tokens_per_s: float = 0.0

    def check(self) -> None:
        """Raise ``ValueError`` naming the first inconsistent setting."""
        if self.name not in DESIGNS:
            raise ValueError(f"design must be one of {', '.join(DESIGNS)}, got {self.name!r}")
        if not 0 <= self.tolerance < 1:
            raise ValueError(f"tolerance must be in [0, 1), got {self.tolerance!r}")
        if not 0 < self.alpha < 1 or not 0 < self.beta < 1:
            raise ValueError(f"alpha and beta must be in (0, 1), got {self.alpha!r} and {self.beta!r}")
        if self.alpha + self.beta >= 1:
            raise ValueError(f"alpha + beta must be below 1, got {self.alpha + self.beta:g}")
        if self.tolerance + self.margin >= 1 or self.margin <= 0:
            raise ValueError(
                f"margin must be > 0 and tolerance + margin below 1, got margin {self.margin!r} "
                f"with tolerance {self.tolerance!r}"
            )
        if not 1 <= self.min_trials <= self.max_trials:
            raise ValueError(f"min_trials ({self.min_trials}) must be between 1 and max_trials ({self.max_trials})")
        if self.trials < 1:
            raise ValueError(f"trials must be >= 1, got {self.trials!r}")

    def most_trials(self) -> int:
        """The most valid trials one run can need."""
        if self.name == "fixed":
            return 2 * self.trials
        return max(self.max_trials, self.trials)


@dataclass(frozen=True)
class Step:
    """The sequential test after ``n`` valid trials (all figures are on log throughput)."""

    decision: str  # "continue" | "pass" | "fail"
    stop: str | None  # "pass_boundary" | "fail_boundary" | "cap" | None (continue)
    n: int
    ratio: float  # estimated current / baseline (ratio of geometric means)
    llr: float  # log-likelihood ratio, FAIL hypothesis over PASS hypothesis
    lower: float  # PASS at or below
    upper: float  # FAIL at or above
    sigma: float  # noise used (pooled standard deviation of log throughput, floored)
    df: int
    pass_ratio: float  # the PASS hypothesis: ratio 1 - (tolerance - margin)
    fail_ratio: float  # the FAIL hypothesis: ratio 1 - (tolerance + margin)

    def as_dict(self) -> dict[str, object]:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def boundaries(alpha: float, beta: float) -> tuple[float, float]:
    """Wald's stopping boundaries on the log-likelihood ratio: (PASS at or below, FAIL at or above)."""
    return math.log(beta / (1.0 - alpha)), math.log((1.0 - beta) / alpha)


def sequential_step(current: list[float], baseline: list[float], design: Design) -> Step:
    """The truncated SPRT after the valid trials in ``current`` (pure; docs/measurement.md).

    Both samples' log throughputs are winsorised first (:func:`winsorised_logs`).
    The estimate is d = mean(log current) - mean(log baseline), with standard error
    s * sqrt(1/n + 1/m) from the pooled standard deviation s of both samples (m + n - 2 degrees of
    freedom, at least :data:`SIGMA_FLOOR`). Its t statistic against the midpoint of the two
    hypotheses is turned into the normal value of the same tail probability, which makes the
    log-likelihood ratio of the FAIL hypothesis (ratio 1 - tolerance - margin) over the PASS
    hypothesis (ratio 1 - tolerance + margin) ``(theta_pass - theta_fail) * sqrt(I) * -z``.
    PASS when it is at or below log(beta / (1 - alpha)), FAIL at or above log((1 - beta) / alpha),
    never before ``min_trials``; at ``max_trials`` the side of the tolerance line decides.
    """
    design.check()
    lc, lb = winsorised_logs("current", current), winsorised_logs("baseline", baseline)
    n, m = len(lc), len(lb)
    if n == 0 or m < 2:
        raise ValueError(f"the sequential test needs current trials and >= 2 baseline trials (got {n} and {m})")
    theta_pass = math.log(1.0 - max(0.0, design.tolerance - design.margin))
    theta_fail = math.log(1.0 - (design.tolerance + design.margin))
    mid = (theta_pass + theta_fail) / 2.0
    d = _mean(lc) - _mean(lb)
    df = n + m - 2
    s = math.sqrt((_ss(lc) + _ss(lb)) / df) if df > 0 else 0.0
    s = max(s, SIGMA_FLOOR)
    se = s * math.sqrt(1.0 / n + 1.0 / m)
    z = t_to_z((d - mid) / se, df)
    llr = -(theta_pass - theta_fail) * z / se
    lower, upper = boundaries(design.alpha, design.beta)
    decision, stop = "continue", None
    if n >= design.min_trials:
        if llr >= upper:
            decision, stop = "fail", "fail_boundary"
        elif llr <= lower:
            decision, stop = "pass", "pass_boundary"
        elif n >= design.max_trials:
            decision, stop = ("fail" if d < math.log(1.0 - design.tolerance) else "pass"), "cap"
    return Step(
        decision,
        stop,
        n,
        math.exp(d),
        llr,
        lower,
        upper,
        s,
        df,
        math.exp(theta_pass),
        math.exp(theta_fail),
    )


def _decided(current: list[float], base: list[float], design: Design, stop: str) -> Decision:
    """:func:`decide` with the design's rule, marked with the trials used and why it stopped."""
    d = decide(
        current,
        base,
        tolerance=design.tolerance,
        alpha=design.alpha,
        min_output_tokens_per_s=design.min_output_tokens_per_s,
    )
    d.trials, d.stop = len(current), stop
    return d


def _fixed_round(current: list[float], base: list[float], design: Design) -> Decision | None:
    """The fixed design (or any design without a usable baseline): decide after ``trials``, and
    after a second round on UNKNOWN (fixed design only); None: measure one more valid trial."""
    n = len(current)
    if n < design.trials:
        return None
    d = _decided(current, base, design, "round" if n == design.trials else "extra_round")
    if d.verdict == "unknown" and n < 2 * design.trials and design.name == "fixed":
        return None
    return d


def evaluate(current: list[float], baseline: list[float] | None, design: Design) -> Decision | None:
    """The verdict after the valid trials so far, or None: measure one more valid trial (pure).

    ``fixed``: :func:`decide` after ``trials``; on UNKNOWN once more after ``2 x trials`` (stop
    ``round`` or ``extra_round``). ``sequential`` with a usable baseline (>= ``MIN_TRIALS``):
    :func:`sequential_step` after every trial (stop ``pass_boundary``, ``fail_boundary`` or
    ``cap``); the floor (``min_output_tokens_per_s``) is applied when it stops. Without a usable
    baseline both designs measure ``trials`` and pass without a statistical verdict (stop ``round``).
    """
    design.check()
    base = list(baseline or [])
    if design.name == "fixed" or len(base) < MIN_TRIALS:
        return _fixed_round(current, base, design)
    if not current:
        return None
    step = sequential_step(current, base, design)
    if step.decision == "continue":
        return None
    d = _decided(current, base, design, step.stop or "")
    if step.decision == "pass" and len(current) < design.max_trials and beyond_tolerance(d.current_median, d.threshold):
        return None  # the test says PASS, the medians disagree: measure on (at the cap the guard decides)
    seq = step.as_dict()
    d.sequential = seq
    if d.reason == "below_floor":
        return d
    d.verdict = step.decision
    d.reason = "regression" if step.decision == "fail" else "within_tolerance"
    return guard(d)
