"""The SGLang stand-in's jit start phase, started as a process: long on an empty cache (which it fills),
short once the cache holds its kernels, and carried to the next node by the warm-cache core only at the
same absolute path (a copy elsewhere misses, as Triton's group files do on a real GPU)."""

from __future__ import annotations

import re
import shutil
import time
import urllib.error
import urllib.request
from pathlib import Path

from lib.standin import START_TIMEOUT_S, sglang_standin
from lib.warm_cache import key_for

from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang import warm_cache as wc
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.startup_metrics import parse_startup

COLD_S, WARM_S = 1.2, 0.05


def start(tmp_path: Path, cache: Path | None, *flags: str) -> dict:
    """Start the stand-in, wait for /ready, read its start phases from /metrics, stop it."""
    env = {"STANDIN_JIT_COLD_S": str(COLD_S), "STANDIN_JIT_WARM_S": str(WARM_S), "STANDIN_STARTUP_DELAY_S": "0.2"}
    if cache is not None:
        env["SGLANG_CACHE_DIR"] = str(cache)
    with sglang_standin(tmp_path, "--enable-metrics", *flags, env=env, capture=True) as standin:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(standin.url + "/ready", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except urllib.error.HTTPError:
                time.sleep(0.02)
        with urllib.request.urlopen(standin.url + "/metrics", timeout=5) as answer:
            phases = parse_startup(answer.read().decode())["phases"]
    state = re.search(r"^STANDIN_JIT (cold|warm) ", standin.stdout, re.MULTILINE)
    return {"phases": phases, "state": state.group(1) if state else None}


def test_cold_fills_the_cache_and_a_restart_is_warm(tmp_path):
    cache = tmp_path / "node1" / "cache"
    cold = start(tmp_path, cache)
    assert cold["state"] == "cold"
    assert cold["phases"]["jit"] >= COLD_S
    assert len(list((cache / "standin-jit").rglob("*.cubin"))) == 8
    warm = start(tmp_path, cache)
    assert warm["state"] == "warm"
    assert warm["phases"]["jit"] < COLD_S / 2
    assert warm["phases"]["scheduler_e2e"] < cold["phases"]["scheduler_e2e"]
    other_flags = start(tmp_path, cache, "--tp", "4")
    assert other_flags["state"] == "cold"  # other kernels: another key


def test_without_a_cache_dir_every_start_is_cold_and_writes_nothing(tmp_path):
    assert start(tmp_path, None)["state"] == "cold"
    assert start(tmp_path, None)["state"] == "cold"


def test_no_jit_phase_unless_asked(tmp_path):
    with (
        sglang_standin(tmp_path, "--enable-metrics", capture=True) as standin,
        urllib.request.urlopen(f"{standin.url}/metrics", timeout=5) as answer,
    ):
        phases = parse_startup(answer.read().decode())["phases"]
    assert set(phases) == {"load_weight", "kv_cache_allocation", "scheduler_e2e", "tokenizer_e2e"}
    assert "STANDIN_JIT" not in standin.stdout


def test_the_artifact_carries_the_warm_start_to_the_next_node_at_the_same_path(tmp_path):
    cache = tmp_path / "var" / "cache" / "sglang"
    assert start(tmp_path, cache)["state"] == "cold"  # the canary
    key = key_for(cache)
    packed = wc.pack(str(cache), str(tmp_path / "store"), key)
    shutil.rmtree(cache)  # the next node has nothing: the source must be gone, or a copy reads its files

    elsewhere = tmp_path / "srv" / "sglang-cache"
    wc.restore(packed["path"], str(elsewhere), key, relocate=True)
    moved = start(tmp_path, elsewhere)
    assert moved["state"] == "cold"  # the group file names the canary's absolute paths
    shutil.rmtree(elsewhere)

    wc.restore(packed["path"], str(cache), key)
    carried = start(tmp_path, cache)
    assert carried["state"] == "warm"
    assert carried["phases"]["jit"] < COLD_S / 2
