"""warm_cache against the worst value of each outside input (an attacker's review): a store planted by
another node, a cache directory changed under a collect by the server's user, a swap interrupted
half-way, an operator's key or store that overlaps the cache."""

from __future__ import annotations

import hashlib
import os
import re
import tarfile
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lib.deadline import deadline
from lib.fuzz import examples
from lib.warm_cache import hostile, key_for, node_with_cache, tree

from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang import warm_cache as wc


@pytest.fixture
def node(tmp_path):
    return node_with_cache(tmp_path)


def artifacts_in(store: Path) -> list[Path]:
    return sorted(store.rglob("*.tar")) if store.exists() else []


# --------------------------------------------------------------------------- pack: the cache changes under it


def swap_after_scan(monkeypatch, change):
    """Run ``change`` once the scan has looked at every file (what a server writing its cache, or a
    hostile one, can do between the scan and the read)."""
    real = wc.scan

    def scan_then_change(*args, **kwargs):
        found = real(*args, **kwargs)
        change()
        return found

    monkeypatch.setattr(wc, "scan", scan_then_change)


def test_pack_never_reads_through_a_file_swapped_for_a_symlink_after_the_scan(node, tmp_path, monkeypatch):
    secret = tmp_path / "shadow"
    secret.write_bytes(b"root:$6$secret")
    victim = node["cache"] / "triton/AB12/scaled_add.cubin"

    def plant():
        victim.unlink()
        victim.symlink_to(secret)

    swap_after_scan(monkeypatch, plant)
    with pytest.raises(wc.WarmCacheError, match=r"triton/AB12/scaled_add\.cubin"):
        wc.pack(str(node["cache"]), str(node["store"]), node["key"])
    assert artifacts_in(node["store"]) == []
    assert not any(b"secret" in p.read_bytes() for p in node["store"].rglob("*") if p.is_file())


def test_pack_never_reads_through_a_directory_swapped_for_a_symlink_after_the_scan(node, tmp_path, monkeypatch):
    elsewhere = tmp_path / "etc"
    (elsewhere / "AB12").mkdir(parents=True)
    for name in ("__grp__scaled_add.json", "scaled_add.cubin"):
        (elsewhere / "AB12" / name).write_bytes(b"secret")

    def plant():
        os.rename(node["cache"] / "triton", tmp_path / "moved")
        (node["cache"] / "triton").symlink_to(elsewhere)

    swap_after_scan(monkeypatch, plant)
    with pytest.raises(wc.WarmCacheError, match="triton"):
        wc.pack(str(node["cache"]), str(node["store"]), node["key"])
    assert artifacts_in(node["store"]) == []


def test_pack_refuses_a_file_rewritten_between_scan_and_read(node, monkeypatch):
    victim = node["cache"] / "inductor/fxgraph/xy/entry"
    swap_after_scan(monkeypatch, lambda: victim.write_bytes(b"GRAPH"))  # same size, other bytes
    with pytest.raises(wc.WarmCacheError, match=r"inductor/fxgraph/xy/entry.*changed"):
        wc.pack(str(node["cache"]), str(node["store"]), node["key"])
    assert artifacts_in(node["store"]) == []


# --------------------------------------------------------------------------- the store planted by another node


def test_a_key_directory_linked_out_of_the_store_is_neither_written_nor_read(node, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    node["store"].mkdir()
    key_digest = wc.cache_key(node["key"])["digest"]
    (node["store"] / key_digest).symlink_to(outside)
    with pytest.raises(wc.WarmCacheError, match=f"{key_digest}.*symlink"):
        wc.pack(str(node["cache"]), str(node["store"]), node["key"])
    assert list(outside.iterdir()) == []
    good = tmp_path / "good"
    packed = wc.pack(str(node["cache"]), str(good), node["key"])
    os.rename(packed["path"], outside / os.path.basename(packed["path"]))
    with pytest.raises(wc.WarmCacheError, match=f"{key_digest}.*symlink"):
        wc.find_artifact(str(node["store"]), key_digest)


def test_a_key_directory_that_is_a_file_is_named(node):
    node["store"].mkdir()
    key_digest = wc.cache_key(node["key"])["digest"]
    (node["store"] / key_digest).write_bytes(b"planted")
    with pytest.raises(wc.WarmCacheError, match=f"{key_digest} is not a directory"):
        wc.find_artifact(str(node["store"]), key_digest)
    with pytest.raises(wc.WarmCacheError, match=f"{key_digest} is not a directory"):
        wc.pack(str(node["cache"]), str(node["store"]), node["key"])


HEX = "0123456789abcdef"
PLANTED_KIND = st.sampled_from(["dir", "fifo", "symlink-zero", "dangling", "symlink-good", "empty-file"])
PLANTED_NAME = st.one_of(
    st.text(alphabet=HEX, min_size=64, max_size=64).map(lambda h: h + ".tar"),
    st.sampled_from(["x.tar", "A" * 64 + ".tar", ".warm-cache.tmp", "0" * 63 + ".tar", "0" * 64]),
)


def plant(directory: Path, name: str, kind: str, good: Path) -> None:
    path = directory / name
    if kind == "dir":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink-zero":
        path.symlink_to("/dev/zero")
    elif kind == "dangling":
        path.symlink_to(directory / "missing")
    elif kind == "symlink-good":
        path.symlink_to(good)
    else:
        path.write_bytes(b"")


@settings(max_examples=examples(40), deadline=None)
@given(st.dictionaries(PLANTED_NAME, PLANTED_KIND, max_size=6), st.booleans())
def test_find_artifact_takes_only_a_regular_file_named_by_a_digest(tmp_path_factory, planted, with_good):
    sandbox = tmp_path_factory.mktemp("planted")
    directory = sandbox / "store" / ("a" * 64)
    directory.mkdir(parents=True)
    good = sandbox / "good.tar"
    good.write_bytes(b"not really an artifact")
    real = None
    if with_good:
        real = directory / (hashlib.sha256(b"real").hexdigest() + ".tar")
        real.write_bytes(b"real")
        os.utime(real, (1, 1))  # the oldest: a planted entry must still not win
    planted.pop(real.name if real else "", None)
    for name, kind in planted.items():
        plant(directory, name, kind, good)
    with deadline(10):
        found = wc.find_artifact(str(sandbox / "store"), "a" * 64)
    named = re.compile(r"[0-9a-f]{64}\.tar")
    usable = {n for n, k in planted.items() if k == "empty-file" and named.fullmatch(n)}
    if real:
        usable.add(real.name)
    if not usable:
        assert found is None
        return
    assert found is not None
    assert os.path.basename(found) in usable
    assert os.path.dirname(found) == str(directory)
    assert os.path.isfile(found)
    assert not os.path.islink(found)


@pytest.mark.parametrize("kind", ["fifo", "symlink-zero", "dir", "dangling"])
def test_verify_and_restore_of_a_planted_artifact_do_not_block_and_name_it(node, tmp_path, kind):
    directory = node["store"] / wc.cache_key(node["key"])["digest"]
    directory.mkdir(parents=True)
    name = "f" * 64 + ".tar"
    plant(directory, name, kind, tmp_path / "nothing")
    before = tree(node["cache"])
    with deadline(10):
        with pytest.raises((wc.WarmCacheError, FileNotFoundError), match=name):
            wc.verify(str(directory / name))
        with pytest.raises((wc.WarmCacheError, FileNotFoundError), match=name):
            wc.restore(str(directory / name), str(node["cache"]), node["key"])
    assert tree(node["cache"]) == before
    assert sorted(os.listdir(node["cache"].parent)) == ["sglang"]


def test_read_marker_of_a_fifo_or_a_link_does_not_block_and_reads_nothing(tmp_path):
    os.mkfifo(tmp_path / wc.MARKER)
    with deadline(10):
        assert wc.read_marker(str(tmp_path)) is None
    (tmp_path / wc.MARKER).unlink()
    real = tmp_path / "real.json"
    real.write_text('{"digest": "' + "a" * 64 + '"}')
    (tmp_path / wc.MARKER).symlink_to(real)
    assert wc.read_marker(str(tmp_path)) is None


# --------------------------------------------------------------------------- a store and a cache that overlap


def test_a_store_inside_the_cache_is_refused_by_pack_and_restore_and_survives(node, tmp_path):
    inner = node["cache"] / "warm"
    with pytest.raises(wc.WarmCacheError, match="overlap"):
        wc.pack(str(node["cache"]), str(inner), node["key"])
    assert not inner.exists()
    packed = wc.pack(str(node["cache"]), str(node["store"]), node["key"])
    os.rename(node["store"], inner)
    moved = inner / os.path.relpath(packed["path"], node["store"])
    with pytest.raises(wc.WarmCacheError, match="inside the restore target"):
        wc.restore(str(moved), str(node["cache"]), node["key"])
    assert moved.is_file()
    assert wc.verify(str(moved))["digest"] == packed["digest"]
    with pytest.raises(wc.WarmCacheError, match="overlap"):
        wc.check_apart(str(tmp_path / "var"), str(node["cache"]))


# --------------------------------------------------------------------------- the swap, interrupted


def interrupt_rename(monkeypatch, call: int, *, after: bool):
    """KeyboardInterrupt at os.rename number ``call`` (1: the old directory aside, 2: the new one in),
    before the rename or right after it."""
    real = os.rename
    calls = []

    def rename(src, dst):
        calls.append((src, dst))
        if len(calls) == call and not after:
            raise KeyboardInterrupt
        real(src, dst)
        if len(calls) == call and after:
            raise KeyboardInterrupt

    monkeypatch.setattr(wc.os, "rename", rename)


@pytest.mark.parametrize(
    ("call", "after", "new_in_place"), [(1, False, False), (1, True, False), (2, False, False), (2, True, True)]
)
def test_an_interrupted_swap_leaves_exactly_one_whole_directory(node, monkeypatch, call, after, new_in_place):
    packed = wc.pack(str(node["cache"]), str(node["store"]), node["key"])
    for rel in node["files"]:
        (node["cache"] / rel).write_bytes(b"the old cache")
    old = tree(node["cache"])
    interrupt_rename(monkeypatch, call, after=after)
    with pytest.raises(KeyboardInterrupt):
        wc.restore(packed["path"], str(node["cache"]), node["key"])
    monkeypatch.undo()
    assert sorted(os.listdir(node["cache"].parent)) == ["sglang"]
    now = tree(node["cache"])
    if new_in_place:
        now.pop(wc.MARKER)
        assert now == node["files"]
    else:
        assert now == old


def test_a_failing_fsync_after_the_swap_leaves_no_old_copy_behind(node, monkeypatch):
    packed = wc.pack(str(node["cache"]), str(node["store"]), node["key"])

    def refuse(_directory):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(wc, "fsync_dir", refuse)
    with pytest.raises(OSError, match="Input/output error"):
        wc.restore(packed["path"], str(node["cache"]), node["key"])
    assert sorted(os.listdir(node["cache"].parent)) == ["sglang"]


# --------------------------------------------------------------------------- odd keys and manifests


@pytest.mark.parametrize("value", ["//", "//var/cache/sglang", "/var//cache", "/var/cache/", "/./x", "/x/.."])
def test_a_key_path_that_is_not_one_spelling_of_a_path_below_root_is_refused(tmp_path, value):
    with pytest.raises(wc.KeyFieldError, match="cache_dir"):
        wc.cache_key(key_for(value))


@given(st.text(alphabet="/.ab", min_size=1, max_size=12))
def test_any_accepted_key_path_is_absolute_with_plain_segments(value):
    try:
        wc.cache_key(key_for(value))
    except wc.KeyFieldError as exc:
        message = str(exc)
        assert "cache_dir" in message
        return
    segments = value.split("/")
    assert segments[0] == ""
    assert all(s not in ("", ".", "..") for s in segments[1:])


@given(st.text(alphabet="/.ab", min_size=1, max_size=12))
def test_restore_refuses_any_target_that_is_not_a_plain_path_below_root(value):
    segments = value.split("/")
    plain = segments[0] == "" and len(segments) > 1 and all(s not in ("", ".", "..") for s in segments[1:])
    if plain:
        return  # a plain target is checked against the key (the other tests)
    with pytest.raises(wc.WarmCacheError, match="restore target"):
        wc.restore("/nonexistent/" + "a" * 64 + ".tar", value, key_for(Path("/x")), relocate=True)


@pytest.mark.parametrize(
    "paths",
    [["a", "a/b"], ["a/b/c", "a/b"], ["x", wc.MARKER + "/y"]],
)
def test_a_manifest_naming_a_file_as_a_directory_is_refused_by_name(node, tmp_path, paths):
    members = [(wc.MEMBER_PREFIX + p, "0", b"x") for p in paths]
    path = hostile(node["store"], node["key"], members)
    before = tree(node["cache"])
    with pytest.raises(wc.ArchiveError, match="both a file and a directory"):
        wc.restore(path, str(node["cache"]), node["key"])
    assert tree(node["cache"]) == before
    assert sorted(os.listdir(node["cache"].parent)) == ["sglang"]


@settings(max_examples=examples(50), deadline=None)
@given(st.lists(st.text(alphabet="ab/", min_size=1, max_size=6), min_size=1, max_size=5, unique=True))
def test_any_set_of_member_names_restores_whole_or_gives_a_named_error(tmp_path_factory, names):
    sandbox = tmp_path_factory.mktemp("names")
    cache = sandbox / "var" / "cache" / "sglang"
    cache.mkdir(parents=True)
    (cache / "old").write_bytes(b"old")
    key = key_for(cache)
    members = [(wc.MEMBER_PREFIX + n, "0", n.encode()) for n in names]
    path = hostile(sandbox / "store", key, members)
    try:
        wc.restore(path, str(cache), key)
    except wc.WarmCacheError:
        assert tree(cache) == {"old": b"old"}
    else:
        restored = tree(cache)
        restored.pop(wc.MARKER)
        assert restored == {n: n.encode() for n in names}
    assert sorted(os.listdir(cache.parent)) == ["sglang"]


def test_more_members_than_the_file_bound_is_refused_before_anything_is_written(node):
    packed = wc.pack(str(node["cache"]), str(node["store"]), node["key"])
    before = tree(node["cache"])
    with pytest.raises(wc.TooLargeError, match="files"):
        wc.verify(packed["path"], bounds=wc.Bounds(max_files=2))
    with pytest.raises(wc.TooLargeError, match="files"):
        wc.restore(packed["path"], str(node["cache"]), node["key"], bounds=wc.Bounds(max_files=2))
    assert tree(node["cache"]) == before
    assert sorted(os.listdir(node["cache"].parent)) == ["sglang"]


def test_a_member_name_longer_than_a_path_may_be_restores_nothing_and_is_named(node):
    name = "/".join(["d" * 250] * 20)  # every segment allowed, the whole over PATH_MAX
    path = hostile(node["store"], node["key"], [(wc.MEMBER_PREFIX + name, "0", b"x")])
    before = tree(node["cache"])
    with pytest.raises(wc.ArchiveError, match="longer than"):
        wc.restore(path, str(node["cache"]), node["key"])
    assert tree(node["cache"]) == before
    assert sorted(os.listdir(node["cache"].parent)) == ["sglang"]


def test_names_that_differ_only_in_unicode_normalisation_are_refused_as_one_name_twice(node):
    """On a file system that normalises names (ZFS with normalization=formD, the Proxmox default pool's
    option) they are one file: the second create would fail half-way through the extraction."""
    names = [unicodedata.normalize("NFC", "caf\u00e9"), unicodedata.normalize("NFD", "caf\u00e9")]
    path = hostile(node["store"], node["key"], [(wc.MEMBER_PREFIX + n, "0", n.encode()) for n in names])
    before = tree(node["cache"])
    with pytest.raises(wc.ArchiveError, match="twice"):
        wc.restore(path, str(node["cache"]), node["key"])
    assert tree(node["cache"]) == before


def test_a_cache_file_with_a_name_restore_would_refuse_is_left_out_of_a_collect(node):
    deep = node["cache"] / "/".join(["d" * 200] * 6)
    deep.mkdir(parents=True)
    (deep / "f").write_bytes(b"x")
    packed = wc.pack(str(node["cache"]), str(node["store"]), node["key"])
    assert [e["path"].count("/") for e in packed["skipped"]] == [6]
    assert "longer than" in packed["skipped"][0]["why"]
    wc.verify(packed["path"])


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file another owner")
def test_a_hard_link_to_another_users_file_is_left_out_of_a_collect(node, tmp_path):
    """Where fs.protected_hardlinks is 0, the server's user can hard-link a file it does not own
    (/etc/shadow on the same file system) into its cache; the collect runs as root."""
    secret = node["cache"].parent / "shadow"
    secret.write_bytes(b"root:$6$secret")
    os.chown(secret, 12345, 12345)
    os.link(secret, node["cache"] / "planted")
    os.link(node["cache"] / "empty", node["cache"] / "own-hard-link")  # the cache owner's: still copied
    packed = wc.pack(str(node["cache"]), str(node["store"]), node["key"])
    assert [s["path"] for s in packed["skipped"]] == ["planted"]
    assert "hard link" in packed["skipped"][0]["why"]
    assert b"$6$secret" not in Path(packed["path"]).read_bytes()
    with tarfile.open(packed["path"]) as tar:
        assert "files/own-hard-link" in tar.getnames()
