"""sglang_warm_cache module shell: run as Ansible runs it (an args file), collect -> restore on a second node."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from lib.module import run_module as run_module_at
from lib.warm_cache import key_for, make_cache, tree

REPO = Path(__file__).resolve().parents[2]
MODULE = REPO / "plugins" / "modules" / "sglang_warm_cache.py"


def run_module(args: dict, tmp_path: Path, *, check: bool = False) -> tuple[int, dict]:
    return run_module_at(MODULE, args, tmp_path, check=check)


@pytest.fixture
def cache(tmp_path):
    """A node's JIT cache directory, filled (lib.warm_cache.make_cache)."""
    path = tmp_path / "cache"
    path.mkdir()
    make_cache(path)
    return path


def test_collect_then_restore_on_the_next_node(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    files = make_cache(cache)
    store = tmp_path / "store"
    args = {"store": str(store), "key": key_for(cache)}

    rc, planned = run_module(dict(args, state="collect"), tmp_path, check=True)
    assert rc == 0, planned
    assert (planned["changed"], planned["action"], planned["files"]) == (True, "collected", len(files))
    assert not store.exists()

    rc, collected = run_module(dict(args, state="collect"), tmp_path)
    assert rc == 0, collected
    assert (collected["changed"], collected["action"]) == (True, "collected")
    assert Path(collected["artifact"]).name == collected["digest"] + ".tar"
    assert Path(collected["artifact"]).parent.name == collected["key_digest"]

    rc, again = run_module(dict(args, state="collect"), tmp_path)
    assert (rc, again["changed"], again["action"], again["digest"]) == (0, False, "present", collected["digest"])

    shutil.rmtree(cache)  # the next node: nothing at the cache path yet
    rc, planned = run_module(dict(args, state="restore"), tmp_path, check=True)
    assert (rc, planned["changed"], planned["action"]) == (0, True, "restored")
    assert not cache.exists()
    rc, restored = run_module(dict(args, state="restore"), tmp_path)
    assert (rc, restored["changed"], restored["action"]) == (0, True, "restored"), restored
    on_disk = tree(cache)
    on_disk.pop(".gpufleet-warm-cache.json")
    assert on_disk == files

    (cache / "triton" / "new-kernel").write_bytes(b"written by the server after the restore")
    rc, current = run_module(dict(args, state="restore"), tmp_path)
    assert (rc, current["changed"], current["action"]) == (0, False, "current")
    assert (cache / "triton" / "new-kernel").exists()

    rc, seen = run_module(dict(args, state="inspect"), tmp_path)
    assert (rc, seen["changed"], seen["action"], seen["digest"]) == (0, False, "inspected", collected["digest"])
    assert f"came from artifact {collected['digest']}" in seen["reason"]


def test_another_key_finds_nothing_and_the_node_starts_cold(tmp_path, cache):
    store = tmp_path / "store"
    rc, _result = run_module({"state": "collect", "store": str(store), "key": key_for(cache)}, tmp_path)
    assert rc == 0
    shutil.rmtree(cache)
    other = key_for(cache, sglang_version="0.5.24")
    rc, result = run_module({"state": "restore", "store": str(store), "key": other}, tmp_path)
    assert (rc, result["changed"], result["action"]) == (0, False, "none")
    assert "holds no artifact for this key" in result["reason"]
    assert not cache.exists()


def test_own_caches_are_kept_unless_replace(tmp_path, cache):
    store = tmp_path / "store"
    args = {"store": str(store), "key": key_for(cache)}
    assert run_module(dict(args, state="collect"), tmp_path)[0] == 0
    (cache / "own").write_bytes(b"this node's own build")
    rc, kept = run_module(dict(args, state="restore"), tmp_path)
    assert (rc, kept["changed"], kept["action"]) == (0, False, "kept")
    assert (cache / "own").exists()
    rc, replaced = run_module(dict(args, state="restore", replace=True), tmp_path)
    assert (rc, replaced["action"]) == (0, "restored")
    assert not (cache / "own").exists()


def test_a_tampered_artifact_is_refused_with_a_warning_and_nothing_restored(tmp_path, cache):
    store = tmp_path / "store"
    args = {"store": str(store), "key": key_for(cache)}
    rc, collected = run_module(dict(args, state="collect"), tmp_path)
    assert rc == 0
    artifact = Path(collected["artifact"])
    data = bytearray(artifact.read_bytes())
    data[1500] ^= 0xFF
    artifact.write_bytes(bytes(data))
    shutil.rmtree(cache)
    rc, result = run_module(dict(args, state="restore"), tmp_path)
    assert (rc, result["changed"], result["action"]) == (0, False, "refused")
    assert "failed its checks" in result["reason"]
    assert "failed its checks" in json.dumps(result["warnings"])
    assert not cache.exists()


def test_an_empty_cache_collects_nothing(tmp_path):
    cache = tmp_path / "cache"
    (cache / "triton").mkdir(parents=True)
    rc, result = run_module({"state": "collect", "store": str(tmp_path / "store"), "key": key_for(cache)}, tmp_path)
    assert (rc, result["changed"], result["action"]) == (0, False, "none")
    assert not (tmp_path / "store").exists()


def test_a_cache_over_the_bound_is_not_collected_and_not_an_error(tmp_path, cache):
    args = {"state": "collect", "store": str(tmp_path / "store"), "key": key_for(cache), "max_bytes": 100}
    rc, result = run_module(args, tmp_path)
    assert (rc, result["changed"], result["action"]) == (0, False, "none")
    assert "over the bound" in result["reason"]
    assert not list((tmp_path / "store").rglob("*.tar"))


def test_a_bad_key_fails_naming_the_field(tmp_path):
    key = key_for(tmp_path / "cache", compute_capability="sm_120")
    rc, result = run_module({"state": "inspect", "store": str(tmp_path / "store"), "key": key}, tmp_path)
    assert rc != 0
    assert "compute_capability 'sm_120' is not major.minor" in result["msg"]
    rc, result = run_module({"state": "inspect", "store": str(tmp_path), "key": {"profile": "x"}}, tmp_path)
    assert rc != 0
    assert "missing required arguments" in result["msg"]


def test_left_out_entries_are_listed_and_never_under_the_reserved_skipped_key(tmp_path, cache):
    """A symlink in the cache is left out and listed; the result has no `skipped` key, which Ansible reads
    as "this task was skipped" when it is not empty (and ansible-core 2.21 drops from registered results)."""
    (cache / "link-to-elsewhere").symlink_to("/etc/hostname")
    rc, collected = run_module({"store": str(tmp_path / "store"), "key": key_for(cache), "state": "collect"}, tmp_path)
    assert rc == 0, collected
    assert "skipped" not in collected
    assert [entry["path"] for entry in collected["left_out"]] == ["link-to-elsewhere"]


def test_check_mode_restore_names_a_missing_owner_as_the_real_run_does(tmp_path, cache):
    store = tmp_path / "store"
    args = {"store": str(store), "key": key_for(cache)}
    assert run_module(dict(args, state="collect"), tmp_path)[0] == 0
    shutil.rmtree(cache)
    restore = dict(args, state="restore", owner="no-such-user-gpufleet")
    for check in (True, False):
        rc, result = run_module(restore, tmp_path, check=check)
        assert rc != 0, (check, result)
        assert "no-such-user-gpufleet" in result["msg"]
    assert not cache.exists()


def test_a_key_directory_planted_as_a_link_out_of_the_store_is_refused_and_the_node_starts_cold(tmp_path, cache):
    elsewhere = tmp_path / "elsewhere"
    rc, collected = run_module({"state": "collect", "store": str(elsewhere), "key": key_for(cache)}, tmp_path)
    assert rc == 0, collected
    store = tmp_path / "store"
    store.mkdir()
    (store / collected["key_digest"]).symlink_to(elsewhere / collected["key_digest"])
    args = {"store": str(store), "key": key_for(cache)}
    before = sorted(p.name for p in (elsewhere / collected["key_digest"]).iterdir())
    rc, result = run_module(dict(args, state="collect"), tmp_path)
    assert rc != 0
    assert collected["key_digest"] in result["msg"]
    assert sorted(p.name for p in (elsewhere / collected["key_digest"]).iterdir()) == before
    shutil.rmtree(cache)
    rc, result = run_module(dict(args, state="restore"), tmp_path)
    assert (rc, result["changed"], result["action"]) == (0, False, "refused"), result
    assert "symlink" in result["reason"]
    assert not cache.exists()


def test_a_store_inside_the_cache_directory_fails_naming_both(tmp_path, cache):
    for state in ("collect", "restore"):
        rc, result = run_module({"state": state, "store": str(cache / "warm"), "key": key_for(cache)}, tmp_path)
        assert rc != 0, result
        assert "overlap" in result["msg"]
        assert str(cache / "warm") in result["msg"]
    assert not (cache / "warm").exists()


def test_a_broken_artifact_planted_newest_does_not_shadow_a_good_one(tmp_path):
    """A node that plants a damaged artifact with an mtime in the future must not keep every restore
    (and every collect, which finds its own new artifact older) refused for good."""
    cache = tmp_path / "cache"
    cache.mkdir()
    files = make_cache(cache)
    store = tmp_path / "store"
    args = {"store": str(store), "key": key_for(cache)}
    rc, collected = run_module(dict(args, state="collect"), tmp_path)
    assert rc == 0, collected
    junk = b"not a tar"
    planted = Path(collected["artifact"]).with_name(hashlib.sha256(junk).hexdigest() + ".tar")
    planted.write_bytes(junk)
    os.utime(planted, (4102444800, 4102444800))  # 2100-01-01
    shutil.rmtree(cache)
    rc, restored = run_module(dict(args, state="restore"), tmp_path)
    assert (rc, restored["action"], restored["digest"]) == (0, "restored", collected["digest"]), restored
    assert planted.name in json.dumps(restored["warnings"])
    on_disk = tree(cache)
    on_disk.pop(".gpufleet-warm-cache.json")
    assert on_disk == files
    rc, again = run_module(dict(args, state="collect"), tmp_path)
    assert (rc, again["action"], again["digest"]) == (0, "present", collected["digest"]), again
