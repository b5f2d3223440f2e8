# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller-side cost of the throughput gate's baselines (module_utils/gate/baseline.py).

Prints: the time to choose a baseline for a key without one of its own (every ``*.json`` in the
directory is read and validated, the fallback search) for directories of N baselines, and the
time of one commit (lock, atomic baseline write with fsync, history append with fsync).

    python3 benchmarks/gate_baseline_bench.py [--baselines 100 1000 5000] [--commits 100]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "collections"))

from ansible_collections.gpufleet.sglang.plugins.module_utils.gate import baseline as gb

HOSTS = 50


def fill(directory: str, n: int) -> None:
    for i in range(n):
        key = gb.make_key(
            host=f"node{i % HOSTS}", model="m", profile="p", sglang_version=f"0.5.{i // HOSTS}", gpu_model="g"
        )
        doc = gb.baseline_document(key, [1000.0 + i] * 5, {"concurrency": 64}, "bench", None)
        gb.atomic_write(gb.Paths.for_key(directory, key).baseline, json.dumps(doc))


def choose_ms(directory: str) -> float:
    key = gb.make_key(host="node7", model="m", profile="p", sglang_version="9.0", gpu_model="g")
    paths = gb.Paths.for_key(directory, key)
    start = time.perf_counter()
    others = [(p, data) for p in gb.baseline_files(directory) if (data := gb.read_file(p)) is not None]
    choice = gb.choose(key, (paths.baseline, gb.read_file(paths.baseline)), others, fallback=True)
    elapsed = (time.perf_counter() - start) * 1000
    if choice.baseline is None:
        raise SystemExit("benchmark error: no fallback chosen")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baselines", type=int, nargs="+", default=[100, 1000, 5000])
    ap.add_argument("--commits", type=int, default=100)
    args = ap.parse_args()
    for n in args.baselines:
        with tempfile.TemporaryDirectory() as d:
            fill(d, n)
            runs = [choose_ms(d) for _run in range(3)]
            print(f"choose (fallback search) over {n:>5} baselines: median {statistics.median(runs):8.1f} ms")
    with tempfile.TemporaryDirectory() as d:
        key = gb.make_key(host="node1", model="m", profile="p", sglang_version="0.5.23", gpu_model="g")
        paths = gb.Paths.for_key(d, key)
        doc = gb.baseline_document(key, [1000.0] * 5, {"concurrency": 64}, "bench", None)
        times = []
        for i in range(args.commits):
            start = time.perf_counter()
            gb.commit(paths, {"run": i}, doc, expected_digest=None, accept=True)
            times.append((time.perf_counter() - start) * 1000)
        print(
            f"commit (lock, atomic write, fsync, history append), {args.commits} runs: "
            f"median {statistics.median(times):.2f} ms, max {max(times):.2f} ms"
        )


if __name__ == "__main__":
    main()
