"""warm_cache core: the key, a deterministic pack, verify, and a restore that hostile artifacts cannot abuse."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tarfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lib.fuzz import examples
from lib.warm_cache import hostile, key_for, make_cache, node_with_cache, tree

from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang import warm_cache as wc


@pytest.fixture
def node(tmp_path):
    return node_with_cache(tmp_path)


# --------------------------------------------------------------------------- the key


def test_key_digest_is_canonical_and_names_every_field(tmp_path):
    fields = key_for(tmp_path)
    one = wc.cache_key(fields)
    two = wc.cache_key(dict(reversed(list(fields.items()))))
    assert one == two
    assert (
        one["digest"] == hashlib.sha256(json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    )
    for name in wc.KEY_FIELDS:
        changed = dict(fields, **{name: fields[name] + "1" if name != "compute_capability" else "9.0"})
        assert wc.cache_key(changed)["digest"] != one["digest"], name


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"profile": None}, "lacks profile"),
        ({"extra": "x"}, "unknown fields 'extra'"),
        ({"compute_capability": "sm120"}, "compute_capability 'sm120' is not major.minor"),
        ({"cache_dir": "var/cache"}, "cache_dir 'var/cache' is not the absolute"),
        ({"cache_dir": "/var/cache/../etc"}, "not a normalized absolute path"),
        ({"cache_dir": "/"}, "not a normalized absolute path"),
        ({"sglang_version": 5}, "sglang_version is a int"),
        ({"model_revision": ""}, "model_revision '' is not"),
        ({"gpu_model": "NVIDIA\nH200"}, "gpu_model 'NVIDIA\\nH200' is not"),
    ],
)
def test_key_refuses_each_wrong_field_by_name(tmp_path, change, message):
    fields = key_for(tmp_path)
    for name, value in change.items():
        if value is None:
            del fields[name]
        else:
            fields[name] = value
    with pytest.raises(wc.KeyFieldError, match=message.replace("(", r"\(").replace("\\n", "\\\\n")):
        wc.cache_key(fields)


def test_key_refuses_a_non_mapping():
    with pytest.raises(wc.KeyFieldError, match="must be a mapping"):
        wc.cache_key(["sglang_version"])


@given(st.dictionaries(st.sampled_from([*wc.KEY_FIELDS, "other"]), st.one_of(st.text(max_size=40), st.integers())))
def test_key_of_any_mapping_is_a_digest_or_a_named_error(fields):
    try:
        key = wc.cache_key(fields)
    except wc.KeyFieldError as exc:
        message = str(exc)
        assert "warm-cache key" in message
    else:
        assert set(key["fields"]) == set(wc.KEY_FIELDS)
        assert len(key["digest"]) == 64


# --------------------------------------------------------------------------- pack and verify


def test_pack_is_deterministic_and_verifies(node, tmp_path):
    first = wc.pack(str(node["cache"]), str(node["store"]), node["key"])
    for path in node["cache"].rglob("*"):
        os.utime(path, (1, 1))
    second = wc.pack(str(node["cache"]), str(tmp_path / "store2"), node["key"])
    assert first["digest"] == second["digest"]
    assert Path(first["path"]).read_bytes() == Path(second["path"]).read_bytes()
    assert first["path"] == wc.artifact_path(str(node["store"]), first["key"]["digest"], first["digest"])
    assert hashlib.sha256(Path(first["path"]).read_bytes()).hexdigest() == first["digest"]
    checked = wc.verify(first["path"])
    assert checked["files"] == len(node["files"]) == first["files"]
    assert checked["bytes"] == sum(map(len, node["files"].values()))
    with tarfile.open(first["path"]) as tar:
        members = tar.getmembers()
    assert members[0].name == wc.MANIFEST
    assert {m.mtime for m in members} == {0}
    assert {m.uid for m in members} == {0}
    assert [m.name for m in members[1:]] == sorted(wc.MEMBER_PREFIX + n for n in node["files"])
    assert not [n for n in os.listdir(Path(first["path"]).parent) if n.endswith(".tmp")]


def test_pack_leaves_out_symlinks_and_fifos_and_copies_hard_links(node):
    cache = node["cache"]
    (cache / "link").symlink_to("/etc/passwd")
    (cache / "dirlink").symlink_to(cache / "triton")
    os.mkfifo(cache / "fifo")
    os.link(cache / "empty", cache / "hard")
    packed = wc.pack(str(cache), str(node["store"]), node["key"])
    assert {s["path"]: s["why"] for s in packed["skipped"]} == {
        "link": "a symlink",
        "dirlink": "a symlink",
        "fifo": "a FIFO",
    }
    with tarfile.open(packed["path"]) as tar:
        assert all(m.isreg() for m in tar.getmembers())
        assert "files/hard" in tar.getnames()


def test_pack_over_the_bound_writes_nothing(node):
    with pytest.raises(wc.TooLargeError, match="over the bound"):
        wc.pack(str(node["cache"]), str(node["store"]), node["key"], bounds=wc.Bounds(max_bytes=100))
    with pytest.raises(wc.TooLargeError, match="over the bound"):
        wc.pack(str(node["cache"]), str(node["store"]), node["key"], bounds=wc.Bounds(max_files=2))
    assert not node["store"].exists() or not list(node["store"].rglob("*.tar"))


def test_pack_with_a_bad_key_writes_nothing(node):
    with pytest.raises(wc.KeyFieldError):
        wc.pack(str(node["cache"]), str(node["store"]), dict(node["key"], profile=""))
    assert not node["store"].exists()


# --------------------------------------------------------------------------- restore


def test_restore_round_trip_at_the_same_path_after_the_source_is_gone(node):
    packed = wc.pack(str(node["cache"]), str(node["store"]), node["key"])
    shutil.rmtree(node["cache"])
    done = wc.restore(packed["path"], str(node["cache"]), node["key"])
    assert done["files"] == len(node["files"])
    restored = tree(node["cache"])
    marker = json.loads(restored.pop(wc.MARKER))
    assert restored == node["files"]
    assert marker["digest"] == packed["digest"]
    assert marker["key_digest"] == packed["key"]["digest"]
    assert wc.read_marker(str(node["cache"]))["digest"] == packed["digest"]
    so = node["cache"] / ".cache/flashinfer/jit/fused_moe_120/fused_moe_120.so"
    assert so.stat().st_mode & 0o777 == 0o755
    assert (node["cache"] / "empty").stat().st_mode & 0o777 == 0o644
    assert sorted(os.listdir(node["cache"].parent)) == ["sglang"]


def test_restore_replaces_an_old_cache_whole_and_keeps_its_mode(node):
    packed = wc.pack(str(node["cache"]), str(node["store"]), node["key"])
    (node["cache"] / "stale").write_bytes(b"old")
    node["cache"].chmod(0o750)
    wc.restore(packed["path"], str(node["cache"]), node["key"])
    assert not (node["cache"] / "stale").exists()
    assert node["cache"].stat().st_mode & 0o777 == 0o750
    assert sorted(os.listdir(node["cache"].parent)) == ["sglang"]


def test_restore_with_another_key_restores_nothing(node):
    packed = wc.pack(str(node["cache"]), str(node["store"]), node["key"])
    before = tree(node["cache"])
    other = dict(node["key"], sglang_version="0.5.24", driver_version="590.1")
    with pytest.raises(wc.KeyMismatchError, match="differs in sglang_version, driver_version"):
        wc.restore(packed["path"], str(node["cache"]), other)
    assert tree(node["cache"]) == before
    assert sorted(os.listdir(node["cache"].parent)) == ["sglang"]


def test_restore_at_another_path_is_refused(node, tmp_path):
    packed = wc.pack(str(node["cache"]), str(node["store"]), node["key"])
    with pytest.raises(wc.WarmCacheError, match="not the key's cache_dir"):
        wc.restore(packed["path"], str(tmp_path / "elsewhere"), node["key"])
    assert not (tmp_path / "elsewhere").exists()


def test_restore_of_a_damaged_artifact_restores_nothing(node):
    packed = wc.pack(str(node["cache"]), str(node["store"]), node["key"])
    data = bytearray(Path(packed["path"]).read_bytes())
    data[2000] ^= 1
    Path(packed["path"]).write_bytes(bytes(data))
    before = tree(node["cache"])
    with pytest.raises(wc.DigestError, match="damaged or replaced"):
        wc.restore(packed["path"], str(node["cache"]), node["key"])
    with pytest.raises(wc.DigestError):
        wc.verify(packed["path"])
    assert tree(node["cache"]) == before
    assert sorted(os.listdir(node["cache"].parent)) == ["sglang"]


def test_restore_refuses_a_target_that_is_a_symlink(node, tmp_path):
    link = tmp_path / "link"
    packed = wc.pack(str(node["cache"]), str(node["store"]), key_for(link))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link.symlink_to(elsewhere)
    with pytest.raises(wc.WarmCacheError, match="not a directory"):
        wc.restore(packed["path"], str(link), key_for(link), relocate=False)
    assert link.is_symlink()
    assert list(elsewhere.iterdir()) == []


# --------------------------------------------------------------------------- hostile artifacts


def assert_untouched(node, before, sandbox: Path) -> None:
    assert tree(node["cache"]) == before
    assert sorted(os.listdir(node["cache"].parent)) == ["sglang"]
    outside = {str(p.relative_to(sandbox)) for p in sandbox.rglob("*")}
    allowed = {"var", "var/cache", "store"}
    assert {p for p in outside if not p.startswith(("var/cache/sglang", "store"))} <= allowed


@pytest.mark.parametrize(
    ("members", "listed", "error", "message"),
    [
        ([("files/../../escape", "0", b"x")], None, wc.ArchiveError, "'..' segment"),
        ([("files//etc/cron.d/x", "0", b"x")], None, wc.ArchiveError, "is absolute|empty segment"),
        ([("files/link", "2", b"/etc/passwd")], None, wc.ArchiveError, "not a regular file"),
        ([("files/hard", "1", b"files/other")], None, wc.ArchiveError, "not a regular file"),
        ([("files/dev", "3", b"")], None, wc.ArchiveError, "not a regular file"),
        ([("files/fifo", "6", b"")], None, wc.ArchiveError, "not a regular file"),
        (
            [("files/a", "0", b"x"), ("files/a", "0", b"y")],
            [{"path": "a", "size": 1, "mode": 0o644, "sha256": hashlib.sha256(b"x").hexdigest()}],
            wc.ArchiveError,
            "repeated",
        ),
        (
            [("files/a", "0", b"x")],
            [{"path": "a", "size": 1, "mode": 0o644, "sha256": "0" * 64}],
            wc.DigestError,
            "does not match its sha256",
        ),
        (
            [("files/a", "0", b"x")],
            [{"path": "a", "size": 2, "mode": 0o644, "sha256": "0" * 64}],
            wc.ArchiveError,
            "the manifest says 2",
        ),
        (
            [("files/a", "0", b"x")],
            [
                {"path": "a", "size": 1, "mode": 0o644, "sha256": hashlib.sha256(b"x").hexdigest()},
                {"path": "b", "size": 1, "mode": 0o644, "sha256": hashlib.sha256(b"x").hexdigest()},
            ],
            wc.ArchiveError,
            "truncated",
        ),
        (
            [("files/a", "0", b"x")],
            [{"path": "a", "size": 1, "mode": 0o4755, "sha256": hashlib.sha256(b"x").hexdigest()}],
            wc.ArchiveError,
            "bad size, mode or sha256",
        ),
        (
            [("files/a", "0", b"x")],
            [{"path": "a", "size": 1 << 40, "mode": 0o644, "sha256": hashlib.sha256(b"x").hexdigest()}],
            wc.TooLargeError,
            "unpacks to more than",
        ),
        ([("elsewhere", "0", b"x")], [], wc.ArchiveError, "not in its manifest"),
    ],
)
def test_hostile_artifact_restores_nothing(node, tmp_path, members, listed, error, message):  # noqa: PLR0917 (parametrized)
    path = hostile(node["store"], node["key"], members, listed)
    before = tree(node["cache"])
    with pytest.raises(error, match=message):
        wc.restore(path, str(node["cache"]), node["key"])
    with pytest.raises(error):
        wc.verify(path)
    assert_untouched(node, before, tmp_path)


def test_an_artifact_without_its_manifest_first_is_refused(node):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("files/a")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    path = node["store"] / (hashlib.sha256(buf.getvalue()).hexdigest() + ".tar")
    node["store"].mkdir()
    path.write_bytes(buf.getvalue())
    with pytest.raises(wc.ArchiveError, match="does not start with its manifest"):
        wc.restore(str(path), str(node["cache"]), node["key"])


NAMES = st.one_of(
    st.sampled_from(["a", "b/c", "../x", "/etc/x", "a/../../x", "", ".", "a//b", "files", "a\\b", "x\x00y", wc.MARKER]),
    st.text(alphabet="ab./\\", min_size=1, max_size=12),
)
MEMBER = st.tuples(
    NAMES.map(lambda n: wc.MEMBER_PREFIX + n),
    st.sampled_from(["0", "0", "0", "1", "2", "3", "5", "6"]),
    st.binary(max_size=64),
)


@given(st.lists(MEMBER, max_size=6), st.booleans())
def test_any_hostile_artifact_gives_a_named_error_or_a_confined_restore(tmp_path_factory, members, wrong_digest):
    sandbox = tmp_path_factory.mktemp("hostile")
    cache = sandbox / "var" / "cache" / "sglang"
    cache.mkdir(parents=True)
    (cache / "old").write_bytes(b"the node's cache")
    node = {"cache": cache, "key": key_for(cache)}
    listed = None
    if wrong_digest and members:
        listed = [
            {"path": n.removeprefix(wc.MEMBER_PREFIX), "size": len(d), "mode": 0o644, "sha256": "f" * 64}
            for n, _k, d in members
        ]
    try:
        path = hostile(sandbox / "store", node["key"], members, listed)
    except (ValueError, tarfile.TarError):
        return  # tarfile itself refuses to write such a name: nothing to restore
    before = tree(cache)
    try:
        wc.restore(path, str(cache), node["key"])
    except wc.WarmCacheError:
        assert_untouched(node, before, sandbox)
    else:
        restored = tree(cache)
        restored.pop(wc.MARKER)
        assert restored == {n.removeprefix(wc.MEMBER_PREFIX): d for n, _k, d in members}
        assert_untouched({"cache": cache}, tree(cache), sandbox)


@settings(max_examples=examples(60))  # each example packs a cache: costly
@given(st.integers(min_value=0, max_value=20_000))
def test_a_truncated_artifact_gives_a_named_error(tmp_path_factory, cut):
    sandbox = tmp_path_factory.mktemp("cut")
    cache = sandbox / "var" / "cache" / "sglang"
    cache.mkdir(parents=True)
    files = make_cache(cache)
    key = key_for(cache)
    packed = Path(wc.pack(str(cache), str(sandbox / "store"), key)["path"])
    raw = packed.read_bytes()
    cut = cut % len(raw)
    short = raw[:cut]
    path = packed.with_name(hashlib.sha256(short).hexdigest() + ".tar")
    path.write_bytes(short)
    before = tree(cache)
    try:
        wc.restore(str(path), str(cache), key)
    except wc.WarmCacheError:
        assert tree(cache) == before
        assert sorted(os.listdir(cache.parent)) == ["sglang"]
    else:
        # a cut in the end-of-archive padding leaves every member whole and checked
        restored = tree(cache)
        restored.pop(wc.MARKER)
        assert restored == files
