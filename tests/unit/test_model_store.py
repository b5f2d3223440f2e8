# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""model_store: what a Hub, a mirror, a local source or a record on disk says is checked before use.

Named cases for each finding (commit ids, listing names, local symlinks, credentials in endpoints,
wrong-shape records, files growing past their size) and hypothesis properties: a named error or a
correct result, never another exception, never a path outside the root, never a credential in any
output. The module shell around these functions is covered by tests/integration/test_model_store.py
(real huggingface_hub against the Hub stand-in).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lib.deadline import deadline

from ansible_collections.gpufleet.sglang.plugins.filter.model_store_errors import model_store_errors
from ansible_collections.gpufleet.sglang.plugins.module_utils.common import confined_path as cp
from ansible_collections.gpufleet.sglang.plugins.module_utils.common.secret_mask import secret_forms
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang import model_store as ms

COMMIT = "0123456789abcdef0123456789abcdef01234567"
REPO = "gpufleet-test/tiny-moe"
SHA = hashlib.sha256(b"x").hexdigest()
OID = hashlib.sha1(b"blob 1\0x").hexdigest()


def entry(path: object = "config.json", size: object = 1, sha256: object = "", oid: object = OID) -> dict:
    return {"path": path, "size": size, "sha256": sha256, "oid": oid}


def marker(files: object, repo: str = REPO, commit: str = COMMIT) -> dict:
    return {"repo": repo, "commit": commit, "verified_at": "2026-12-01T00:00:00Z", "files": files}


def under(root: str, path: str) -> bool:
    return os.path.normpath(path).startswith(os.path.normpath(root) + os.sep)


# -- commit ids ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        COMMIT + "\n",  # `$` in the old pattern let a trailing newline through
        COMMIT.upper(),
        COMMIT[:-1],
        COMMIT + "0",
        "../../../../etc",
        "",
        None,
        40,
        [COMMIT],
    ],
)
def test_a_commit_id_that_is_not_40_lowercase_hex_is_refused(value, tmp_path):
    assert not ms.is_commit(value)
    with pytest.raises(ms.CommitError, match="is not a commit id"):
        ms.check_commit(value, "the Hub answered the commit")
    with pytest.raises(ms.CommitError):
        ms.snapshot_dir(str(tmp_path), REPO, value)


def test_a_good_commit_names_the_snapshot_directory(tmp_path):
    assert ms.snapshot_dir(str(tmp_path), REPO, COMMIT) == str(tmp_path / REPO / COMMIT)
    assert ms.partial_dir(str(tmp_path), REPO, COMMIT) == str(tmp_path / REPO / f"{COMMIT}.partial")


@pytest.mark.parametrize("name", ["tiny\n", "tiny/x", "../x", ""])
def test_a_model_name_with_a_trailing_newline_or_a_slash_is_refused(name):
    errors = ms.check_model({"name": name, "repo": REPO, "revision": "main"})
    assert any("name must match" in e for e in errors)


def test_a_repo_with_a_trailing_newline_is_refused():
    assert any("is not '<org>/<name>'" in e for e in ms.check_model({"name": "t", "repo": REPO + "\n"}))


# -- file lists ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("item", "why"),
    [
        (entry("../escape.txt"), "'..' segment"),
        (entry("a/../../escape.txt"), "'..' segment"),
        (entry("/etc/cron.d/x"), "is absolute"),
        (entry("a//b"), "empty segment"),
        (entry("a/"), "empty segment"),
        (entry(""), "is empty"),
        (entry("./a"), "'.' segment"),
        (entry("a\\..\\b"), "backslash"),
        (entry("a\nb"), "control character"),
        (entry(None), "not a string"),
        (entry(7), "not a string"),
        (entry(".cache/huggingface/x"), "reserved"),
        (entry(ms.MARKER), "reserved"),
        (entry(size=-1), "not a byte count"),
        (entry(size=True), "not a byte count"),
        (entry(size="12"), "not a byte count"),
        (entry(size=1.5), "not a byte count"),
        (entry(size=None), "not a byte count"),
        (entry(sha256="ABC"), "is not a sha256"),
        (entry(sha256=SHA.upper()), "is not a sha256"),
        (entry(oid=OID + "\n"), "is not a git blob id"),
        (entry(oid=["x"]), "is not a git blob id"),
        (entry(sha256="", oid=""), "neither a sha256 nor a git blob id"),
        ("config.json", "not an object"),
        (["config.json", 1], "not an object"),
    ],
)
def test_a_listing_entry_of_the_wrong_shape_is_a_listing_error(item, why):
    with pytest.raises(ms.ListingError, match="the file list") as err:
        ms.check_entries([item], "the file list of x@y")
    assert why in str(err.value)


@pytest.mark.parametrize(
    ("items", "why"),
    [
        ([entry("a"), entry("a")], "listed twice"),
        ([entry("a"), entry("a/b")], "both as a file and as a directory"),
        ([entry("a/b/c"), entry("a/b")], "both as a file and as a directory"),
        ({"a": 1}, "not a list"),
        ("a", "not a list"),
        (None, "not a list"),
    ],
)
def test_a_listing_of_the_wrong_shape_is_a_listing_error(items, why):
    with pytest.raises(ms.ListingError, match=why):
        ms.check_entries(items, "the file list")


def test_a_good_listing_comes_back_normalised():
    items = [entry("config.json"), {"path": "sub/model.safetensors", "size": 0, "sha256": SHA, "oid": None, "x": 1}]
    assert ms.check_entries(items, "l") == [
        entry("config.json"),
        {"path": "sub/model.safetensors", "size": 0, "sha256": SHA, "oid": ""},
    ]


def test_verify_never_reads_outside_the_snapshot(tmp_path):
    # the old code joined the name and read ../outside: a file there with the right digest "verified"
    snap = tmp_path / "snap"
    snap.mkdir()
    (tmp_path / "outside").write_bytes(b"x")
    assert ms.verify_file(str(snap), entry("../outside", oid=OID)) != ""
    (snap / "link").symlink_to(tmp_path / "outside")
    assert ms.verify_file(str(snap), entry("link", oid=OID)) == "not a regular file"
    (snap / "real").write_bytes(b"x")
    assert ms.verify_file(str(snap), entry("real", oid=OID)) == ""
    assert ms.verify_file(str(snap), entry("real", sha256=SHA, oid="")) == ""
    assert ms.verify_file(str(snap), entry("real", size=2)) == "size 1 != 2"


def test_space_needed_does_not_follow_a_link(tmp_path):
    (tmp_path / "outside").write_bytes(b"y" * 5)
    part = tmp_path / "part"
    part.mkdir()
    (part / "f").symlink_to(tmp_path / "outside")
    with pytest.raises(cp.PathError, match="leads out of"):
        ms.space_needed(str(part), [entry("f", size=5)])
    (part / "in").write_bytes(b"y" * 5)
    (part / "g").symlink_to(part / "in")
    assert ms.space_needed(str(part), [entry("g", size=5), entry("in", size=5), entry("new", size=3)]) == 8


# -- records on disk -----------------------------------------------------------------------------


def test_a_missing_record_is_the_default(tmp_path):
    assert ms.read_record(str(tmp_path), ".gpufleet/refs.json", "refs", {}) == {}


def test_a_fifo_where_a_record_should_be_is_refused_without_blocking(tmp_path):
    (tmp_path / ".gpufleet").mkdir()
    os.mkfifo(tmp_path / ".gpufleet" / "refs.json")
    with deadline(), pytest.raises(ms.RecordError, match="is a FIFO, not a regular file"):
        ms.read_record(str(tmp_path), ".gpufleet/refs.json", "refs", {})


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda p: p.mkdir(), "is a directory"),
        (lambda p: p.symlink_to("/etc/hostname"), "is a symlink"),
        (lambda p: p.write_bytes(b"\xff\xfe{}"), "is not UTF-8"),
        (lambda p: p.write_bytes(b"{"), "is not JSON"),
        (lambda p: p.write_bytes(b'{"a": NaN}'), "is not JSON"),
        (lambda p: p.write_bytes(b'{"a": 1' + b"0" * 5000 + b"}"), "is not JSON"),
        (lambda p: p.write_bytes(b"[" * 100_000 + b"]" * 100_000), "nested too deeply"),
    ],
)
def test_an_unusable_record_is_a_record_error(tmp_path, make, why):
    make(tmp_path / "rec.json")
    with deadline(), pytest.raises(ms.RecordError, match=why) as err:
        ms.read_record(str(tmp_path), "rec.json", "the record", None)
    assert "remove" in str(err.value)


def test_a_record_in_a_linked_directory_is_refused(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "refs.json").write_text("{}")
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / ".gpufleet").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ms.RecordError, match="symlink or not a directory"):
        ms.read_record(str(tmp_path / "store"), ".gpufleet/refs.json", "refs", {})


def test_a_huge_record_is_refused_before_it_is_parsed(tmp_path, monkeypatch):
    monkeypatch.setattr(ms, "MAX_RECORD_BYTES", 1000)
    (tmp_path / "rec.json").write_text(json.dumps(["x" * 2000]))
    with pytest.raises(ms.RecordError, match="larger than 1000 bytes"):
        ms.read_record(str(tmp_path), "rec.json", "the record", None)


@pytest.mark.parametrize(
    ("data", "why"),
    [
        ([], "not an object"),
        ("x", "not an object"),
        (None, "not an object"),
        ({"repo": REPO, "commit": COMMIT}, "has no 'files'"),
        ({"files": []}, "has no 'repo'"),
        (marker({"a": 1}), "not a list"),
        (marker([entry("../../etc/passwd")]), "'..' segment"),
        (marker([entry(size="1")]), "not a byte count"),
        (marker([], repo="other/repo"), "records 'other/repo'"),
        (marker([], commit="f" * 40), "not gpufleet-test/tiny-moe at"),
    ],
)
def test_a_snapshot_record_of_the_wrong_shape_is_a_record_error(data, why):
    with pytest.raises(ms.RecordError, match=why):
        ms.check_marker(data, "/store/x/.gpufleet-model.json", REPO, COMMIT)


def test_a_good_snapshot_record_gives_its_files():
    assert ms.check_marker(marker([entry()]), "w", REPO, COMMIT) == [entry()]


@pytest.mark.parametrize(
    ("data", "why"),
    [
        ([], "not an object of revision -> commit"),
        ({"hub gpufleet-test/tiny-moe@main": "../x"}, "is not a commit id"),
        ({"hub gpufleet-test/tiny-moe@main": None}, "is not a commit id"),
        ({"nonsense": COMMIT}, "is not '<endpoint or hub> <org>/<repo>@<revision>'"),
    ],
)
def test_refs_of_the_wrong_shape_are_a_record_error(data, why):
    with pytest.raises(ms.ModelStoreError, match=why):
        ms.check_refs(data, "/store/.gpufleet/refs.json")


def test_refs_recorded_with_credentials_are_dropped():
    data = {
        "https://user:hf_leaked_token_1@mirror.example gpufleet-test/tiny-moe@main": COMMIT,
        "https://mirror.example/?token=hf_leaked_token_2 gpufleet-test/tiny-moe@main": COMMIT,
        "https://mirror.example gpufleet-test/tiny-moe@main": COMMIT,
        "hub gpufleet-test/tiny-moe@v1.0": COMMIT,
    }
    refs, dropped = ms.check_refs(data, "refs.json")
    assert sorted(refs) == ["https://mirror.example gpufleet-test/tiny-moe@main", "hub gpufleet-test/tiny-moe@v1.0"]
    assert len(dropped) == 2
    assert "hf_leaked" not in json.dumps(refs)


# -- endpoints -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("https://user:hf_secret_token@mirror.example/hf", "user information"),
        ("https://hf_secret_token@mirror.example", "user information"),
        ("https://user:hf%5Fsecret%5Ftoken@mirror.example", "user information"),
        ("https://mirror.example/hf?token=hf_secret_token", "query string"),
        ("https://mirror.example/?a=1&access_token=hf_secret_token", "query string"),
        ("https://mirror.example/#hf_secret_token", "fragment"),
        ("https://mirror.example/user:hf_secret_token@x", "contains '@'"),
        ("https://mirror.example\\@hf_secret_token", "contains '@'"),
        ("https://mirror.example\\hf_secret_token", "not http(s)://host"),
        ("https://mirror.example/a;token=hf_secret_token", "not http(s)://host"),
        ("ftp://mirror.example", "not http(s)://host"),
        ("https://mirror.example:99999", "port outside"),
        ("mirror.example", "not http(s)://host"),
    ],
)
def test_an_endpoint_with_credentials_is_refused_without_showing_them(url, why):
    problem = ms.endpoint_problem(url)
    assert problem is not None
    assert why in problem
    assert "model_store_hf_token" in problem
    for form in secret_forms(["hf_secret_token", "hf%5Fsecret%5Ftoken"]):
        assert form not in problem
    errors = model_store_errors([{"name": "m", "repo": REPO, "revision": "main"}], url)
    assert len(errors) == 1
    assert "hf_secret_token" not in errors[0]
    assert "user" not in errors[0].replace("user information", "").replace("(user:password@)", "")


@pytest.mark.parametrize(
    "url",
    [
        "",
        "https://huggingface.co",
        "https://hf-mirror.com",
        "http://127.0.0.1:8080",
        "http://[::1]:8080/hf",
        "https://artifactory.example/artifactory/api/huggingfaceml/hf-remote",
    ],
)
def test_a_plain_endpoint_is_accepted(url):
    assert ms.endpoint_problem(url) is None
    assert ms.check_model({"name": "m", "repo": REPO, "revision": "main", "endpoint": url}) == []


def test_the_label_shows_the_host_only_when_there_is_no_at_sign():
    assert ms.endpoint_label("https://mirror.example:8443/hf?token=x") == "https://mirror.example:8443"
    assert ms.endpoint_label("https://user:pa/ss@mirror.example/") == "(not shown)"


def test_the_parts_of_a_refused_endpoint_are_its_secrets():
    found = ms.endpoint_secrets("https://bob:s3cr%40t@mirror.example/p?token=abc123&x=#frag")
    for piece in ("bob", "s3cr%40t", "s3cr@t", "bob:s3cr%40t", "abc123", "frag", "token=abc123&x="):
        assert piece in found


# -- local sources -------------------------------------------------------------------------------


def test_a_symlink_out_of_a_local_source_is_refused_not_followed(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_text("{}")
    (tmp_path / "secret").write_text("root's secret")
    (src / "tokenizer.json").symlink_to(tmp_path / "secret")
    with pytest.raises(ms.LocalSourceError, match=r"tokenizer\.json is a symlink .*never followed"):
        ms.list_local(str(src))
    with pytest.raises(ms.LocalSourceError, match="symlink"):
        ms.entries_of_local(str(src), ["tokenizer.json"])


@pytest.mark.parametrize("target", ["config.json", "sub", "sub/inner.json", "../src/config.json", "/etc"])
def test_every_symlink_in_a_local_source_is_refused(tmp_path, target):
    # the documented rule: a local source holds regular files and directories only
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "config.json").write_text("{}")
    (src / "sub" / "inner.json").write_text("{}")
    (src / "sub" / "link").symlink_to(target)
    with pytest.raises(ms.LocalSourceError, match="sub/link is a symlink"):
        ms.list_local(str(src))


def test_a_fifo_in_a_local_source_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "model.safetensors")
    with deadline(), pytest.raises(ms.LocalSourceError, match="is a FIFO"):
        ms.list_local(str(tmp_path))
    with deadline(), pytest.raises(ms.LocalSourceError, match="is a FIFO"):
        ms.entries_of_local(str(tmp_path), ["model.safetensors"])


def test_a_local_source_lists_its_regular_files_and_hashes_them(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "config.json").write_bytes(b"x")
    (tmp_path / "sub" / "b.bin").write_bytes(b"")
    (tmp_path / ".cache" / "huggingface").mkdir(parents=True)
    (tmp_path / ".cache" / "huggingface" / "x").write_text("skipped")
    (tmp_path / ms.MARKER).write_text("{}")
    assert ms.list_local(str(tmp_path)) == ["config.json", "sub/b.bin"]
    assert ms.entries_of_local(str(tmp_path), ["config.json"]) == [
        {"path": "config.json", "size": 1, "sha256": SHA, "oid": OID}
    ]


def test_a_local_source_record_naming_paths_outside_is_refused(tmp_path):
    data = marker([entry("../../../etc/shadow", size=1)])
    with pytest.raises(ms.RecordError, match=r"'\.\.' segment"):
        ms.check_marker(data, "the local source's record", REPO, COMMIT)


def test_a_local_file_that_grows_past_its_size_is_cut_and_removed(tmp_path):
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    (src / "model.safetensors").write_bytes(b"z" * 100)
    with pytest.raises(ms.DownloadTooLarge, match="went past the 10 bytes expected of it; reading stopped at byte 11"):
        ms.copy_regular(str(src), entry("model.safetensors", size=10), str(dest))
    assert list(dest.iterdir()) == []  # neither the file nor its temporary


def test_a_local_file_is_copied_whole(tmp_path):
    src, dest = tmp_path / "src", tmp_path / "dest"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "f").write_bytes(b"abc")
    ms.copy_regular(str(src), entry("sub/f", size=3), str(dest))
    assert (dest / "sub" / "f").read_bytes() == b"abc"
    assert sorted(p.name for p in (dest / "sub").iterdir()) == ["f"]


def test_a_local_copy_does_not_follow_a_link_in_the_source(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (tmp_path / "secret").write_bytes(b"s")
    (src / "f").symlink_to(tmp_path / "secret")
    with pytest.raises(ms.LocalSourceError, match="symlink"):
        ms.copy_regular(str(src), entry("f", size=1), str(tmp_path / "dest"))


# -- size caps -----------------------------------------------------------------------------------


def test_capped_passes_what_fits_and_stops_at_the_first_byte_past():
    assert list(ms.capped([b"ab", b"c"], 3, "f")) == [b"ab", b"c"]
    out = []
    with pytest.raises(ms.DownloadTooLarge, match="reading stopped at byte 4"):
        out.extend(ms.capped(iter([b"ab", b"cd", b"e" * 10**6]), 3, "model.safetensors"))
    assert out == [b"ab"]


def test_capped_raises_the_error_asked_for():
    with pytest.raises(ms.AnswerError):
        list(ms.capped([b"xx"], 1, "the answer", error=ms.AnswerError))


def test_capped_stops_an_endless_stream():
    def forever() -> Iterator[bytes]:
        while True:
            yield b"\0" * 65536

    with deadline(), pytest.raises(ms.DownloadTooLarge):
        for _chunk in ms.capped(forever(), 10**6, "f"):
            pass


@pytest.mark.parametrize(
    ("header", "start"), [("bytes=10485760-", 10485760), ("", 0), ("bytes=1-2", 0), ("bytes=-5", 0), (None, 0)]
)
def test_range_start(header, start):
    assert ms.range_start(header) == start


# -- properties ----------------------------------------------------------------------------------

NAME_TEXT = st.lists(
    st.sampled_from(
        ["a", "b", ".", "..", "", " ", "é", "\udcff", "a\\b", "x\x00", "c\n", ".cache", ms.MARKER, "x" * 256]
    ),
    min_size=1,
    max_size=5,
).map("/".join) | st.text(max_size=20)
JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
JSONS = st.recursive(
    JSON_SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
)
LISTING_ITEM = st.fixed_dictionaries(
    {"path": NAME_TEXT | JSON_SCALARS, "size": st.integers(-2, 2**70) | JSON_SCALARS},
    optional={
        "sha256": st.sampled_from([SHA, "", SHA.upper(), None]) | JSON_SCALARS,
        "oid": st.sampled_from([OID, "", None, OID[:-1]]) | JSON_SCALARS,
    },
)


@given(items=st.lists(LISTING_ITEM | JSONS, max_size=6))
def test_any_hub_listing_is_refused_by_name_or_stays_under_the_root(items):
    root = "/store/org/repo/" + COMMIT + ".partial"
    try:
        entries = ms.check_entries(items, "the file list")
    except ms.ListingError:
        return
    assert len(entries) == len(items)
    paths = [e["path"] for e in entries]
    assert len(set(paths)) == len(paths)
    for got, item in zip(entries, items, strict=True):
        assert got["path"] == item["path"]  # used as given, never rewritten
        assert under(root, os.path.join(root, got["path"]))
        assert os.path.normpath(os.path.join(root, got["path"])) == os.path.join(root, got["path"])
        assert got["path"].split("/", 1)[0] not in ms.RESERVED_TOP
        assert isinstance(got["size"], int)
        assert not isinstance(got["size"], bool)
        assert got["size"] >= 0
        assert got["sha256"] or got["oid"]


@given(value=st.text(alphabet="0123456789abcdefABCDEF\n./", max_size=42) | JSONS)
def test_any_commit_id_is_refused_by_name_or_names_a_directory_under_the_store(value):
    try:
        path = ms.snapshot_dir("/store", REPO, value)
    except ms.CommitError:
        assert not (isinstance(value, str) and len(value) == 40 and set(value) <= set("0123456789abcdef"))
        return
    assert path == f"/store/{REPO}/{value}"
    assert ms.is_commit(value)


@given(data=st.binary(max_size=200) | JSONS.map(lambda v: json.dumps(v).encode()))
def test_any_record_bytes_give_a_record_error_or_their_json(tmp_path, data):
    root = tempfile.mkdtemp(dir=tmp_path)
    Path(root, "rec.json").write_bytes(data)
    try:
        value = ms.read_record(root, "rec.json", "the record", None)
    except ms.RecordError:
        return
    assert value == json.loads(data.decode("utf-8"))


@given(data=JSONS | st.fixed_dictionaries({"repo": JSONS, "commit": JSONS, "files": st.lists(LISTING_ITEM | JSONS)}))
def test_any_snapshot_record_shape_gives_a_record_error_or_checked_files(data):
    try:
        files = ms.check_marker(data, "rec", REPO, COMMIT)
    except ms.RecordError:
        return
    assert data["repo"] == REPO
    assert data["commit"] == COMMIT
    assert files == ms.check_entries(data["files"], "rec")


@given(
    data=st.dictionaries(
        st.text(max_size=30) | st.sampled_from(["hub a/b@main", "https://u:p@h a/b@main", "http://h:1 a/b@v"]),
        JSONS | st.just(COMMIT),
        max_size=5,
    )
    | JSONS
)
def test_any_refs_shape_gives_a_record_error_or_commits(data):
    try:
        refs, dropped = ms.check_refs(data, "refs")
    except ms.RecordError:
        return
    assert all(ms.is_commit(v) for v in refs.values())
    assert set(refs) | set(dropped) == set(data)
    assert all("@" not in k.split(" ", 1)[0] for k in refs)


CREDENTIAL = st.text(alphabet="ABCDEFGHJKLMNPQRSTUVWXYZ0123456789_-~!$'()*+,;=:@/?#%&", min_size=8, max_size=24).map(
    lambda s: "Qz" + s  # a prefix no host or path below contains: a hit is the credential, not chance
)
ENCODINGS = st.sampled_from(
    [
        "https://{c}@mirror.example/hf",
        "https://user:{c}@mirror.example/hf",
        "https://user:{q}@mirror.example:8443/hf",
        "https://{q}@mirror.example",
        "https://mirror.example/hf?token={q}",
        "https://mirror.example/hf?a=1&access_token={q}",
        "https://mirror.example/?{q}",
        "https://mirror.example/#{q}",
        "https://mirror.example/hf#token={c}",
        "http://{qq}@127.0.0.1:8080",
        "https://mirror.example?token={c}",
    ]
)


@given(credential=CREDENTIAL, template=ENCODINGS)
def test_no_form_of_a_credential_in_an_endpoint_reaches_any_output(credential, template):
    url = template.format(c=credential, q=quote(credential, safe=""), qq=quote(quote(credential, safe=""), safe=""))
    problem = ms.endpoint_problem(url)
    assert problem is not None, url
    errors = ms.check_model({"name": "m", "repo": REPO, "revision": "main", "endpoint": url})
    filtered = model_store_errors([{"name": "m", "repo": REPO, "revision": "main"}], url)
    refs, dropped = ms.check_refs({ms.ref_key(url, REPO, "main"): COMMIT}, "refs")
    outputs = [problem, ms.endpoint_label(url), *errors, *filtered, json.dumps(refs)]
    for form in secret_forms([credential]):
        if len(form) >= 4:
            for text in outputs:
                assert form not in text, (url, form, text)
    assert refs == {}
    assert dropped
    secrets = ms.endpoint_secrets(url)
    encoded = quote(credential, safe="")
    assert any(form in s for s in secrets for form in (credential, encoded, quote(encoded, safe="")))


TREE = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "sub/c", "sub/d", "sub/deeper/e", "f.json"]),
        st.sampled_from(["file", "dir", "link-in", "link-out", "link-dir", "fifo", "dangling"]),
    ),
    max_size=6,
)


@given(tree=TREE)
def test_any_local_source_lists_only_regular_files_inside_it(tmp_path, tree):
    base = Path(tempfile.mkdtemp(dir=tmp_path))
    src = base / "src"
    src.mkdir()
    (base / "outside").write_text("secret")
    for rel, kind in tree:
        path = src / rel
        if os.path.lexists(path):
            continue
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            {
                "file": lambda p: p.write_text("x"),
                "dir": lambda p: p.mkdir(),
                "link-in": lambda p: p.symlink_to(src / "a"),
                "link-out": lambda p: p.symlink_to(base / "outside"),
                "link-dir": lambda p: p.symlink_to(base),
                "fifo": os.mkfifo,
                "dangling": lambda p: p.symlink_to(base / "nowhere"),
            }[kind](path)
    try:
        with deadline():
            paths = ms.list_local(str(src))
            entries = ms.entries_of_local(str(src), paths)
    except ms.LocalSourceError:
        return
    for e in entries:
        full = src / e["path"]
        assert full.is_file()
        assert not full.is_symlink()
        assert under(str(src), os.path.realpath(full))
        assert e["size"] == full.stat().st_size


@given(
    chunks=st.lists(st.binary(max_size=50), max_size=10),
    limit=st.integers(0, 300),
)
def test_capped_never_passes_more_than_its_limit(chunks, limit):
    out: list[bytes] = []
    try:
        out.extend(ms.capped(chunks, limit, "f"))
    except ms.DownloadTooLarge:
        assert sum(map(len, chunks)) > limit
        assert sum(map(len, out)) <= limit
        return
    assert out == chunks
    assert sum(map(len, chunks)) <= limit
