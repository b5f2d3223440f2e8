# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Warm-start caches carried between nodes (stdlib only; runs on the nodes).

A node that became ready has compiled and tuned kernels under its cache directory (SGLang's
``SGLANG_CACHE_DIR``: FlashInfer's JIT workspace and autotune tactics, Triton's and torch
inductor's caches; docs/warm-start.md lists them per release). This module turns that directory
into an artifact another node can start from, and back:

``cache_key`` checks the fields that make a cache valid (``KEY_FIELDS``) and returns them with
their digest (sha256 of their canonical JSON). A missing, extra or odd field is a ``KeyFieldError``
naming it: never a key. ``cache_dir`` and ``release_dir`` are part of the key because Triton's
group files and inductor's tuned configs name files by absolute path (a copy at another path
misses), so a cache only ports to nodes with the same paths.

``pack`` writes a deterministic tar of the directory (sorted names, mtime 0, owner 0, modes
0644/0755, regular files only: symlinks, devices, FIFOs and sockets are left out and listed,
hard links are stored as plain copies, except a hard link to a file of another user than the
cache directory's owner, which is left out and listed) with a manifest first (``MANIFEST``: key,
then each file's relative path, size, mode and sha256). Every file is read through
``confined_path.open_regular`` (nothing below the directory followed) and the bytes packed are
checked against the sha256 the scan recorded. A directory over ``max_bytes`` or ``max_files`` is
refused before anything is written. The artifact is written to a temporary file beside its
destination, fsynced and renamed into place, so the store never holds half an artifact. Its
name is the sha256 of its bytes (``artifact_path``): the store is content-addressed.

``find_artifact`` takes only a regular file named ``<sha256>.tar`` (``lstat``: a planted
directory, symlink, FIFO or device is passed over) in the key's directory, which ``key_dir``
confines to the store (``confined_path.confine``). ``verify`` opens the artifact once (without
following a link, without blocking) and checks its digest, then its manifest and that every member
is a regular file named in the manifest exactly once, with a plain relative name of at most
``MAX_NAME_BYTES`` (two names equal once NFC-normalised count as one; a name both a file and a
directory is refused), the manifest's size and sha256; the members' total and count are bounded.
``restore`` verifies, checks the key against the expected one, extracts every member (through
``confined_path.confine``) into a temporary directory beside the target, then swaps it into place
(the old directory is renamed aside, the new one renamed in, the old one removed; an error or an
interrupt between the renames puts the old one back). A wrong key, a wrong digest or a hostile
member restores nothing, leaves the old directory as it was and raises a ``WarmCacheError`` saying
why. ``check_apart`` refuses a store and a cache directory that overlap.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import stat
import tarfile
import tempfile
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpufleet.sglang.plugins.module_utils.common.atomic_file import fsync_dir
from ansible_collections.gpufleet.sglang.plugins.module_utils.common.confined_path import (
    PathError,
    confine,
    inside,
    kind_of,
    open_regular,
    relative_name,
)

FORMAT = 1
# The first member of every artifact; restored beside the files as MARKER.
MANIFEST = "warm-cache.json"
# The restored manifest in the target directory: which artifact the directory came from.
MARKER = ".gpufleet-warm-cache.json"
MEMBER_PREFIX = "files/"
ARTIFACT_SUFFIX = ".tar"
# Bounds: a cache larger than this is refused (the canary's caches are hundreds of MB).
DEFAULT_MAX_BYTES = 16 * 1024**3
DEFAULT_MAX_FILES = 200_000


@dataclass(frozen=True)
class Bounds:
    """How large a cache may be, in bytes and in files: ``scan`` and ``pack`` refuse a larger directory,
    ``verify`` and ``restore`` a larger artifact (``TooLargeError``)."""

    max_bytes: int = DEFAULT_MAX_BYTES
    max_files: int = DEFAULT_MAX_FILES


DEFAULT_BOUNDS = Bounds()
MAX_MANIFEST_BYTES = 64 * 1024**2
# A member's relative name, in bytes: far below PATH_MAX (4096) with the target's path in front of it.
MAX_NAME_BYTES = 1024
_CHUNK = 1024 * 1024

# What makes a cache valid, each with the shape its value must have.
_VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}")
_TEXT = re.compile(r"[0-9A-Za-z][0-9A-Za-z .+_:/()@-]{0,127}")
_ABS = re.compile(r"/[0-9A-Za-z._/+-]{0,254}")
_SHAPES: dict[str, tuple[re.Pattern[str], str]] = {
    "sglang_version": (_VERSION, "a version such as 0.5.23"),
    "flashinfer_version": (_VERSION, "a version such as 0.7.2"),
    "gpu_model": (_TEXT, "the GPU name nvidia-smi reports, such as NVIDIA RTX PRO 6000 Blackwell"),
    "compute_capability": (re.compile(r"[0-9]{1,2}\.[0-9]{1,2}"), "major.minor, such as 12.0"),
    "driver_version": (_VERSION, "a driver version such as 580.95.05"),
    "cuda_version": (_VERSION, "a CUDA version such as 13.0"),
    "model_revision": (_VERSION, "the model's commit (the model store's resolved revision)"),
    "profile": (_VERSION, "the server profile's name, such as glm5_nvfp4_tp8"),
    "cache_dir": (_ABS, "the absolute cache directory the server uses, such as /var/cache/sglang"),
    "release_dir": (_ABS, "the absolute release directory the server imports from"),
}
KEY_FIELDS = tuple(_SHAPES)
_SHA256 = re.compile(r"[0-9a-f]{64}")


class WarmCacheError(ValueError):
    """A warm-cache artifact or key that may not be used; the message says what and why."""


class KeyFieldError(WarmCacheError):
    """A key field is missing, unknown or has the wrong shape."""


class KeyMismatchError(WarmCacheError):
    """The artifact was built for another key."""


class DigestError(WarmCacheError):
    """An artifact's or a member's bytes are not the ones its digest names."""


class ArchiveError(WarmCacheError):
    """An artifact is not a well-formed warm-cache tar (hostile or broken member, bad manifest)."""


class TooLargeError(WarmCacheError):
    """A cache directory or an artifact is over the size or file-count bound."""


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def _field_why_not(name: str, value: object) -> str | None:
    pattern, shape = _SHAPES[name]
    if not isinstance(value, str):
        return f"is a {type(value).__name__}, expected a string: {shape}"
    if not pattern.fullmatch(value):
        return f"{value!r} is not {shape}"
    if pattern is _ABS and (os.path.normpath(value) != value or value == "/" or value.startswith("//")):
        return f"{value!r} is not a normalized absolute path below /: {shape}"
    return None


def cache_key(fields: object) -> dict[str, Any]:
    """``{"fields": {...}, "digest": sha256}`` for the key ``fields``; ``KeyFieldError`` otherwise."""
    if not isinstance(fields, Mapping):
        raise KeyFieldError(
            f"the warm-cache key must be a mapping of {', '.join(KEY_FIELDS)}; got {type(fields).__name__}"
        )
    missing = [name for name in KEY_FIELDS if name not in fields]
    if missing:
        raise KeyFieldError(f"the warm-cache key lacks {', '.join(missing)}: set every one of {', '.join(KEY_FIELDS)}")
    extra = sorted(str(name) for name in fields if name not in _SHAPES)
    if extra:
        raise KeyFieldError(
            f"the warm-cache key has unknown fields {', '.join(map(repr, extra))}: only {', '.join(KEY_FIELDS)}"
        )
    for name in KEY_FIELDS:
        why = _field_why_not(name, fields[name])
        if why:
            raise KeyFieldError(f"warm-cache key field {name} {why}")
    clean = {name: fields[name] for name in KEY_FIELDS}
    return {"fields": clean, "digest": hashlib.sha256(_canonical(clean)).hexdigest()}


def _sha256_handle(handle: Any) -> str:
    digest = hashlib.sha256()
    for chunk in iter(lambda: handle.read(_CHUNK), b""):
        digest.update(chunk)
    return digest.hexdigest()


def _open_cache_file(root: str, rel: str) -> Any:
    """``root``/``rel`` for reading, nothing below ``root`` followed (the server's user writes the
    cache: a file or directory swapped for a symlink after the scan must not make a collect, run as
    root, read a file of its choice into an artifact every node can read)."""
    try:
        return os.fdopen(open_regular(root, rel, "cache file"), "rb")
    except PathError as exc:
        raise WarmCacheError(f"{exc} (it changed while the cache was packed): nothing was written") from exc


class _HashingReader:
    """A file object's ``read`` that hashes what it gives (pack reads each file once for the tar)."""

    def __init__(self, handle: Any) -> None:
        self.handle, self.digest = handle, hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self.handle.read(size)
        self.digest.update(data)
        return data


def _name_why_not(rel: object, what: str) -> str | None:
    """Why ``rel`` may not name a member (``relative_name``'s rules, and at most MAX_NAME_BYTES)."""
    try:
        relative_name(rel, what)
    except PathError as exc:
        return str(exc)
    if len(rel.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:  # type: ignore[union-attr]
        return f"{what} {rel!r:.80}... is longer than {MAX_NAME_BYTES} bytes"
    return None


def _normal_mode(mode: int) -> int:
    return 0o755 if mode & 0o100 else 0o644


def scan(root: str, *, bounds: Bounds = DEFAULT_BOUNDS) -> dict[str, Any]:
    """The regular files below ``root`` (sorted, relative names, sizes, modes, sha256) and what was
    left out (not a regular file, or the marker). ``TooLargeError`` over a bound."""
    files: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    total = 0
    owner = os.stat(root).st_uid
    for here, dirs, names in os.walk(root, followlinks=False):
        dirs.sort()
        rel_here = os.path.relpath(here, root)
        for name in sorted(names + [d for d in dirs if os.path.islink(os.path.join(here, d))]):
            rel = name if rel_here == "." else f"{rel_here}/{name}"
            if rel == MARKER:
                continue
            info = os.lstat(os.path.join(here, name))
            if not stat.S_ISREG(info.st_mode):
                skipped.append({"path": rel, "why": kind_of(info.st_mode)})
                continue
            if info.st_nlink > 1 and info.st_uid != owner:
                # where fs.protected_hardlinks is 0 the server's user may link a file it does not own
                # (/etc/shadow) into its cache: the collect, run as root, would pack it for every node
                skipped.append(
                    {"path": rel, "why": f"a hard link to a file of uid {info.st_uid}, not the cache's owner"}
                )
                continue
            why = _name_why_not(rel, "cache file")
            if why:
                skipped.append({"path": rel, "why": why})
                continue
            total += info.st_size
            if total > bounds.max_bytes or len(files) >= bounds.max_files:
                raise TooLargeError(
                    f"the cache {root} is over the bound ({bounds.max_bytes} bytes, {bounds.max_files} files): "
                    "raise the bound or clear stale caches; nothing was written"
                )
            files.append({"path": rel, "size": info.st_size, "mode": _normal_mode(info.st_mode)})
    files.sort(key=lambda entry: entry["path"])
    for entry in files:
        with _open_cache_file(root, entry["path"]) as handle:
            entry["sha256"] = _sha256_handle(handle)
    return {"files": files, "skipped": skipped, "bytes": total}


def artifact_path(store: str, key_digest: str, digest: str) -> str:
    """Where the artifact of ``digest`` for ``key_digest`` lies in ``store``."""
    for what, value in (("key digest", key_digest), ("artifact digest", digest)):
        if not isinstance(value, str) or not _SHA256.fullmatch(value):
            raise WarmCacheError(f"{what} {value!r} is not a sha256 in hex")
    return os.path.join(store, key_digest, digest + ARTIFACT_SUFFIX)


def key_dir(store: str, key_digest: str) -> str:
    """``store``/``key_digest``, refused (``WarmCacheError``) when it is a symlink out of the store
    or not a directory: the store is shared by the nodes, and a node may plant anything in it."""
    if not isinstance(key_digest, str) or not _SHA256.fullmatch(key_digest):
        raise WarmCacheError(f"key digest {key_digest!r} is not a sha256 in hex")
    try:
        directory = confine(os.path.abspath(store), key_digest, "the key directory")
    except PathError as exc:
        raise WarmCacheError(f"{exc}: refused, nothing read or written there") from exc
    if os.path.lexists(directory) and not os.path.isdir(directory):
        raise WarmCacheError(f"the key directory {directory} is not a directory: remove it from the store")
    return directory


def find_artifacts(store: str, key_digest: str) -> list[str]:
    """The artifacts stored for ``key_digest``, newest first. Only a regular file named
    ``<sha256>.tar`` counts: a planted directory, symlink, FIFO or device is passed over, never
    opened (``lstat`` only)."""
    directory = key_dir(store, key_digest)
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        if not (name.endswith(ARTIFACT_SUFFIX) and _SHA256.fullmatch(name[: -len(ARTIFACT_SUFFIX)])):
            continue
        path = os.path.join(directory, name)
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            continue
        if stat.S_ISREG(info.st_mode):
            found.append((info.st_mtime, path))
    return [path for _mtime, path in sorted(found, reverse=True)]


def find_artifact(store: str, key_digest: str) -> str | None:
    """The newest artifact stored for ``key_digest`` (``find_artifacts``), or None."""
    found = find_artifacts(store, key_digest)
    return found[0] if found else None


def check_apart(store: str, cache_dir: str) -> None:
    """``WarmCacheError`` when the store and the cache directory overlap (one is the other or lies in
    it): a collect would pack the store into itself and a restore's swap would remove the store."""
    if inside(store, cache_dir) or inside(cache_dir, store):
        raise WarmCacheError(
            f"the store {store} and the cache directory {cache_dir} overlap: a restore would swap the store "
            "away with the cache; keep the store outside the cache directory (and the cache outside the store)"
        )


def _tarinfo(name: str, size: int, mode: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, mode, 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.type = tarfile.REGTYPE
    return info


class _Hashing(io.RawIOBase):
    def __init__(self, handle: Any) -> None:
        self.handle, self.digest = handle, hashlib.sha256()

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.digest.update(data)
        return self.handle.write(data)


def pack(root: str, store: str, key: Mapping[str, Any], *, bounds: Bounds = DEFAULT_BOUNDS) -> dict[str, Any]:
    """Pack ``root`` for ``key`` (``cache_key``'s fields) into ``store``: path, digest, files,
    bytes, skipped. The tar is the same bytes for the same files (deterministic)."""
    checked = cache_key(key)
    if not os.path.isdir(root):
        raise WarmCacheError(f"the cache directory {root} does not exist: nothing to collect")
    check_apart(store, root)
    directory = key_dir(store, checked["digest"])
    found = scan(root, bounds=bounds)
    manifest = _canonical({"format": FORMAT, "key": checked["fields"], "files": found["files"]})
    os.makedirs(directory, mode=0o755, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".warm-cache.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            hashing = _Hashing(handle)
            with tarfile.open(fileobj=hashing, mode="w|", format=tarfile.USTAR_FORMAT) as tar:  # type: ignore[call-overload]
                tar.addfile(_tarinfo(MANIFEST, len(manifest), 0o644), io.BytesIO(manifest))
                for entry in found["files"]:
                    with _open_cache_file(root, entry["path"]) as member:
                        reader = _HashingReader(member)
                        try:
                            tar.addfile(_tarinfo(MEMBER_PREFIX + entry["path"], entry["size"], entry["mode"]), reader)
                        except OSError as exc:
                            if exc.errno is not None:
                                raise
                            raise WarmCacheError(
                                f"the cache file {os.path.join(root, entry['path'])} changed while it was packed "
                                f"({exc}): nothing was written; collect again"
                            ) from exc
                        if reader.digest.hexdigest() != entry["sha256"]:
                            raise WarmCacheError(
                                f"the cache file {os.path.join(root, entry['path'])} changed while it was packed: "
                                "nothing was written; collect again"
                            )
            handle.flush()
            os.fsync(handle.fileno())
        digest = hashing.digest.hexdigest()
        final = artifact_path(store, checked["digest"], digest)
        os.chmod(tmp, 0o644)
        os.replace(tmp, final)
        fsync_dir(directory)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return {
        "path": final,
        "digest": digest,
        "key": checked,
        "files": len(found["files"]),
        "bytes": found["bytes"],
        "skipped": found["skipped"],
    }


def _read_manifest(tar: tarfile.TarFile, first: tarfile.TarInfo | None) -> dict[str, Any]:
    if first is None or first.name != MANIFEST or not first.isreg():
        raise ArchiveError(f"the artifact does not start with its manifest {MANIFEST}: not a warm-cache artifact")
    if first.size > MAX_MANIFEST_BYTES:
        raise TooLargeError(f"the artifact's manifest is {first.size} bytes, over {MAX_MANIFEST_BYTES}")
    handle = tar.extractfile(first)
    raw = handle.read() if handle else b""
    if len(raw) != first.size:
        raise ArchiveError("the artifact's manifest is truncated")
    try:
        manifest = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ArchiveError(f"the artifact's manifest is not JSON: {exc}") from exc
    return _check_manifest(manifest)


def _check_manifest(manifest: object) -> dict[str, Any]:
    if not isinstance(manifest, dict) or set(manifest) != {"format", "key", "files"}:
        raise ArchiveError("the artifact's manifest must be an object with exactly format, key and files")
    if manifest["format"] != FORMAT:
        raise ArchiveError(f"the artifact's format is {manifest['format']!r}; this collection reads format {FORMAT}")
    cache_key(manifest["key"])
    files = manifest["files"]
    if not isinstance(files, list):
        raise ArchiveError("the artifact's manifest files must be a list")
    seen: set[str] = set()
    normalised: set[str] = set()
    for entry in files:
        if not isinstance(entry, dict) or set(entry) != {"path", "size", "mode", "sha256"}:
            raise ArchiveError(f"a manifest entry must have exactly path, size, mode and sha256: {entry!r:.200}")
        why = _name_why_not(entry["path"], "artifact member")
        if why:
            raise ArchiveError(why)
        # names equal once normalised are one file where the file system normalises (ZFS normalization=)
        normal = unicodedata.normalize("NFC", entry["path"])
        if normal in normalised or entry["path"] == MARKER:
            raise ArchiveError(
                f"the manifest names {entry['path']!r} twice (or as Unicode spellings of one name) or names the marker"
            )
        normalised.add(normal)
        seen.add(entry["path"])
        size, mode, sha = entry["size"], entry["mode"], entry["sha256"]
        if (
            not isinstance(size, int)
            or isinstance(size, bool)
            or size < 0
            or mode not in (0o644, 0o755)
            or not isinstance(sha, str)
            or not _SHA256.fullmatch(sha)
        ):
            raise ArchiveError(f"manifest entry {entry['path']!r} has a bad size, mode or sha256")
    parents = {path.rsplit("/", maxsplit=depth)[0] for path in seen for depth in range(1, path.count("/") + 1)}
    clash = sorted(parents & (seen | {MARKER}))
    if clash:
        raise ArchiveError(
            f"the manifest names {clash[0]!r} both a file and a directory (a file below it is listed too): refused"
        )
    return manifest


def _open_artifact(path: str) -> Any:
    """The artifact for reading: a regular file, never through a symlink, never blocking (a FIFO or a
    device planted in the store under an artifact's name is refused, not opened)."""
    try:
        return os.fdopen(open_regular(os.path.dirname(path), os.path.basename(path), "artifact"), "rb")
    except PathError as exc:
        raise ArchiveError(f"{exc}: not an artifact of the store ({path})") from exc
    except IsADirectoryError as exc:
        raise ArchiveError(f"the artifact {path} is a directory: not an artifact of the store") from exc


def _members(path: str, expected_digest: str | None, bounds: Bounds) -> Iterator[tuple[dict[str, Any], Any]]:
    """Yield (manifest, None) first, then (entry, file object) for each member, all checked. The
    artifact is opened once: the bytes hashed are the bytes read."""
    with _open_artifact(path) as handle:
        if expected_digest is not None:
            actual = _sha256_handle(handle)
            if actual != expected_digest:
                raise DigestError(
                    f"the artifact {path} has sha256 {actual}, not {expected_digest}: damaged or replaced"
                )
            handle.seek(0)
        yield from _checked_members(path, handle, bounds)


def _checked_members(path: str, handle: Any, bounds: Bounds) -> Iterator[tuple[dict[str, Any], Any]]:
    try:
        with tarfile.open(fileobj=handle, mode="r:") as tar:
            manifest = _read_manifest(tar, tar.next())
            if len(manifest["files"]) > bounds.max_files:
                raise TooLargeError(
                    f"the artifact {path} holds {len(manifest['files'])} files, more than {bounds.max_files}: refused"
                )
            yield manifest, None
            entries = {MEMBER_PREFIX + e["path"]: e for e in manifest["files"]}
            if sum(e["size"] for e in manifest["files"]) > bounds.max_bytes:
                raise TooLargeError(f"the artifact {path} unpacks to more than {bounds.max_bytes} bytes: refused")
            seen: set[str] = set()
            for info in iter(tar.next, None):
                entry = entries.get(info.name)
                if entry is None or info.name in seen:
                    raise ArchiveError(
                        f"the artifact member {info.name!r} is not in its manifest, or repeated: refused"
                    )
                if not info.isreg():
                    raise ArchiveError(f"the artifact member {info.name!r} is not a regular file: refused")
                if info.size != entry["size"]:
                    raise ArchiveError(
                        f"the artifact member {info.name!r} is {info.size} bytes, the manifest says {entry['size']}"
                    )
                seen.add(info.name)
                yield entry, tar.extractfile(info)
            if seen != set(entries):
                raise ArchiveError(
                    f"the artifact {path} lacks {len(entries) - len(seen)} member(s) its manifest names: truncated"
                )
    except tarfile.TarError as exc:
        raise ArchiveError(f"the artifact {path} is not a readable tar: {exc}") from exc
    except EOFError as exc:
        raise ArchiveError(f"the artifact {path} is truncated: {exc}") from exc


@contextlib.contextmanager
def _tar_errors(path: str) -> Iterator[None]:
    """A tar error (also one raised while a member is read) as an ArchiveError naming ``path``."""
    try:
        yield
    except tarfile.TarError as exc:
        raise ArchiveError(f"the artifact {path} is not a readable tar: {exc}") from exc
    except EOFError as exc:
        raise ArchiveError(f"the artifact {path} is truncated: {exc}") from exc


def _copy_checked(source: Any, fd: int, entry: dict[str, Any]) -> None:
    digest, left = hashlib.sha256(), entry["size"]
    while left:
        chunk = source.read(min(_CHUNK, left))
        if not chunk:
            raise ArchiveError(f"the artifact member {entry['path']!r} is truncated")
        digest.update(chunk)
        os.write(fd, chunk)
        left -= len(chunk)
    if digest.hexdigest() != entry["sha256"]:
        raise DigestError(f"the artifact member {entry['path']!r} does not match its sha256: damaged")


def verify(path: str, *, bounds: Bounds = DEFAULT_BOUNDS) -> dict[str, Any]:
    """Check the artifact at ``path`` (named by its digest) completely: manifest, key, digests."""
    digest = os.path.basename(path)[: -len(ARTIFACT_SUFFIX)]
    if not path.endswith(ARTIFACT_SUFFIX) or not _SHA256.fullmatch(digest):
        raise WarmCacheError(f"{path} is not named <sha256>{ARTIFACT_SUFFIX}: not an artifact of the store")
    manifest: dict[str, Any] = {}
    with _tar_errors(path):
        for entry, source in _members(path, digest, bounds):
            if source is None:
                manifest = entry
                continue
            digest_of = hashlib.sha256()
            for chunk in iter(lambda src=source: src.read(_CHUNK), b""):
                digest_of.update(chunk)
            if digest_of.hexdigest() != entry["sha256"]:
                raise DigestError(f"the artifact member {entry['path']!r} does not match its sha256: damaged")
    return {
        "digest": digest,
        "key": cache_key(manifest["key"]),
        "files": len(manifest["files"]),
        "bytes": sum(e["size"] for e in manifest["files"]),
    }


def read_marker(target: str) -> dict[str, Any] | None:
    """What ``restore`` left in ``target`` (digest, key digest), or None."""
    try:
        # the server's user writes the target: a FIFO there must not block, a link is not followed
        with os.fdopen(open_regular(target, MARKER, "warm-cache marker"), "rb") as handle:
            marker = json.loads(handle.read(1024 * 1024))
    except (OSError, ValueError):  # PathError is a ValueError
        return None
    return marker if isinstance(marker, dict) else None


def restore(
    path: str,
    target: str,
    key: Mapping[str, Any],
    *,
    bounds: Bounds = DEFAULT_BOUNDS,
    uid: int | None = None,
    gid: int | None = None,
    relocate: bool = False,
) -> dict[str, Any]:
    """Restore the artifact at ``path`` into ``target`` (absolute) when it was built for ``key``.

    ``target`` must be the key's ``cache_dir`` (caches name absolute paths); ``relocate`` lifts
    that for a measurement of the miss at another path, never for a server. Everything is checked and
    extracted into a temporary directory beside ``target`` first; only a complete, verified copy
    replaces ``target``. Any error leaves ``target`` as it was."""
    expected = cache_key(key)
    if not os.path.isabs(target) or os.path.normpath(target) != target or target == "/" or target.startswith("//"):
        raise WarmCacheError(f"the restore target {target!r} must be a normalized absolute path below /")
    if target != expected["fields"]["cache_dir"] and not relocate:
        raise WarmCacheError(
            f"the restore target {target} is not the key's cache_dir {expected['fields']['cache_dir']}: "
            "caches name absolute paths and miss elsewhere; restore at the path they were built at"
        )
    digest = os.path.basename(path)[: -len(ARTIFACT_SUFFIX)]
    if not path.endswith(ARTIFACT_SUFFIX) or not _SHA256.fullmatch(digest):
        raise WarmCacheError(f"{path} is not named <sha256>{ARTIFACT_SUFFIX}: not an artifact of the store")
    if os.path.lexists(target) and (os.path.islink(target) or not os.path.isdir(target)):
        raise WarmCacheError(f"the restore target {target} is not a directory: refused, nothing restored")
    if inside(target, path):
        raise WarmCacheError(
            f"the artifact {path} lies inside the restore target {target}: the swap would remove it with the "
            "old cache; keep the store outside the cache directory. Nothing restored"
        )
    parent = os.path.dirname(target)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{os.path.basename(target)}.warm-cache.", dir=parent)
    count = total = 0
    try:
        with _tar_errors(path):
            for entry, source in _members(path, digest, bounds):
                if source is None:
                    got = cache_key(entry["key"])
                    if got["digest"] != expected["digest"]:
                        differ = [n for n in KEY_FIELDS if got["fields"][n] != expected["fields"][n]]
                        raise KeyMismatchError(
                            f"the artifact {path} was built for another key (differs in {', '.join(differ)}): "
                            "not used; the node starts cold and a new artifact is collected"
                        )
                    continue
                dest = confine(staging, entry["path"], "artifact member")
                os.makedirs(os.path.dirname(dest), mode=0o755, exist_ok=True)
                fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, entry["mode"])
                try:
                    _copy_checked(source, fd, entry)
                    os.fchmod(fd, entry["mode"])
                    if uid is not None or gid is not None:
                        os.fchown(fd, -1 if uid is None else uid, -1 if gid is None else gid)
                finally:
                    os.close(fd)
                count += 1
                total += entry["size"]
        marker = _canonical({"digest": digest, "key_digest": expected["digest"], "files": count, "bytes": total})
        with open(os.path.join(staging, MARKER), "wb") as handle:
            handle.write(marker)
        _chown_tree(staging, uid, gid)
        _keep_top(staging, target)
        _swap_in(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return {"digest": digest, "key": expected, "files": count, "bytes": total}


def _keep_top(staging: str, target: str) -> None:
    """The new directory takes the old one's mode (and owner, as root), so that the role that made
    it finds it unchanged; a new one is 0755."""
    try:
        old = os.stat(target, follow_symlinks=False)
    except FileNotFoundError:
        os.chmod(staging, 0o755)
        return
    os.chmod(staging, stat.S_IMODE(old.st_mode))
    if os.geteuid() == 0:
        os.chown(staging, old.st_uid, old.st_gid)


def _chown_tree(top: str, uid: int | None, gid: int | None) -> None:
    if uid is None and gid is None:
        return
    for here, dirs, names in os.walk(top):
        for name in [*dirs, *names]:
            os.chown(
                os.path.join(here, name), -1 if uid is None else uid, -1 if gid is None else gid, follow_symlinks=False
            )
    os.chown(top, -1 if uid is None else uid, -1 if gid is None else gid)


def _swap_in(staging: str, target: str) -> None:
    """Rename ``staging`` to ``target``; an existing ``target`` is renamed aside first and removed after.

    Whatever stops it (an OS error, an interrupt between the two renames), ``target`` ends whole: the
    new directory when it was renamed in, else the old one renamed back. The old copy is removed only
    once a directory is at ``target``."""
    parent = os.path.dirname(target)
    aside = old = None
    if os.path.lexists(target):
        if os.path.islink(target) or not os.path.isdir(target):
            raise WarmCacheError(f"the restore target {target} is not a directory: refused, nothing restored")
        aside = tempfile.mkdtemp(prefix=f".{os.path.basename(target)}.old.", dir=parent)
    try:
        if aside is not None:
            old = os.path.join(aside, "old")
            os.rename(target, old)
        os.rename(staging, target)
        fsync_dir(parent)
    except BaseException:
        if old is not None and os.path.lexists(old) and not os.path.lexists(target):
            os.rename(old, target)  # the new one never came in: the old one goes back
        raise
    finally:
        if aside is not None and os.path.lexists(target):
            shutil.rmtree(aside, ignore_errors=True)
