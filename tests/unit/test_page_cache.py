# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""page_cache and the model_page_cache module: the warm-up of a snapshot before a server loads it.

Named cases (the plan's order and cut, batches, a file that vanishes or shrinks mid-read, a symlink
in the snapshot or out of the store, check mode, a missing store as a no-op) and hypothesis
properties over /proc/meminfo text and hostile records: a named error or a correct result, never
another exception, never a byte read outside the snapshot.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from lib.module import run_module as run_module_at

from ansible_collections.gpufleet.sglang.plugins.module_utils.common import confined_path as cp
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang import model_store as ms
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang import page_cache as pc
from ansible_collections.gpufleet.sglang.plugins.modules import model_page_cache

REPO_ROOT = Path(__file__).resolve().parents[2]
MODULE = REPO_ROOT / "plugins" / "modules" / "model_page_cache.py"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
REPO = "gpufleet-test/tiny-moe"
SNAPSHOT = f"{REPO}/{COMMIT}"
MEMINFO = "MemTotal:       24576000 kB\nMemFree:         1000000 kB\nMemAvailable:   {} kB\nBuffers: 1 kB\n"


def entry(path: str, size: int) -> dict:
    return {"path": path, "size": size, "sha256": "", "oid": hashlib.sha1(path.encode()).hexdigest()}


def make_snapshot(store: Path, files: dict[str, bytes], *, record: object = None) -> Path:
    """A snapshot as the model store leaves it: the files and their record."""
    base = store / REPO / COMMIT
    base.mkdir(parents=True)
    for name, data in files.items():
        (base / name).parent.mkdir(parents=True, exist_ok=True)
        (base / name).write_bytes(data)
    if record is None:
        record = {"repo": REPO, "commit": COMMIT, "files": [entry(n, len(d)) for n, d in files.items()]}
    (base / ms.MARKER).write_text(json.dumps(record))
    return base


def run_module(args: dict, workdir: Path, check: bool = False) -> tuple[int, dict]:
    return run_module_at(MODULE, args, workdir, check=check)


# -- meminfo -------------------------------------------------------------------------------------


def test_mem_available_of_a_real_meminfo():
    assert pc.mem_available(MEMINFO.format(22000000)) == 22000000 * 1024


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("MemTotal: 1 kB\n", "no MemAvailable line"),
        ("MemAvailable: 1 kB\nMemAvailable: 2 kB\n", "2 MemAvailable lines"),
        ("MemAvailable: 1 MB\n", "is not 'MemAvailable: <n> kB'"),
        ("MemAvailable: -5 kB\n", "is not 'MemAvailable: <n> kB'"),
        ("MemAvailable:\n", "is not 'MemAvailable: <n> kB'"),
        (b"MemAvailable: 1 kB", "not text"),
    ],
)
def test_odd_meminfo_is_named(text, why):
    with pytest.raises(pc.MeminfoError, match=why):
        pc.mem_available(text)


@given(st.text(max_size=300))
def test_any_meminfo_text_gives_bytes_or_a_named_error(text):
    try:
        value = pc.mem_available(text)
    except pc.MeminfoError:
        return
    assert isinstance(value, int)
    assert value >= 0
    assert value % 1024 == 0


@given(st.integers(min_value=0, max_value=2**64), st.text(alphabet=" \t0123456789kBM-", max_size=12))
def test_meminfo_lines_around_a_number(number, tail):
    text = f"MemFree: 3 kB\nMemAvailable: {number}{tail}\n"
    try:
        value = pc.mem_available(text)
    except pc.MeminfoError:
        return
    assert value == number * 1024


def test_budget_keeps_the_reserve_and_never_goes_negative():
    assert pc.budget(10, 3) == 7
    assert pc.budget(3, 10) == 0
    with pytest.raises(pc.PageCacheError, match="reserve_bytes"):
        pc.budget(10, -1)


# -- the plan ------------------------------------------------------------------------------------


def test_loader_order_puts_small_files_first_then_the_weights_by_name():
    entries = [
        entry("model-00002-of-00002.safetensors", 100),
        entry("config.json", 1),
        entry("model-00001-of-00002.safetensors", 100),
        entry("tokenizer.json", 5),
        entry("model.safetensors.index.json", 2),
    ]
    assert [e["path"] for e in pc.loader_order(entries)] == [
        "config.json",
        "model.safetensors.index.json",
        "tokenizer.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ]


def test_plan_reads_up_to_the_budget_and_skips_the_rest():
    entries = [entry("config.json", 10), entry("a.safetensors", 100), entry("b.safetensors", 100)]
    cut = pc.plan(entries, 150)
    assert cut.pieces == (
        pc.Piece("config.json", 0, 10),
        pc.Piece("a.safetensors", 0, 100),
        pc.Piece("b.safetensors", 0, 40),
    )
    assert (cut.total_bytes, cut.planned_bytes, cut.skipped_bytes, cut.files, cut.skipped_files) == (210, 150, 60, 3, 0)
    nothing = pc.plan(entries, 0)
    assert nothing.pieces == ()
    assert nothing.skipped_bytes == 210
    assert nothing.skipped_files == 3


sizes = st.lists(st.integers(min_value=0, max_value=5000), max_size=12)


@given(sizes, st.integers(min_value=-10, max_value=40000), st.integers(min_value=1, max_value=3000))
def test_plan_and_batches_cover_exactly_the_budget(file_sizes, limit, batch_bytes):
    entries = [entry(f"f{i:02d}.safetensors", size) for i, size in enumerate(file_sizes)]
    cut = pc.plan(entries, limit)
    assert cut.planned_bytes == min(max(limit, 0), sum(file_sizes))
    assert cut.planned_bytes + cut.skipped_bytes == cut.total_bytes == sum(file_sizes)
    all_batches = pc.batches(cut.pieces, batch_bytes)
    assert all(sum(p.length for p in batch) <= batch_bytes for batch in all_batches)
    # the batches read each planned byte once, in order
    flat = [piece for batch in all_batches for piece in batch]
    covered: dict[str, int] = {}
    for piece in flat:
        assert piece.offset == covered.get(piece.path, 0)
        covered[piece.path] = piece.offset + piece.length
    assert sum(covered.values()) == cut.planned_bytes
    summary = pc.batch_summary(all_batches)
    assert (summary[-1]["end_bytes"] if summary else 0) == cut.planned_bytes


def test_batches_refuse_a_batch_size_that_is_not_positive():
    with pytest.raises(pc.PageCacheError, match="batch_bytes"):
        pc.batches([], 0)


# -- snapshot names and records ------------------------------------------------------------------


@pytest.mark.parametrize(
    "snapshot",
    [
        f"../{REPO}/{COMMIT}",
        f"/{REPO}/{COMMIT}",
        f"{REPO}/{COMMIT[:-1]}",
        f"{REPO}/{COMMIT.upper()}",
        REPO,
        f"{REPO}/{COMMIT}/config.json",
        f"{REPO}//{COMMIT}",
        "",
        None,
    ],
)
def test_a_snapshot_that_is_not_org_repo_commit_is_named(snapshot):
    with pytest.raises(pc.ManifestError, match="snapshot"):
        pc.snapshot_parts(snapshot)


@given(st.text(max_size=120))
def test_any_snapshot_name_is_parts_or_a_named_error(snapshot):
    try:
        repo, commit = pc.snapshot_parts(snapshot)
    except pc.ManifestError:
        return
    assert f"{repo}/{commit}" == snapshot
    assert ms.is_commit(commit)


def test_a_snapshot_directory_linked_out_of_the_store_is_refused(tmp_path):
    store = tmp_path / "store"
    outside = tmp_path / "outside" / COMMIT
    outside.mkdir(parents=True)
    (store / REPO).mkdir(parents=True)
    (store / REPO / COMMIT).symlink_to(outside)
    with pytest.raises(pc.ManifestError, match="symlink"):
        pc.snapshot_path(str(store), SNAPSHOT)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
hostile_paths = st.sampled_from(
    ["../outside.bin", "/etc/passwd", "a//b", "./x", "a/../../x", "x\x00y", "..", "ok.safetensors", "sub/ok.bin"]
)


@given(
    st.lists(
        st.fixed_dictionaries(
            {"path": hostile_paths | st.text(max_size=20), "size": st.integers(-2, 50) | json_values}
        ),
        max_size=5,
    )
    | json_values
)
def test_a_hostile_record_is_named_and_nothing_outside_is_read(tmp_path_factory, files):
    store = tmp_path_factory.mktemp("store")
    (store.parent / "outside.bin").write_bytes(b"secret")
    record = {"repo": REPO, "commit": COMMIT, "files": files} if isinstance(files, list) else files
    base = make_snapshot(store, {"ok.safetensors": b"w" * 50, "sub/ok.bin": b"b" * 50}, record=record)
    try:
        entries = pc.manifest(str(base), SNAPSHOT)
    except pc.ManifestError:
        return
    assert entries is not None
    for item in entries:
        assert cp.inside(str(base), os.path.join(str(base), item["path"]))
    cut = pc.plan(entries, 10**6)
    result = pc.read_pieces(str(base), list(cut.pieces))
    # a listed file that is not there is a problem, never a read of something else
    assert result["bytes_read"] <= 100
    assert set(result["problems"]) <= {e["path"] for e in entries}


@pytest.mark.parametrize(
    ("record", "why"),
    [
        ([], "not an object"),
        ({"repo": REPO, "commit": COMMIT}, "no 'files'"),
        ({"repo": "other/repo", "commit": COMMIT, "files": []}, "not gpufleet-test/tiny-moe"),
        ({"repo": REPO, "commit": COMMIT, "files": [entry("../x", 1)]}, "'..' segment"),
        ({"repo": REPO, "commit": COMMIT, "files": [{"path": "a", "size": -1, "oid": COMMIT}]}, "not a byte count"),
    ],
)
def test_a_record_of_the_wrong_shape_is_named(tmp_path, record, why):
    base = make_snapshot(tmp_path / "store", {}, record=record)
    with pytest.raises(pc.ManifestError, match=why):
        pc.manifest(str(base), SNAPSHOT)


# -- the reader ----------------------------------------------------------------------------------


def test_the_reader_reads_every_planned_byte(tmp_path):
    files = {"config.json": b"{}", "a.safetensors": os.urandom(3 * 1024 + 7), "sub/b.safetensors": b"x" * 5000}
    base = make_snapshot(tmp_path / "store", files)
    cut = pc.plan(pc.manifest(str(base), SNAPSHOT), 10**9)
    result = pc.read_pieces(str(base), list(cut.pieces), chunk=1024)
    assert result["bytes_read"] == sum(len(d) for d in files.values())
    assert result["problems"] == {}


def test_a_file_that_vanishes_or_shrinks_is_reported_not_raised(tmp_path):
    base = make_snapshot(tmp_path / "store", {"a.safetensors": b"a" * 4096, "b.safetensors": b"b" * 4096})
    cut = pc.plan(pc.manifest(str(base), SNAPSHOT), 10**9)
    (base / "a.safetensors").unlink()
    (base / "b.safetensors").write_bytes(b"b" * 1000)
    result = pc.read_pieces(str(base), list(cut.pieces), chunk=512)
    assert result["bytes_read"] == 1000
    assert result["problems"] == {
        "a.safetensors": "vanished (no such file)",
        "b.safetensors": "shrank to 1000 bytes while it was read",
    }


def test_a_symlink_in_the_snapshot_is_refused_never_followed(tmp_path):
    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"s" * 100)
    base = make_snapshot(tmp_path / "store", {"a.safetensors": b"a" * 100})
    (base / "a.safetensors").unlink()
    (base / "a.safetensors").symlink_to(secret)
    cut = pc.plan(pc.manifest(str(base), SNAPSHOT), 10**9)
    with pytest.raises(cp.PathError, match="symlink"):
        pc.read_pieces(str(base), list(cut.pieces))


def test_a_fifo_in_the_snapshot_is_refused_without_blocking(tmp_path):
    base = make_snapshot(tmp_path / "store", {"a.safetensors": b"a" * 100})
    (base / "a.safetensors").unlink()
    os.mkfifo(base / "a.safetensors")
    cut = pc.plan(pc.manifest(str(base), SNAPSHOT), 10**9)
    with pytest.raises(cp.PathError, match="FIFO"):
        pc.read_pieces(str(base), list(cut.pieces))


# -- the module ----------------------------------------------------------------------------------


def module_args(tmp_path: Path, available_kb: int = 1000, **more: object) -> dict:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(MEMINFO.format(available_kb))
    return {
        "store": str(tmp_path / "store"),
        "snapshot": SNAPSHOT,
        "meminfo": str(meminfo),
        "reserve_bytes": 0,
        "batch_bytes": 1 << 30,
        **more,
    }


def test_module_reads_up_to_mem_available_less_the_reserve(tmp_path):
    make_snapshot(
        tmp_path / "store", {"config.json": b"{}", "a.safetensors": b"a" * 600_000, "b.safetensors": b"b" * 600_000}
    )
    rc, out = run_module(module_args(tmp_path, available_kb=1000, reserve_bytes=24_000), tmp_path)
    assert rc == 0, out
    assert out["changed"] is False
    assert out["not_warmed"] == ""
    assert out["mem_available_bytes"] == 1_024_000
    assert out["budget_bytes"] == 1_000_000
    assert (out["bytes_read"], out["planned_bytes"], out["skipped_bytes"]) == (1_000_000, 1_000_000, 200_002)
    assert out["files"] == 3
    assert out["problems"] == {}
    assert out["mb_per_s"] >= 0


def test_module_in_check_mode_returns_the_plan_and_reads_nothing(tmp_path):
    make_snapshot(tmp_path / "store", {"a.safetensors": b"a" * 3000, "b.safetensors": b"b" * 3000})
    rc, out = run_module(module_args(tmp_path, batch_bytes=2500), tmp_path, check=True)
    assert rc == 0, out
    assert out["bytes_read"] == 0
    assert out["planned_bytes"] == 6000
    assert [b["end_bytes"] for b in out["batches"]] == [2500, 5000, 6000]


def test_module_reads_one_batch_of_a_fixed_budget(tmp_path):
    make_snapshot(tmp_path / "store", {"a.safetensors": b"a" * 3000, "b.safetensors": b"b" * 3000})
    args = module_args(tmp_path, budget_bytes=5000, batch_bytes=2000, batch=2)
    rc, out = run_module(args, tmp_path)
    assert rc == 0, out
    assert out["mem_available_bytes"] is None
    assert out["skipped_bytes"] == 1000
    assert out["bytes_read"] == 1000
    assert out["files"] == 1
    rc, out = run_module({**args, "batch": 3}, tmp_path)
    assert rc == 1
    assert "batch 3 is not one of the plan's 3 batch(es)" in out["msg"]


@pytest.mark.parametrize(
    ("setup", "why"),
    [
        (lambda store: None, "no model store at"),
        (lambda store: store.mkdir(), "no snapshot gpufleet-test/tiny-moe/"),
        (lambda store: (store / REPO / COMMIT).mkdir(parents=True), "has no record"),
    ],
)
def test_module_is_a_no_op_without_store_snapshot_or_record(tmp_path, setup, why):
    setup(tmp_path / "store")
    rc, out = run_module(module_args(tmp_path), tmp_path)
    assert rc == 0, out
    assert why in out["not_warmed"]
    assert out["bytes_read"] == 0
    assert out["changed"] is False


def test_module_names_a_symlink_in_the_snapshot(tmp_path):
    base = make_snapshot(tmp_path / "store", {"a.safetensors": b"a" * 10})
    (base / "a.safetensors").unlink()
    (base / "a.safetensors").symlink_to("/etc/hostname")
    rc, out = run_module(module_args(tmp_path), tmp_path)
    assert rc == 1
    assert out["error"] == "PathError"
    assert "refused" in out["msg"]


def test_module_names_odd_meminfo(tmp_path):
    make_snapshot(tmp_path / "store", {"a.safetensors": b"a" * 10})
    args = module_args(tmp_path)
    Path(args["meminfo"]).write_text("MemAvailable: lots\n")
    rc, out = run_module(args, tmp_path)
    assert rc == 1
    assert out["error"] == "MeminfoError"
    assert "MemAvailable" in out["msg"]


def test_several_threads_read_the_same_bytes_and_report_the_same_problems(tmp_path):
    files = {f"m{i}.safetensors": bytes([i]) * (1000 + i) for i in range(6)}
    base = make_snapshot(tmp_path / "store", files)
    pieces = list(pc.plan(pc.manifest(str(base), SNAPSHOT), 10**9).pieces)
    (base / "m3.safetensors").unlink()
    one = pc.read_pieces(str(base), pieces, chunk=256)
    four = pc.read_pieces(str(base), pieces, chunk=256, threads=4)
    assert one["bytes_read"] == four["bytes_read"] == sum(len(d) for d in files.values()) - 1003
    assert one["problems"] == four["problems"] == {"m3.safetensors": "vanished (no such file)"}


@pytest.mark.parametrize("threads", [0, 65, True, "4"])
def test_a_thread_count_out_of_range_is_named(threads):
    with pytest.raises(pc.PageCacheError, match="threads"):
        pc.check_threads(threads)


def test_module_documentation_is_yaml_with_every_option_and_return():
    doc = yaml.safe_load(model_page_cache.DOCUMENTATION)
    returned = yaml.safe_load(model_page_cache.RETURN)
    assert yaml.safe_load(model_page_cache.EXAMPLES)
    assert set(doc["options"]) == {
        "store",
        "snapshot",
        "reserve_bytes",
        "budget_bytes",
        "batch_bytes",
        "batch",
        "threads",
        "meminfo",
    }
    assert set(returned) == set(model_page_cache.nothing("")) - {"changed"}


# -- an attacker's review (each passed against the code as it was: recorded as what was tried) -----


def test_a_hugging_face_style_link_into_the_stores_blobs_is_refused_too(tmp_path):
    """A link that stays inside the store (a Hub cache's snapshots/<commit>/x -> ../../blobs/<oid>) is
    refused like one out of it: the store holds regular files only (docs/model-store.md)."""
    store = tmp_path / "store"
    base = make_snapshot(store, {"a.safetensors": b"a" * 100})
    blobs = store / REPO / "blobs"
    blobs.mkdir()
    (blobs / "oid").write_bytes(b"a" * 100)
    (base / "a.safetensors").unlink()
    (base / "a.safetensors").symlink_to("../blobs/oid")
    cut = pc.plan(pc.manifest(str(base), SNAPSHOT), 10**9)
    with pytest.raises(cp.PathError, match=r"'a\.safetensors' is a symlink"):
        pc.read_pieces(str(base), list(cut.pieces))


def test_a_directory_of_the_snapshot_swapped_for_a_link_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "b.safetensors").write_bytes(b"s" * 100)
    base = make_snapshot(tmp_path / "store", {"sub/b.safetensors": b"b" * 100})
    cut = pc.plan(pc.manifest(str(base), SNAPSHOT), 10**9)
    (base / "sub" / "b.safetensors").unlink()
    (base / "sub").rmdir()
    (base / "sub").symlink_to(outside)
    with pytest.raises(cp.PathError, match="sub is a symlink"):
        pc.read_pieces(str(base), list(cut.pieces))


def test_a_file_that_grows_while_read_is_read_up_to_its_recorded_size(tmp_path):
    base = make_snapshot(tmp_path / "store", {"a.safetensors": b"a" * 4096})
    cut = pc.plan(pc.manifest(str(base), SNAPSHOT), 10**9)
    with open(base / "a.safetensors", "ab") as handle:
        handle.write(b"more" * 4096)
    result = pc.read_pieces(str(base), list(cut.pieces), chunk=512)
    assert (result["bytes_read"], result["problems"]) == (4096, {})


@pytest.mark.parametrize(
    "line",
    [
        "MemAvailable: 1e9 kB",
        "MemAvailable: -5 kB",
        "MemAvailable: 0x10 kB",
        "MemAvailable: 5 MB",
        "MemAvailable: \u0661\u0662 kB",  # Arabic-Indic digits: str.isdigit() is true, [0-9] is not
    ],
)
def test_meminfo_numbers_that_are_not_decimal_kb_are_named(line):
    with pytest.raises(pc.MeminfoError, match="MemAvailable"):
        pc.mem_available(MEMINFO.replace("MemAvailable:   {} kB", line))
