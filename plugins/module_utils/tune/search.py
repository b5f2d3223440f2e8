# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The search of tune.yml: coordinate descent over a declared space of server options (stdlib only).

Pure: it proposes settings and is told their outcomes; starting servers and measuring them is the
caller's job (the action plugin ``sglang_tune``). docs/tuning.md describes the method.

- A *setting* maps each option of the space to one of its values; the first one evaluated is the
  node's original setting (the values its profile has, ``None`` for an option it does not set).
- Coordinate descent: for one option at a time, every other value of that option is tried with the
  others held at the incumbent's values; the best measured of them replaces the incumbent when the
  gate's statistics say it is really better (``is_better``). After the last option a new pass starts
  if the incumbent changed, up to ``max_passes``. A setting is never evaluated twice.
- Budget: a candidate is only started when the time spent so far, plus the longest candidate so far,
  plus the same again for the final restore, stays within ``budget_s``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.stats import decide, mann_whitney_less, median

# Controller-only: no module in plugins/modules may bundle this file, not even through another
# module_utils (tests/unit/test_module_rooms.py walks the imports; docs/CONTRIBUTING.md, "Where code lives").
CONTROLLER_ONLY = True

# outcome statuses: measured, or why not
MEASURED = "measured"
FAILURES = ("refused", "crashed", "oom", "not_ready", "invalid", "error")


class TuneError(ValueError):
    """A search space or option that cannot be searched; the message names it."""


def check_space(space: object) -> dict[str, list[Any]]:
    """The space as {option: [values]}: a non-empty mapping of non-empty lists of distinct scalars."""
    if not isinstance(space, dict) or not space:
        raise TuneError(f"sglang_tune_space must be a non-empty mapping of option -> list of values, got {space!r}")
    out: dict[str, list[Any]] = {}
    for name, values in space.items():
        if not isinstance(name, str) or not name.strip() or name.startswith("-"):
            raise TuneError(f"sglang_tune_space: option names are flag names without '--', got {name!r}")
        if not isinstance(values, list) or not values:
            raise TuneError(f"sglang_tune_space.{name}: needs a non-empty list of values, got {values!r}")
        for value in values:
            if isinstance(value, (dict, list)) or (isinstance(value, float) and not math.isfinite(value)):
                raise TuneError(f"sglang_tune_space.{name}: values are scalars (or null), got {value!r}")
        if len({canonical_value(v) for v in values}) != len(values):
            raise TuneError(f"sglang_tune_space.{name}: a value is listed twice in {values!r}")
        out[name.replace("-", "_")] = list(values)
    return out


def canonical_value(value: Any) -> str:
    """One text per value: ``false`` and ``null`` both mean "flag not set"."""
    if value is None or value is False:
        return "-"
    return json.dumps(value) if not isinstance(value, str) else value


def setting_id(setting: dict[str, Any]) -> str:
    return json.dumps({k: canonical_value(v) for k, v in sorted(setting.items())}, sort_keys=True)


def describe(setting: dict[str, Any], start: dict[str, Any]) -> str:
    """The flags where ``setting`` differs from ``start`` (``original`` when none)."""
    parts = [
        f"{k}={canonical_value(v)}"
        for k, v in sorted(setting.items())
        if canonical_value(v) != canonical_value(start.get(k))
    ]
    return " ".join(parts) if parts else "original"


def start_setting(space: dict[str, list[Any]], base_flags: dict[str, Any]) -> dict[str, Any]:
    """The original setting: each option's value in the node's flags (None when not set)."""
    flags = {str(k).replace("-", "_"): v for k, v in base_flags.items()}
    return {name: flags.get(name) for name in space}


def is_better(candidate: list[float], best: list[float], *, min_gain: float, alpha: float) -> tuple[bool, float]:
    """Whether ``candidate`` trials beat ``best`` trials: the gate's rule read the other way round.

    The gate FAILs a run (``current``) against a ``baseline`` when its median is more than the
    tolerance below and a one-sided Mann-Whitney test says p < alpha. With the best so far as the
    ``current`` and the candidate as the ``baseline``, that FAIL means: the candidate is better by more
    than ``min_gain`` and significantly so. Returns ``(better, p)``.
    """
    if not candidate or not best:
        return False, 1.0
    d = decide(best, candidate, tolerance=min_gain, alpha=alpha)
    p = d.p_value if d.p_value is not None else 1.0
    return d.verdict == "fail" and d.reason == "regression", p


@dataclass
class Entry:
    """One evaluated candidate (a row of the table)."""

    setting: dict[str, Any]
    status: str
    trials: list[float] = field(default_factory=list)
    reason: str = ""
    journal: list[str] = field(default_factory=list)
    power_pct: float | None = None
    elapsed_s: float = 0.0
    flags: str = ""
    verdict: str = ""
    p_vs_best: float | None = None
    p_vs_incumbent: float | None = None
    promoted: bool = False  # it replaced the incumbent when it was measured

    @property
    def median(self) -> float | None:
        return median(self.trials) if self.status == MEASURED and self.trials else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "flags": self.flags,
            "setting": self.setting,
            "status": self.status,
            "median_output_tokens_per_s": None if self.median is None else round(self.median, 3),
            "trials": self.trials,
            "p_vs_best": self.p_vs_best,
            "gpu_power_pct_of_limit": self.power_pct,
            "verdict": self.verdict,
            "reason": self.reason,
            "journal": self.journal,
            "elapsed_s": round(self.elapsed_s, 1),
        }


class CoordinateSearch:
    """Proposes settings with :meth:`next` and learns their outcomes with :meth:`record`."""

    def __init__(
        self,
        space: dict[str, list[Any]],
        base_flags: dict[str, Any],
        *,
        budget_s: float,
        min_gain: float = 0.05,
        alpha: float = 0.05,
        max_passes: int = 2,
    ) -> None:
        self.space = check_space(space)
        if not budget_s > 0:
            raise TuneError(f"sglang_tune_budget_s must be > 0, got {budget_s!r}")
        if not 0 <= min_gain < 1:
            raise TuneError(f"sglang_tune_min_gain must be in [0, 1), got {min_gain!r}")
        self.budget_s = float(budget_s)
        self.min_gain = min_gain
        self.alpha = alpha
        self.max_passes = max(1, int(max_passes))
        self.start = start_setting(self.space, base_flags)
        self.incumbent = dict(self.start)
        self.entries: list[Entry] = []
        self._seen: dict[str, Entry] = {}
        self._options = list(self.space)
        self._pass = 1
        self._option = -1  # -1: the original setting comes first
        self._queue: list[dict[str, Any]] = []
        self._improved = False
        self.stopped = ""  # why the search ended early ("budget"), else ""
        self.done = False

    # ---------------------------------------------------------------- state
    @property
    def best(self) -> Entry | None:
        return self._seen.get(setting_id(self.incumbent))

    def _round_of(self, option: str) -> list[dict[str, Any]]:
        out = []
        for value in self.space[option]:
            setting = dict(self.incumbent, **{option: value})
            if setting_id(setting) not in self._seen:
                out.append(setting)
        return out

    def _close_option(self) -> None:
        """End of one option's round: the best of its measured values may replace the incumbent."""
        if self._option < 0:
            return
        option = self._options[self._option]
        best = self.best
        if best is None or best.status != MEASURED:
            return
        contenders = [
            e
            for e in self.entries
            if e.status == MEASURED
            and e.setting != self.incumbent
            and all(e.setting[k] == self.incumbent[k] for k in self._options if k != option)
        ]
        contenders.sort(key=lambda e: e.median or 0.0, reverse=True)
        for e in contenders:
            better, _p = is_better(e.trials, best.trials, min_gain=self.min_gain, alpha=self.alpha)
            if better:
                self.incumbent = dict(e.setting)
                self._improved = True
                e.promoted = True
            return  # only the top contender can win

    def next(self, elapsed_s: float) -> dict[str, Any] | None:
        """The next setting to evaluate, or None when the search is over (``stopped`` says why)."""
        if self.done:
            return None
        if not self.entries:
            return dict(self.start)
        if self.best is None or self.best.status != MEASURED:
            self.done, self.stopped = True, "original_failed"
            return None
        longest = max(e.elapsed_s for e in self.entries)
        while not self._queue:
            self._close_option()
            self._option += 1
            if self._option >= len(self._options):
                if not self._improved or self._pass >= self.max_passes:
                    self.done = True
                    return None
                self._pass += 1
                self._option = 0
                self._improved = False
            self._queue = self._round_of(self._options[self._option])
        if elapsed_s + 2 * longest > self.budget_s:
            self.done, self.stopped = True, "budget"
            return None
        return self._queue.pop(0)

    def record(self, setting: dict[str, Any], outcome: dict[str, Any]) -> Entry:
        """Learn the outcome of ``setting``: status, trials, reason, journal, power_pct, elapsed_s."""
        status = str(outcome.get("status", "error"))
        if status != MEASURED and status not in FAILURES:
            raise TuneError(f"unknown outcome status {status!r}")
        entry = Entry(
            setting=dict(setting),
            status=status,
            trials=[float(t) for t in outcome.get("trials") or []] if status == MEASURED else [],
            reason=str(outcome.get("reason", "")),
            journal=[str(line) for line in outcome.get("journal") or []],
            power_pct=outcome.get("power_pct"),
            elapsed_s=float(outcome.get("elapsed_s", 0.0)),
            flags=describe(setting, self.start),
        )
        if status == MEASURED and not entry.trials:
            entry.status, entry.reason = "invalid", entry.reason or "no valid trials"
        best = self.best
        if entry.status == MEASURED and best is not None and best.status == MEASURED and best is not entry:
            entry.p_vs_incumbent = is_better(entry.trials, best.trials, min_gain=self.min_gain, alpha=self.alpha)[1]
        self.entries.append(entry)
        self._seen[setting_id(setting)] = entry
        return entry

    # ---------------------------------------------------------------- result
    def finish(self) -> dict[str, Any]:
        """Verdicts and p-values against the final best; the winner and whether it beats the original."""
        best = self.best
        original = self._seen.get(setting_id(self.start))
        for e in self.entries:
            if e.status != MEASURED:
                e.verdict = e.status
                continue
            if e is best:
                e.verdict = "original (best)" if e is original else "best"
                continue
            if best is not None and best.status == MEASURED:
                e.p_vs_best = mann_whitney_less(e.trials, best.trials)[1]
            e.verdict = "original" if e is original else ("better, superseded" if e.promoted else "not better")
        beats = False
        p_orig = None
        if best is not None and original is not None and best is not original and original.status == MEASURED:
            beats, p_orig = is_better(best.trials, original.trials, min_gain=self.min_gain, alpha=self.alpha)
        return {
            "best": None if best is None else best.as_dict(),
            "original": None if original is None else original.as_dict(),
            "winner_differs": best is not None and best is not original,
            "beats_original": beats,
            "p_best_vs_original": p_orig,
            "evaluated": len(self.entries),
            "measured": sum(1 for e in self.entries if e.status == MEASURED),
            "not_measured": sum(1 for e in self.entries if e.status != MEASURED),
            "passes": self._pass,
            "stopped": self.stopped or "converged",
            "candidates": [e.as_dict() for e in self.entries],
        }


def grid(space: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every setting of the space (the full product), for comparisons."""
    settings: list[dict[str, Any]] = [{}]
    for name, values in check_space(space).items():
        settings = [dict(s, **{name: v}) for s in settings for v in values]
    return settings


def table(result: dict[str, Any]) -> list[str]:
    """The candidate table: flags, median tok/s, p-value vs the best, GPU power % of limit, verdict."""
    rows = [f"{'#':>2} {'flags':<80} {'tok/s':>9} {'p vs best':>9} {'power%':>7} verdict"]
    for i, c in enumerate(result["candidates"], 1):
        med = c["median_output_tokens_per_s"]
        p = c["p_vs_best"]
        power = c["gpu_power_pct_of_limit"]
        verdict = c["verdict"] + (f": {c['reason']}" if c["status"] != MEASURED and c["reason"] else "")
        rows.append(
            f"{i:>2} {c['flags'][:80]:<80} {'-' if med is None else f'{med:.1f}':>9} "
            f"{'-' if p is None else f'{p:.4f}':>9} {'-' if power is None else f'{power:.1f}':>7} {verdict[:160]}"
        )
    return rows
