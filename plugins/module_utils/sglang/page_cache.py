# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read a snapshot of the model store into the host's page cache (stdlib only; runs on the Proxmox host).

LXC containers share their host's kernel, so a file the host has read is in the page cache of every
container that bind-mounts the store: reading the next revision's files on the host while the old
server still serves turns the new server's checkpoint load into a read from memory
(docs/model-store.md, "Warming the page cache").

The plan (pure):

- ``mem_available`` reads ``MemAvailable`` from ``/proc/meminfo`` text (the kernel's estimate of the
  memory that can be used without swapping, page cache that can be dropped included);
  ``budget`` keeps a reserve free of it. Text without exactly one well-formed ``MemAvailable:`` line
  in kB is a ``MeminfoError``.
- ``loader_order`` puts a snapshot's files in the order the server reads them: the small files first
  (config, tokenizer, the weights' index: read before any weight), then the weight files sorted by
  name (SGLang's loader and its own prefetch sort the shard list). With a budget smaller than the
  snapshot, the files the server reads first are the ones in memory, and a warm file is read by the
  loader before the part of it that did not fit could push it out of the cache.
- ``plan`` cuts that order at the budget: every file in full until the budget runs out, the first
  bytes of the next one, nothing of the rest (``skipped_bytes``); ``batches`` splits the pieces into
  batches of at most ``batch_bytes`` (a file may span batches), one Ansible task per batch showing the
  progress of a long read.

The reader: ``read_piece`` opens a file of the snapshot with ``confined_path.open_regular`` (nothing
below the snapshot directory is followed: a symlink, a FIFO or a device is a ``PathError``, never
opened for reading), asks the kernel for a larger read-ahead (``posix_fadvise`` ``SEQUENTIAL``),
then reads the range in chunks into one reused buffer, so that every page is in the cache when it
returns and the rate is measured; ``read_pieces`` reads several files at once (a disk with a deep
queue, NVMe or a RAID, reads faster with several requests in flight: measured in docs/model-store.md).
A file that is missing, shorter than planned (removed or truncated while it is read) or unreadable
(an I/O error) is reported in the piece's result, never raised; a symlink or special file is a
``PathError`` (the snapshot was tampered with).

Where the snapshot is: ``snapshot_parts`` takes ``<org>/<repo>/<commit>`` (the path the server loads,
relative to the store) through ``confined_path.relative_name`` and the store's own patterns;
``manifest`` reads the snapshot's record (``.gpufleet-model.json``, written by the model store once
every file was verified) with ``model_store.read_record`` and ``check_marker``: a record of the wrong
shape is a ``ManifestError`` naming the file; the snapshot directory is confined to the store
(``confined_path.confine``: a link out of the store is refused).
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpufleet.sglang.plugins.module_utils.common import confined_path as cp
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang import model_store as ms

CHUNK = 8 * 1024 * 1024
# the weight files a checkpoint loader reads, by suffix (safetensors shards, PyTorch bins, GGUF)
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
MEMINFO_LINE_RE = re.compile(r"MemAvailable:[ \t]*([0-9]{1,20})[ \t]+kB[ \t]*")
MAX_MEMINFO_BYTES = 1 << 20
MAX_THREADS = 64


class PageCacheError(Exception):
    """A named failure of the page-cache warm-up."""


class MeminfoError(PageCacheError):
    """/proc/meminfo text without one well-formed MemAvailable line."""


class ManifestError(PageCacheError):
    """A snapshot name or record that cannot be used."""


# -- the plan ------------------------------------------------------------------------------------


def mem_available(text: object) -> int:
    """Bytes of ``MemAvailable`` in ``/proc/meminfo`` text; ``MeminfoError`` unless exactly one line
    ``MemAvailable: <n> kB`` is there."""
    if not isinstance(text, str):
        raise MeminfoError(f"/proc/meminfo is a {type(text).__name__}, not text")
    lines = [line for line in text.splitlines() if line.startswith("MemAvailable")]
    if not lines:
        raise MeminfoError(
            "/proc/meminfo has no MemAvailable line (Linux >= 3.14 has one): give budget_bytes to warm up without it"
        )
    if len(lines) > 1:
        raise MeminfoError(f"/proc/meminfo has {len(lines)} MemAvailable lines, not one")
    match = MEMINFO_LINE_RE.fullmatch(lines[0])
    if not match:
        raise MeminfoError(f"/proc/meminfo line {ms.shown(lines[0])} is not 'MemAvailable: <n> kB'")
    return int(match.group(1)) * 1024


def budget(available: int, reserve: int) -> int:
    """Bytes the warm-up may read: ``available`` less ``reserve``, never below 0."""
    if isinstance(reserve, bool) or not isinstance(reserve, int) or reserve < 0:
        raise PageCacheError(f"reserve_bytes {ms.shown(reserve)} is not a byte count (an integer >= 0)")
    return max(0, available - reserve)


def is_weight(path: str) -> bool:
    return path.endswith(WEIGHT_SUFFIXES)


def loader_order(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The files in the order the server reads them: small files first, then the weights by name."""
    return sorted(entries, key=lambda entry: (is_weight(entry["path"]), entry["path"]))


@dataclass(frozen=True)
class Piece:
    """``length`` bytes of ``path`` from ``offset``."""

    path: str
    offset: int
    length: int


@dataclass(frozen=True)
class Plan:
    pieces: tuple[Piece, ...]
    total_bytes: int
    planned_bytes: int
    skipped_bytes: int
    files: int  # files with at least one planned byte (an empty file counts: it is opened)
    skipped_files: int  # files of which nothing is read


def plan(entries: list[dict[str, Any]], limit: int) -> Plan:
    """The pieces to read: ``entries`` (checked file entries) in loader order, cut at ``limit`` bytes."""
    left = max(0, limit)
    pieces = []
    total = 0
    for entry in loader_order(entries):
        size = entry["size"]
        total += size
        take = min(size, left)
        if take > 0 or size == 0:
            pieces.append(Piece(entry["path"], 0, take))
            left -= take
    planned = sum(piece.length for piece in pieces)
    return Plan(tuple(pieces), total, planned, total - planned, len(pieces), len(entries) - len(pieces))


def batches(pieces: tuple[Piece, ...] | list[Piece], batch_bytes: int) -> list[list[Piece]]:
    """``pieces`` split into batches of at most ``batch_bytes`` (a piece may be cut across batches;
    an empty file goes with the batch it falls in)."""
    if isinstance(batch_bytes, bool) or not isinstance(batch_bytes, int) or batch_bytes < 1:
        raise PageCacheError(f"batch_bytes {ms.shown(batch_bytes)} is not a positive byte count")
    out: list[list[Piece]] = [[]]
    room = batch_bytes
    for piece in pieces:
        offset, length = piece.offset, piece.length
        while length > room:
            if room:
                out[-1].append(Piece(piece.path, offset, room))
                offset, length = offset + room, length - room
            out.append([])
            room = batch_bytes
        out[-1].append(Piece(piece.path, offset, length))
        room -= length
    return [batch for batch in out if batch]


def batch_summary(all_batches: list[list[Piece]]) -> list[dict[str, int]]:
    """Per batch: its files, its bytes and the bytes planned up to its end (for progress labels)."""
    done = 0
    out = []
    for batch in all_batches:
        size = sum(piece.length for piece in batch)
        done += size
        out.append({"files": len({piece.path for piece in batch}), "bytes": size, "end_bytes": done})
    return out


# -- where the snapshot is -----------------------------------------------------------------------


def snapshot_parts(snapshot: object) -> tuple[str, str]:
    """(repo, commit) of ``<org>/<repo>/<commit>``; ``ManifestError`` for anything else."""
    try:
        name = cp.relative_name(snapshot, "snapshot")
    except cp.PathError as exc:
        raise ManifestError(f"{exc} (the snapshot is <org>/<repo>/<commit> under the store)") from exc
    parts = name.split("/")
    repo = "/".join(parts[:2])
    if len(parts) != 3 or not ms.REPO_RE.fullmatch(repo) or not ms.is_commit(parts[2]):
        raise ManifestError(
            f"snapshot {ms.shown(snapshot)} is not <org>/<repo>/<commit> (a commit of 40 lowercase hex digits)"
        )
    return repo, parts[2]


def snapshot_path(store: str, snapshot: str) -> str:
    """The snapshot directory, confined to the store (``ManifestError`` for a link out of it)."""
    repo, commit = snapshot_parts(snapshot)
    try:
        return ms.snapshot_dir(store, repo, commit)
    except (cp.PathError, ms.ModelStoreError) as exc:
        raise ManifestError(str(exc)) from exc


def manifest(base: str, snapshot: str) -> list[dict[str, Any]] | None:
    """The checked file entries of the snapshot's record, or None when the snapshot has none."""
    repo, commit = snapshot_parts(snapshot)
    where = os.path.join(base, ms.MARKER)
    try:
        data = ms.read_record(base, ms.MARKER, "snapshot record", None)
        if data is None:
            return None
        return ms.check_marker(data, where, repo, commit)
    except ms.ModelStoreError as exc:
        raise ManifestError(f"{exc}; the model store writes it again on its next run (role model_store)") from exc


# -- the reader ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PieceRead:
    path: str
    read_bytes: int
    problem: str  # '' when the whole piece was read


def _advise(fd: int, offset: int, length: int) -> None:
    advise = getattr(os, "posix_fadvise", None)
    if advise is None or length == 0:
        return
    # SEQUENTIAL doubles the kernel's read-ahead window. WILLNEED over the whole range was measured
    # slower with several files read at once (docs/model-store.md, "Measured"): the threads keep the
    # disk's queue full instead.
    advise(fd, offset, length, os.POSIX_FADV_SEQUENTIAL)


def read_piece(base: str, piece: Piece, buffer: bytearray) -> PieceRead:
    """Read ``piece`` of the file under ``base`` into the page cache (see the module's text)."""
    try:
        fd = cp.open_regular(base, piece.path, "snapshot file")
    except FileNotFoundError:
        return PieceRead(piece.path, 0, "vanished (no such file)")
    except cp.PathError:
        raise
    except OSError as exc:
        return PieceRead(piece.path, 0, f"cannot be opened ({exc.strerror})")
    done = 0
    try:
        _advise(fd, piece.offset, piece.length)
        view = memoryview(buffer)
        while done < piece.length:
            want = min(len(view), piece.length - done)
            got = os.preadv(fd, [view[:want]], piece.offset + done)
            if got == 0:
                size = os.fstat(fd).st_size
                return PieceRead(piece.path, done, f"shrank to {size} bytes while it was read")
            done += got
        return PieceRead(piece.path, done, "")
    except OSError as exc:
        return PieceRead(piece.path, done, f"unreadable after {done} bytes ({exc.strerror})")
    finally:
        os.close(fd)


def check_threads(threads: object) -> int:
    """``threads`` when it is a count from 1 to MAX_THREADS, else ``PageCacheError``."""
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= MAX_THREADS:
        raise PageCacheError(f"threads {ms.shown(threads)} is not a count from 1 to {MAX_THREADS}")
    return threads


def read_pieces(base: str, pieces: list[Piece], chunk: int = CHUNK, threads: int = 1) -> dict[str, Any]:
    """Read every piece, ``threads`` at once (in plan order, each thread with its own buffer); bytes
    read, seconds, MB/s (MiB per second) and the problems by file. A ``PathError`` of any piece is
    raised once the pieces under way are done."""
    check_threads(threads)
    local = threading.local()

    def one(piece: Piece) -> PieceRead:
        if not hasattr(local, "buffer"):
            local.buffer = bytearray(chunk)
        return read_piece(base, piece, local.buffer)

    began = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as pool:
        results = list(pool.map(one, pieces))
    done = sum(result.read_bytes for result in results)
    problems = {result.path: result.problem for result in results if result.problem}
    seconds = time.monotonic() - began
    return {"bytes_read": done, "seconds": round(seconds, 3), "mb_per_s": rate(done, seconds), "problems": problems}


def rate(done: int, seconds: float) -> float:
    """MiB per second, 0 for no time."""
    return round(done / 1048576 / seconds, 1) if seconds > 0 else 0.0
