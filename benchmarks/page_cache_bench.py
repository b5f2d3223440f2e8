# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What warming the page cache buys a checkpoint load: cold read versus read after the warm-up.

Builds a snapshot of the model store (--files files of --size-mb MiB, with its record) under --dir,
which must be on a disk file system (tmpfs or ramfs would measure memory twice), then, --repeats
times:

1. drops the page cache (``sync; echo 3 > /proc/sys/vm/drop_caches``: needs root) and reads every
   file the way a loader does (in 8 MiB chunks, one file after the other): the cold read;
2. the same, with 8 files read at once (SGLang's multithreaded loader, 8 threads by default);
3. drops the page cache, runs the module gpufleet.sglang.model_page_cache on the snapshot with 8
   threads, the role's default (its own MiB/s), then reads every file again: the read after the warm-up.

Prints each repeat and the medians, and removes the files (``--keep`` keeps them).

    sudo python3 benchmarks/page_cache_bench.py [--dir /var/tmp/prefetch-bench] [--files 8] [--size-mb 512]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODULE = REPO / "plugins" / "modules" / "model_page_cache.py"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
SNAPSHOT = f"gpufleet-bench/big-moe/{COMMIT}"
CHUNK = 8 * 1024 * 1024
MEMORY_FILE_SYSTEMS = ("tmpfs", "ramfs", "devtmpfs")


def file_system(path: Path) -> str:
    """The type of the file system ``path`` is on (the longest mount point of /proc/mounts above it)."""
    real = os.path.realpath(path)
    best, kind = "", "unknown"
    with open("/proc/mounts", encoding="utf-8") as mounts:
        for line in mounts:
            fields = line.split()
            point = fields[1].replace("\\040", " ")
            if (real == point or real.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
                best, kind = point, fields[2]
    return kind


def build(store: Path, files: int, size_mb: int) -> list[Path]:
    base = store / SNAPSHOT
    base.mkdir(parents=True)
    block = os.urandom(1024 * 1024)
    entries = [{"path": "config.json", "size": 2, "sha256": "", "oid": hashlib.sha1(b"blob 2\0{}").hexdigest()}]
    (base / "config.json").write_bytes(b"{}")
    paths = []
    for index in range(files):
        name = f"model-{index + 1:05d}-of-{files:05d}.safetensors"
        with open(base / name, "wb") as handle:
            for _block in range(size_mb):
                handle.write(block)
        entries.append({"path": name, "size": size_mb * 1024 * 1024, "sha256": "0" * 64, "oid": ""})
        paths.append(base / name)
    (base / ".gpufleet-model.json").write_text(
        json.dumps({"repo": "gpufleet-bench/big-moe", "commit": COMMIT, "files": entries})
    )
    os.sync()
    return paths


def drop_caches() -> None:
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w", encoding="ascii") as handle:
        handle.write("3\n")


def read_file(path: Path) -> int:
    done = 0
    with open(path, "rb", buffering=0) as handle:
        while chunk := handle.read(CHUNK):
            done += len(chunk)
    return done


def read_all(paths: list[Path], threads: int = 1) -> tuple[float, float]:
    """(seconds, MiB/s) of reading every file, ``threads`` files at once."""
    began = time.monotonic()
    if threads == 1:
        done = sum(read_file(path) for path in paths)
    else:
        with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as pool:
            done = sum(pool.map(read_file, paths))
    seconds = time.monotonic() - began
    return seconds, done / 1048576 / seconds


def warm_up(store: Path, workdir: Path) -> dict:
    args = workdir / "args.json"
    module_args = {
        "store": str(store),
        "snapshot": SNAPSHOT,
        "reserve_bytes": 1 << 30,
        "batch_bytes": 16 << 30,
        "threads": 8,
    }
    args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": module_args}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "collections"), *sys.path]))
    proc = subprocess.run(
        [sys.executable, str(MODULE), str(args)], capture_output=True, text=True, env=env, check=False
    )
    result = json.loads(proc.stdout)
    if proc.returncode != 0:
        raise SystemExit(f"model_page_cache failed: {result.get('msg')}")
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--dir", type=Path, default=Path("/var/tmp/prefetch-bench"))
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--size-mb", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--keep", action="store_true")
    opts = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("dropping the page cache needs root")
    opts.dir.mkdir(parents=True, exist_ok=True)
    kind = file_system(opts.dir)
    if kind in MEMORY_FILE_SYSTEMS:
        raise SystemExit(f"{opts.dir} is on {kind}: a memory file system has no cold read; give a disk directory")
    store = opts.dir / "store"
    if store.exists():
        shutil.rmtree(store)
    try:
        paths = build(store, opts.files, opts.size_mb)
        total = opts.files * opts.size_mb
        print(f"{opts.files} files x {opts.size_mb} MiB = {total} MiB under {opts.dir} ({kind})")
        heads = ("repeat", "cold s", "cold MiB/s", "cold 8thr MiB/s", "warm-up MiB/s", "warm s", "warm MiB/s")
        widths = (6, 8, 11, 16, 14, 8, 11)
        print(" ".join(f"{head:>{width}}" for head, width in zip(heads, widths, strict=True)))
        rows = []
        for repeat in range(1, opts.repeats + 1):
            drop_caches()
            cold_s, cold = read_all(paths)
            drop_caches()
            _cold8_s, cold8 = read_all(paths, threads=8)
            drop_caches()
            warm = warm_up(store, opts.dir)
            warm_s, warm_rate = read_all(paths)
            rows.append((cold_s, cold, cold8, warm["mb_per_s"], warm_s, warm_rate))
            print(f"{repeat:>6} " + " ".join(f"{v:>{w}.2f}" for v, w in zip(rows[-1], widths[1:], strict=True)))
        medians = [statistics.median(column) for column in zip(*rows, strict=True)]
        print(f"{'median':>6} " + " ".join(f"{v:>{w}.2f}" for v, w in zip(medians, widths[1:], strict=True)))
        speedup = medians[5] / medians[1]
        print(f"read after the warm-up: {speedup:.1f}x the cold rate ({medians[0]:.2f} s -> {medians[4]:.2f} s)")
    finally:
        if not opts.keep:
            shutil.rmtree(store, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
