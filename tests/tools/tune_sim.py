# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Simulated sweeps on the SGLang stand-in's response surface (tests/standins/surfaces/*.json).

Not a stand-in for a server: it replays what the stand-in would do for each setting (its rate or its
failure, from ``sglang_api.surface_outcome``) with a measurement noise, and charges each candidate a
simulated time, so the search (module_utils/tune/search.py) can be checked and benchmarked against the
full grid without starting servers. Used by tests/unit/test_tune_search.py and benchmarks/tune_bench.py.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from standins import sglang_api

from ansible_collections.gpufleet.sglang.plugins.module_utils.tune.search import (
    CoordinateSearch,
    grid,
)

SURFACE = Path(__file__).resolve().parents[1] / "standins" / "surfaces" / "tune.json"
# the space the tests sweep on that surface (the molecule scenario uses a smaller one)
SPACE: dict[str, list[Any]] = {
    "attention_backend": ["flashinfer", "triton", "fa3"],
    "disable_cuda_graph": [False, True],
    "max_running_requests": [64, 256, 1024],
    "mem_fraction_static": [None, 0.88, 0.95],
    "kv_cache_dtype": ["bf16", "fp8_e4m3"],
}
BASE_FLAGS: dict[str, Any] = {
    "tp": 8,
    "attention_backend": "flashinfer",
    "kv_cache_dtype": "bf16",
    "max_running_requests": 64,
}
# simulated seconds: a start and readiness, then each trial; a failure costs its own time
START_S = 60.0
TRIAL_S = 20.0
FAILURE_S = {"crashed": 5.0, "oom": 40.0, "not_ready": 300.0, "refused": 3.0}


def load() -> dict[str, Any]:
    return sglang_api.load_surface(str(SURFACE))


def stand_in_flags(base: dict[str, Any], setting: dict[str, Any]) -> dict[str, object]:
    """The flags the stand-in would see (after --config): false/null drop the flag, true is a switch."""
    flags: dict[str, object] = {}
    for name, value in {**base, **setting}.items():
        if value is None or value is False:
            continue
        flags[name.replace("-", "_")] = True if value is True else str(value)
    return flags


def true_rate(surface: dict[str, Any], base: dict[str, Any], setting: dict[str, Any]) -> float | None:
    out = sglang_api.surface_outcome(surface, stand_in_flags(base, setting))
    return float(out["tokens_per_s"]) if out["mode"] == "serve" else None


def evaluate(
    surface: dict[str, Any],
    base: dict[str, Any],
    setting: dict[str, Any],
    rng: random.Random,
    *,
    trials: int,
    noise: float,
) -> dict[str, Any]:
    """What the action plugin would report for ``setting``: an outcome for CoordinateSearch.record."""
    out = sglang_api.surface_outcome(surface, stand_in_flags(base, setting))
    status = {"crash": "crashed", "oom": "oom", "never_ready": "not_ready"}.get(str(out["mode"]), "measured")
    if status != "measured":
        return {"status": status, "reason": str(out["message"]), "elapsed_s": FAILURE_S[status]}
    rate = float(out["tokens_per_s"])
    return {
        "status": "measured",
        "trials": [rate * (1.0 + rng.gauss(0.0, noise)) for _trial in range(trials)],
        "elapsed_s": START_S + trials * TRIAL_S,
        "power_pct": round(min(100.0, 30.0 + rate / 40.0), 1),
    }


def run_search(
    space: dict[str, list[Any]] | None = None,
    base: dict[str, Any] | None = None,
    *,
    budget_s: float = 1e9,
    seed: int = 1,
    trials: int = 5,
    noise: float = 0.02,
    min_gain: float = 0.05,
    max_passes: int = 2,
) -> tuple[dict[str, Any], float]:
    """One simulated sweep. Returns (CoordinateSearch.finish(), simulated seconds spent)."""
    space = SPACE if space is None else space
    base = BASE_FLAGS if base is None else base
    surface = load()
    rng = random.Random(seed)
    search = CoordinateSearch(space, base, budget_s=budget_s, min_gain=min_gain, max_passes=max_passes)
    spent = 0.0
    while (setting := search.next(spent)) is not None:
        outcome = evaluate(surface, base, setting, rng, trials=trials, noise=noise)
        spent += outcome["elapsed_s"]
        search.record(setting, outcome)
    return search.finish(), spent


def grid_best(
    space: dict[str, list[Any]] | None = None, base: dict[str, Any] | None = None
) -> tuple[dict[str, Any], float, int]:
    """The true best setting of the full grid, its rate, and the grid's size."""
    space = SPACE if space is None else space
    base = BASE_FLAGS if base is None else base
    surface = load()
    settings = grid(space)
    rated = [(true_rate(surface, base, s), s) for s in settings]
    rate, best = max(((r, s) for r, s in rated if r is not None), key=lambda rs: rs[0])
    return best, rate, len(settings)


def grid_seconds(
    space: dict[str, list[Any]] | None = None, base: dict[str, Any] | None = None, trials: int = 5
) -> float:
    """Simulated time of measuring the full grid once."""
    space = SPACE if space is None else space
    base = BASE_FLAGS if base is None else base
    surface = load()
    rng = random.Random(0)
    return sum(evaluate(surface, base, s, rng, trials=trials, noise=0.0)["elapsed_s"] for s in grid(space))
