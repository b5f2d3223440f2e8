# Copyright (c) gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""STAND-IN for the JIT and autotune work of an SGLang start. Not SGLang, not Triton.

What it stands in for: on a cold start a real server compiles kernels (FlashInfer JIT, Triton, torch
inductor) and autotunes MoE tactics, and writes them under ``SGLANG_CACHE_DIR``; a start that finds
them there at the same absolute path is short. Triton's group files (``__grp__*.json``) name their
members by absolute path, so a copy at another path misses (docs/warm-start.md).

How: the kernels' key is the SGLang version and the server flags that choose kernels (not the
listening address or the API key). A cold start writes ``KERNELS`` files and a group file naming
them by absolute path under ``$SGLANG_CACHE_DIR/standin-jit/<key>/``; a start is warm when that
group file holds the same key and every path it names exists. The HTTP stand-in (sglang_api.py)
spends ``STANDIN_JIT_COLD_S`` or ``STANDIN_JIT_WARM_S`` seconds in a ``jit`` start phase accordingly.
"""

from __future__ import annotations

import hashlib
import json
import os

JIT_DIR = "standin-jit"
GROUP_FILE = "__grp__standin.json"
KERNELS = 8
# flags that choose no kernel: the same cache serves nodes that differ only in these
NOT_KERNEL_FLAGS = frozenset({"host", "port", "port_file", "api_key", "config", "served_model_name", "enable_metrics"})


def jit_key(version: str, flags: dict[str, object]) -> str:
    kernel_flags = {name: str(value) for name, value in flags.items() if name not in NOT_KERNEL_FLAGS}
    text = json.dumps({"version": version, "flags": kernel_flags}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def group_path(cache_dir: str, key: str) -> str:
    return os.path.join(cache_dir, JIT_DIR, key, GROUP_FILE)


def is_warm(cache_dir: str, key: str) -> bool:
    """Whether ``cache_dir`` holds this key's kernels at the absolute paths its group file names."""
    if not cache_dir:
        return False
    try:
        with open(group_path(cache_dir, key), encoding="utf-8") as handle:
            group = json.load(handle)
    except (OSError, ValueError):
        return False
    paths = group.get("child_paths") if isinstance(group, dict) else None
    if group.get("key") != key or not isinstance(paths, list) or len(paths) != KERNELS:
        return False
    return all(isinstance(p, str) and os.path.isabs(p) and os.path.isfile(p) for p in paths)


def write_cold(cache_dir: str, key: str) -> list[str]:
    """Write this key's kernels and their group file (absolute paths, as Triton does); their paths."""
    directory = os.path.dirname(group_path(cache_dir, key))
    os.makedirs(directory, exist_ok=True)
    paths = []
    for index in range(KERNELS):
        path = os.path.join(directory, f"kernel_{index}.cubin")
        with open(path, "wb") as handle:
            handle.write(hashlib.sha256(f"{key}:{index}".encode()).digest() * 64)
        paths.append(path)
    tmp = group_path(cache_dir, key) + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump({"key": key, "child_paths": paths}, handle)
    os.replace(tmp, group_path(cache_dir, key))
    return paths
