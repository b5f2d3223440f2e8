# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""tune.yml's search against the full grid on the SGLang stand-in's response surface, side by side.

Simulated (tests/tools/tune_sim.py): each setting's rate or failure comes from the surface
(tests/standins/surfaces/tune.json, the stand-in's own ``surface_outcome``), each measurement has
Gaussian noise, each candidate is charged simulated seconds (start + readiness, then trials; a
failure its own time). Prints, per seed and budget: candidates evaluated, simulated hours, the
best found and its true rate, against the full grid's size, hours and true best.

    .venv/bin/python benchmarks/tune_bench.py [--seeds 20] [--noise 0.02] [--trials 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "collections"), str(REPO / "tests")]

from tools import tune_sim


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--noise", type=float, default=0.02, help="relative standard deviation of a trial")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--budgets", default="1800,3600,7200,1e9", help="comma-separated budgets in seconds")
    args = ap.parse_args()
    surface = tune_sim.load()
    best, best_rate, size = tune_sim.grid_best()
    grid_s = tune_sim.grid_seconds(trials=args.trials)
    print(f"surface: {tune_sim.SURFACE.relative_to(REPO)}; space: {tune_sim.SPACE}")
    print(f"full grid: {size} candidates, {grid_s / 3600:.2f} h simulated, best {best_rate:.1f} tok/s: {best}")
    print(f"search: coordinate descent, {args.trials} trials, noise {args.noise:.1%}, {args.seeds} seeds")
    header = ("budget_s", "evaluated", "sim hours", "found best", "found/best rate", "stopped")
    print(f"{header[0]:>10} {header[1]:>15} {header[2]:>15} {header[3]:>10} {header[4]:>16} {header[5]:>10}")
    for budget in (float(b) for b in args.budgets.split(",")):
        counts, hours, hits, ratios, stops = [], [], 0, [], {}
        for seed in range(args.seeds):
            result, spent = tune_sim.run_search(budget_s=budget, seed=seed, trials=args.trials, noise=args.noise)
            counts.append(result["evaluated"])
            hours.append(spent / 3600)
            found = result["best"]["setting"]
            hits += found == best
            ratios.append((tune_sim.true_rate(surface, tune_sim.BASE_FLAGS, found) or 0.0) / best_rate)
            stops[result["stopped"]] = stops.get(result["stopped"], 0) + 1
        label = "none" if budget >= 1e8 else f"{budget:g}"
        print(
            f"{label:>10} {statistics.mean(counts):>7.1f} [{min(counts)}-{max(counts)}] "
            f"{statistics.mean(hours):>8.2f} [{max(hours):.2f}] {hits:>5}/{args.seeds:<4} "
            f"{statistics.mean(ratios):>9.3f} [{min(ratios):.3f}] {','.join(f'{k}:{v}' for k, v in stops.items())}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
