# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A node's deployed state as one versioned unit (stdlib only; runs on the target).

A deployment is the SGLang release directory, the rendered server files (unit, server config,
environment, secrets) and the model it serves, recorded together:

    <root>/<id>/manifest.json    what the deployment is (release, model, files with sha256/mode/owner)
    <root>/<id>/files/<n>        byte copies of the managed files (0600, root)
    <root>/current -> <id>       the deployment the node runs
    <root>/previous -> <id>      the one before it (what a rollback restores)

The id is a digest of everything that defines the deployment, so rendering the same inputs
again is the same deployment (idempotent), and anything that differs is a new one. A rollback
restores the previous deployment's files byte for byte, points the release link back at its
release, makes it current and forgets `previous`, so a second rollback in a row has nothing to go
back to and says so.

A rollback or restore is all or nothing (:class:`_Transaction`): every new file and link, and a
copy of every live one it replaces, is staged under a temporary name next to it before anything is
renamed into place (the managed files, the release link, then the records); a failure while
renaming renames the copies back. The error says what the node is on (``node_on``, ``mixed``).

Manifests and the record links are data from disk: checked (:func:`check_manifest`,
:func:`deployment_segment`, ``confined_path``) before any path built from them is used, and read
without ever opening a FIFO or following a link (:func:`_read_regular`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.sglang.plugins.module_utils.common.atomic_file import (
    FileWriteError,
    fsync_dir,
    replace_file,
    stage_file,
    stage_symlink,
    swap_symlink,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.common.confined_path import (
    PathError,
    confine,
    file_kind,
    relative_name,
    segment,
)

MANIFEST = "manifest.json"
CURRENT = "current"
PREVIOUS = "previous"
MAX_FILE_BYTES = 1 << 20  # the managed files are small text files; refuse anything larger
MAX_MANIFEST_BYTES = 1 << 20
SCHEMA = 1
# the shapes record() writes (check_manifest refuses any other)
_ID_RE = re.compile(r"d-[0-9a-f]{16}")
_SHA256_RE = re.compile(r"[0-9a-f]{64}")
_MODE_RE = re.compile(r"[0-7]{4}")
_STORED_RE = re.compile(r"0|[1-9][0-9]{0,5}")
_MANIFEST_KEYS = frozenset({"schema", "id", "created", "release_dir", "model", "meta", "files"})
_PRESENT_KEYS = frozenset({"path", "sha256", "mode", "uid", "gid", "stored", "secret"})
_ABSENT_KEYS = frozenset({"path", "absent", "stored", "secret"})


class DeploymentError(Exception):
    """A named failure: the message says what is wrong and what the node is on now.

    ``node_on``: the deployment the node's files and release link are exactly (when known),
    ``mixed``: a restore failed and could not be undone, so the node is partly changed.
    """

    def __init__(self, message: str, *, node_on: str = "", mixed: bool = False) -> None:
        super().__init__(message)
        self.node_on = node_on
        self.mixed = mixed


@dataclass(frozen=True)
class FileState:
    """One managed file as it is on disk (or absent)."""

    path: str
    absent: bool
    sha256: str = ""
    mode: int = 0
    uid: int = 0
    gid: int = 0
    secret: bool = False
    content: bytes = field(default=b"", repr=False, compare=False)

    def key(self) -> dict[str, Any]:
        """The part of the state that defines the deployment (no content, no secret flag)."""
        if self.absent:
            return {"path": self.path, "absent": True}
        return {
            "path": self.path,
            "sha256": self.sha256,
            "mode": f"{self.mode:04o}",
            "uid": self.uid,
            "gid": self.gid,
        }


def _lstat(path: str, named: str) -> os.stat_result | None:
    """``os.lstat(path)``, None when it does not exist; any other error a DeploymentError that says
    ``cannot read <named>``."""
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise DeploymentError(f"cannot read {named}: {exc.strerror}") from exc


def _read_regular(path: str, what: str, limit: int) -> tuple[bytes, os.stat_result] | None:
    """The bytes and stat of the regular file ``path`` (None when it does not exist), read without
    ever blocking or following a link: ``lstat`` first, then ``O_NOFOLLOW | O_NONBLOCK`` and the
    same file checked again on the open descriptor (a FIFO, device, socket, link or directory is
    refused, never opened for reading)."""
    st = _lstat(path, f"{what} {path}")
    if st is None:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise DeploymentError(
            f"{what} {path} is not a regular file (a {_kind(st.st_mode)}); refusing to read it: "
            "replace it with the file or remove it"
        )
    if st.st_size > limit:
        raise DeploymentError(f"{what} {path} is {st.st_size} bytes, over the {limit}-byte limit")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise DeploymentError(f"cannot read {what} {path}: {exc.strerror}") from exc
    try:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) or not stat.S_ISREG(now.st_mode):
            raise DeploymentError(f"{what} {path} was replaced while it was read; run again")
        chunks = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise DeploymentError(f"cannot read {what} {path}: {exc.strerror}") from exc
    finally:
        os.close(fd)
    if size > limit:
        raise DeploymentError(f"{what} {path} is over the {limit}-byte limit")
    return b"".join(chunks), now


def _kind(mode: int) -> str:
    """What a file found where a regular file or a directory should be is, in this module's messages: the
    kind confined_path names (a symlink spelled out), or "special file" for a regular file or an unnamed kind."""
    noun = file_kind(mode)
    if noun in (None, "regular file"):
        return "special file"
    return "symbolic link" if noun == "symlink" else noun


def managed_path(path: object, what: str = "managed file") -> str:
    """``path`` if it is an absolute, normalised path of a file (no ``.``, ``..`` or empty segment,
    no control character, not ``/``): the shape record() accepts and a manifest must have."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise DeploymentError(f"{what} {path!r} is not an absolute path")
    try:
        relative_name(path[1:], what)
    except PathError as exc:
        raise DeploymentError(f"{what} {path!r} is not a normalised absolute path ({exc})") from exc
    return path


def read_file_state(path: str, secret: bool = False) -> FileState:
    """Read one managed file; a missing file is recorded as absent, a symlink or a non-file refused."""
    managed_path(path)
    got = _read_regular(path, "managed file", MAX_FILE_BYTES)
    if got is None:
        return FileState(path=path, absent=True, secret=secret)
    content, st = got
    return FileState(
        path=path,
        absent=False,
        sha256=hashlib.sha256(content).hexdigest(),
        mode=stat.S_IMODE(st.st_mode),
        uid=st.st_uid,
        gid=st.st_gid,
        secret=secret,
        content=content,
    )


def deployment_id(release_dir: str, files: list[FileState], model: dict[str, Any], meta: dict[str, Any]) -> str:
    """A stable id for what defines a deployment (same inputs, same id)."""
    doc = {
        "release_dir": release_dir,
        "files": [f.key() for f in sorted(files, key=lambda f: f.path)],
        "model": model,
        "meta": meta,
    }
    digest = hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return "d-" + digest[:16]


def deployment_segment(dep_id: object, what: str) -> str:
    """``dep_id`` if it is a deployment id as :func:`deployment_id` makes them (one path segment)."""
    try:
        segment(dep_id, what)
    except PathError as exc:
        raise DeploymentError(f"{exc}; a deployment id is 'd-' and 16 hex digits") from exc
    if not isinstance(dep_id, str) or not _ID_RE.fullmatch(dep_id):
        raise DeploymentError(f"{what} {dep_id!r} is not a deployment id ('d-' and 16 hex digits)")
    return dep_id


def _link_target(root: str, name: str) -> str:
    """The deployment id a link points at, or '' when there is none; anything else is refused."""
    link = os.path.join(root, name)
    try:
        target = os.readlink(link)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        if os.path.lexists(link) and not os.path.islink(link):
            raise DeploymentError(f"{link} is not a symbolic link; remove it (it must point at a deployment)") from exc
        raise DeploymentError(f"cannot read {link}: {exc.strerror}") from exc
    try:
        return deployment_segment(target, f"{link} points at")
    except DeploymentError as exc:
        raise DeploymentError(f"{exc}; fix or remove the link") from exc


def _atomic_symlink(target: str, link: str) -> None:
    """Point link at target by renaming a new link over it (never a moment without the link)."""
    try:
        swap_symlink(target, link, prefix=".")
    except FileWriteError as exc:
        raise DeploymentError(str(exc)) from exc


def atomic_write(path: str, content: bytes, mode: int, uid: int, gid: int) -> None:
    """Replace a file crash-safely with the mode and owner given: :func:`atomic_file.replace_file`."""
    try:
        replace_file(path, content, mode=mode, uid=uid, gid=gid, prefix=".")
    except FileWriteError as exc:
        raise DeploymentError(f"{exc}; the file is unchanged") from exc


# --------------------------------------------------------------------------- manifests


def _bad(dep_id: str, where: str, why: str) -> DeploymentError:
    return DeploymentError(
        f"deployment {dep_id}: {MANIFEST} {where} {why}; the record is damaged: "
        "remove that deployment directory and record again"
    )


def _check_int(dep_id: str, where: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _bad(dep_id, where, f"is {value!r}, not a non-negative integer")
    return value


def _check_path(dep_id: str, where: str, value: object) -> str:
    try:
        return managed_path(value, "the path")
    except DeploymentError as exc:
        raise _bad(dep_id, where, str(exc)) from exc


def _check_file_entry(dep_id: str, index: int, entry: object) -> dict[str, Any]:
    where = f"files[{index}]"
    if not isinstance(entry, dict):
        raise _bad(dep_id, where, f"is a {type(entry).__name__}, not an object")
    keys = _ABSENT_KEYS if entry.get("absent") is True else _PRESENT_KEYS
    if set(entry) != keys:
        missing, extra = sorted(keys - set(entry)), sorted(set(entry) - keys)
        raise _bad(dep_id, where, f"has keys {sorted(entry)} (missing {missing}, unexpected {extra})")
    _check_path(dep_id, f"{where}.path", entry["path"])
    if not isinstance(entry["secret"], bool):
        raise _bad(dep_id, f"{where}.secret", f"is {entry['secret']!r}, not true or false")
    if not isinstance(entry["stored"], str) or not _STORED_RE.fullmatch(entry["stored"]):
        raise _bad(dep_id, f"{where}.stored", f"is {entry['stored']!r}, not the decimal index of a stored copy")
    if "absent" in keys:
        return entry
    if not isinstance(entry["sha256"], str) or not _SHA256_RE.fullmatch(entry["sha256"]):
        raise _bad(dep_id, f"{where}.sha256", f"is {entry['sha256']!r}, not 64 lowercase hex digits")
    if not isinstance(entry["mode"], str) or not _MODE_RE.fullmatch(entry["mode"]):
        raise _bad(dep_id, f"{where}.mode", f"is {entry['mode']!r}, not four octal digits like '0644'")
    _check_int(dep_id, f"{where}.uid", entry["uid"])
    _check_int(dep_id, f"{where}.gid", entry["gid"])
    return entry


def _in_records(path: str, root: str) -> bool:
    records = os.path.normpath(os.path.abspath(root))
    return path == records or path.startswith(records.rstrip("/") + "/")


def check_manifest(doc: object, dep_id: str, root: str) -> dict[str, Any]:
    """``doc`` (a parsed manifest.json) if it has the shape :func:`record` writes, else a
    DeploymentError naming the first wrong field. File paths must be absolute and normalised,
    each once, and outside ``root`` (the records)."""
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or isinstance(doc.get("schema"), bool):
        raise DeploymentError(
            f"deployment {dep_id}: {MANIFEST} is not a gpufleet deployment manifest (schema {SCHEMA})"
        )
    if set(doc) != _MANIFEST_KEYS:
        missing, extra = sorted(_MANIFEST_KEYS - set(doc)), sorted(set(doc) - _MANIFEST_KEYS)
        raise _bad(dep_id, "", f"has keys {sorted(doc)} (missing {missing}, unexpected {extra})")
    if doc["id"] != dep_id:
        raise _bad(dep_id, "id", f"is {doc['id']!r}, not the id of its directory")
    if not isinstance(doc["created"], str):
        raise _bad(dep_id, "created", f"is {doc['created']!r}, not a time stamp")
    _check_path(dep_id, "release_dir", doc["release_dir"])
    for name in ("model", "meta"):
        if not isinstance(doc[name], dict):
            raise _bad(dep_id, name, f"is a {type(doc[name]).__name__}, not an object")
    if not isinstance(doc["files"], list):
        raise _bad(dep_id, "files", f"is a {type(doc['files']).__name__}, not a list")
    paths: set[str] = set()
    stored: set[str] = set()
    records = os.path.normpath(os.path.abspath(root))
    for index, entry in enumerate(doc["files"]):
        _check_file_entry(dep_id, index, entry)
        if entry["path"] in paths or entry["stored"] in stored:
            raise _bad(dep_id, f"files[{index}]", f"names {entry['path']} or stored copy {entry['stored']} twice")
        if _in_records(entry["path"], root):
            raise _bad(dep_id, f"files[{index}].path", f"{entry['path']} lies in the deployment records {records}")
        paths.add(entry["path"])
        stored.add(entry["stored"])
    return doc


def _load_deployment(root: str, dep_id: str) -> tuple[dict[str, Any], dict[str, bytes]]:
    """A deployment's checked manifest and its stored copies by ``stored`` name (sha256 checked).
    Every path is checked before it is opened, and no special file is ever opened."""
    deployment_segment(dep_id, "deployment id")
    directory = confine_record(root, dep_id)
    path = os.path.join(directory, MANIFEST)
    got = _read_regular(path, f"deployment {dep_id}: manifest", MAX_MANIFEST_BYTES)
    if got is None:
        raise DeploymentError(f"deployment {dep_id}: {path} is missing")
    try:
        doc = json.loads(got[0].decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise DeploymentError(f"deployment {dep_id}: {path} is unreadable or not JSON ({exc})") from exc
    manifest = check_manifest(doc, dep_id, root)
    contents: dict[str, bytes] = {}
    for entry in manifest["files"]:
        if entry.get("absent"):
            continue
        stored = confine_record(root, f"{dep_id}/files/{entry['stored']}")
        copy = _read_regular(stored, f"deployment {dep_id}: stored copy of {entry['path']}", MAX_FILE_BYTES)
        if copy is None:
            raise DeploymentError(f"deployment {dep_id}: stored copy {stored} of {entry['path']} is missing")
        if hashlib.sha256(copy[0]).hexdigest() != entry["sha256"]:
            raise DeploymentError(
                f"deployment {dep_id}: stored copy of {entry['path']} does not match its sha256 (corrupted)"
            )
        contents[entry["stored"]] = copy[0]
    return manifest, contents


def confine_record(root: str, name: str) -> str:
    """``root``/``name`` for a path inside the records (confined_path.confine; DeploymentError)."""
    try:
        path = confine(os.path.abspath(root), name, "deployment record")
    except PathError as exc:
        raise DeploymentError(str(exc)) from exc
    st = _lstat(path, path)
    if st is None:
        return path
    if "/" not in name.rstrip("/") and not stat.S_ISDIR(st.st_mode):
        raise DeploymentError(f"deployment record {path} is not a directory (a {_kind(st.st_mode)}); remove it")
    return path


def load_manifest(root: str, dep_id: str) -> dict[str, Any]:
    """Read and check a deployment's manifest (its shape, every path in it) and its stored copies (sha256)."""
    return _load_deployment(root, dep_id)[0]


def _public(manifest: dict[str, Any]) -> dict[str, Any]:
    """A manifest fit for output (it never holds contents, only digests)."""
    return {k: manifest[k] for k in ("id", "created", "release_dir", "model", "meta", "files") if k in manifest}


@dataclass
class Outcome:
    """What a call did (or would do, in check mode)."""

    changed: bool
    current: str
    previous: str
    manifest: dict[str, Any]
    files_changed: list[str] = field(default_factory=list)
    release_link_changed: bool = False
    created: bool = False
    diffs: list[dict[str, str]] = field(default_factory=list)
    msg: str = ""
    warnings: list[str] = field(default_factory=list)


def _ensure_root(root: str, check: bool) -> None:
    if os.path.isdir(root):
        return
    if os.path.lexists(root):
        raise DeploymentError(f"{root} exists and is not a directory")
    if not check:
        try:
            os.makedirs(root, mode=0o700)
        except OSError as exc:
            raise DeploymentError(f"cannot create {root}: {exc.strerror}") from exc


def _store(root: str, dep_id: str, manifest: dict[str, Any], files: list[FileState]) -> None:
    """Write a new deployment directory under a temp name, then rename it into place."""
    tmp = tempfile.mkdtemp(prefix=f".{dep_id}.", dir=root)
    try:
        os.chmod(tmp, 0o700)
        os.mkdir(os.path.join(tmp, "files"), 0o700)
        for entry, state in zip(manifest["files"], files, strict=False):
            if state.absent:
                continue
            atomic_write(os.path.join(tmp, "files", entry["stored"]), state.content, 0o600, 0, 0)
        atomic_write(
            os.path.join(tmp, MANIFEST), (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode(), 0o600, 0, 0
        )
        os.rename(tmp, os.path.join(root, dep_id))
        fsync_dir(root)
    except (OSError, DeploymentError) as exc:
        for name in sorted(os.listdir(tmp), reverse=True) if os.path.isdir(tmp) else []:
            path = os.path.join(tmp, name)
            if os.path.isdir(path):
                for inner in os.listdir(path):
                    os.unlink(os.path.join(path, inner))
                os.rmdir(path)
            else:
                os.unlink(path)
        if os.path.isdir(tmp):
            os.rmdir(tmp)
        if isinstance(exc, DeploymentError):
            raise
        raise DeploymentError(f"cannot store deployment {dep_id} under {root}: {exc.strerror}") from exc


def record(
    root: str,
    release_dir: str,
    files: list[tuple[str, bool]],
    model: dict[str, Any],
    meta: dict[str, Any],
    *,
    check: bool = False,
    only_if_none: bool = False,
    now: float | None = None,
) -> Outcome:
    """Record the live files as a deployment and make it current.

    files: (path, secret) pairs. only_if_none: record only when the node has no current
    deployment yet (adopting a node deployed before deployments were recorded).
    """
    current = _link_target(root, CURRENT) if os.path.isdir(root) else ""
    previous = _link_target(root, PREVIOUS) if os.path.isdir(root) else ""
    if only_if_none and current:
        return Outcome(False, current, previous, _public(load_manifest(root, current)))
    managed_path(release_dir, "release_dir")
    for path in (pair[0] for pair in files):
        if _in_records(managed_path(path), root):
            raise DeploymentError(f"managed file {path} lies in the deployment records {root}; nothing was recorded")
    states = [read_file_state(path, secret) for path, secret in files]
    dep_id = deployment_id(release_dir, states, model, meta)
    manifest = {
        "schema": SCHEMA,
        "id": dep_id,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
        "release_dir": release_dir,
        "model": model,
        "meta": meta,
        "files": [dict(s.key(), stored=str(i), secret=s.secret) for i, s in enumerate(states)],
    }
    check_manifest(manifest, dep_id, root)  # never write a record that a rollback would refuse
    exists = os.path.lexists(os.path.join(root, dep_id))
    if exists:
        manifest = load_manifest(root, dep_id)
    switch = current != dep_id
    new_previous = current if switch and current else previous
    if check:
        return Outcome(switch or not exists, dep_id, new_previous, _public(manifest), created=not exists)
    _ensure_root(root, check)
    if not exists:
        _store(root, dep_id, manifest, states)
    if switch:
        if current:
            _atomic_symlink(current, os.path.join(root, PREVIOUS))
        _atomic_symlink(dep_id, os.path.join(root, CURRENT))
    return Outcome(switch or not exists, dep_id, new_previous, _public(manifest), created=not exists)


def _text(content: bytes) -> str:
    return content.decode("utf-8", errors="replace")


def rollback(root: str, release_link: str, *, check: bool = False) -> Outcome:
    """Restore the previous deployment as a whole: files, release link, current; forget previous."""
    current = _link_target(root, CURRENT) if os.path.isdir(root) else ""
    previous = _link_target(root, PREVIOUS) if os.path.isdir(root) else ""
    if not previous:
        raise DeploymentError(
            f"no previous deployment to roll back to under {root} (current: {current or 'none'}); nothing was changed",
            node_on=current,
        )
    return _restore(root, previous, current, release_link, check=check)


def restore_current(root: str, release_link: str, *, check: bool = False) -> Outcome:
    """Put the live files and the release link back to the current deployment (undo changes made
    after the last record, e.g. by a run that failed before it recorded a new deployment)."""
    current = _link_target(root, CURRENT) if os.path.isdir(root) else ""
    if not current:
        raise DeploymentError(f"no current deployment to restore under {root}; nothing was changed")
    return _restore(root, current, current, release_link, check=check)


def _file_diff(path: str, before: bytes, after: bytes, secret: bool) -> dict[str, str]:
    """A diff entry for a live file; a secret file's content is never shown."""
    if secret:
        return {
            "before_header": path,
            "after_header": path,
            "before": "(secret: content not shown)\n",
            "after": "(secret: content not shown)\n",
        }
    return {"before_header": path, "after_header": path, "before": _text(before), "after": _text(after)}


@dataclass
class _Planned:
    """One managed file of the deployment being restored that differs from the live one."""

    entry: dict[str, Any]
    content: bytes
    live: FileState


def _restore_plan(manifest: dict[str, Any], contents: dict[str, bytes]) -> list[_Planned]:
    """The files of a deployment that differ from the live ones, with their stored content (changes nothing)."""
    plan: list[_Planned] = []
    for entry in manifest["files"]:
        live = read_file_state(entry["path"], bool(entry.get("secret")))
        want = {k: v for k, v in entry.items() if k not in ("stored", "secret")}
        if live.key() != want:
            plan.append(_Planned(entry, b"" if entry.get("absent") else contents[entry["stored"]], live))
    return plan


def _read_release_link(release_link: str) -> str:
    """Where the release link points ('' when missing); a release link that is not a link is refused."""
    try:
        return os.readlink(release_link)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        if os.path.lexists(release_link):
            raise DeploymentError(
                f"release link {release_link} is not a symbolic link: make it the link the sglang role creates"
            ) from exc
        raise DeploymentError(f"cannot read release link {release_link}: {exc.strerror}") from exc


@dataclass
class _Change:
    """One path the restore changes: the new and the old state, each staged beforehand as a
    temporary file or link next to it (None: that state is 'absent')."""

    dest: str
    new: str | None = None
    old: str | None = None
    swapped: bool = False


class _Transaction:
    """Stage every change first, then swap them in order; a failure during the swap puts back
    every change already swapped (by renaming the staged old state over it), so the node is left
    as it was. A rename writes no file data, so the undo does not fail for lack of space."""

    def __init__(self) -> None:
        self.changes: list[_Change] = []

    def stage_file(self, path: str, new: tuple[bytes, int, int, int] | None, old: FileState) -> None:
        change = _Change(path)
        self.changes.append(change)
        if new is not None:
            change.new = stage_file(path, new[0], mode=new[1], uid=new[2], gid=new[3], prefix=".")
        if not old.absent:
            change.old = stage_file(path, old.content, mode=old.mode, uid=old.uid, gid=old.gid, prefix=".")

    def stage_link(self, link: str, new: str | None, old: str) -> None:
        change = _Change(link)
        self.changes.append(change)
        if new is not None:
            change.new = stage_symlink(new, link, prefix=".")
        if old:
            change.old = stage_symlink(old, link, prefix=".")

    def swap(self) -> None:
        """Every change in order, then every directory touched fsynced (the rename made durable)."""
        for change in self.changes:
            if change.new is not None:
                os.replace(change.new, change.dest)
                change.new = None
            else:
                os.unlink(change.dest)
            change.swapped = True
        for directory in sorted({os.path.dirname(c.dest) for c in self.changes}):
            fsync_dir(directory)

    def undo(self) -> list[str]:
        """Put back every swapped change (last first); the errors of those that could not be."""
        errors = []
        for change in reversed(self.changes):
            if not change.swapped:
                continue
            try:
                if change.old is not None:
                    os.replace(change.old, change.dest)
                    change.old = None
                else:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(change.dest)
                change.swapped = False
            except OSError as exc:
                errors.append(f"{change.dest}: {exc.strerror or exc}")
        for directory in sorted({os.path.dirname(c.dest) for c in self.changes}):
            with contextlib.suppress(OSError):
                fsync_dir(directory)
        return errors

    def discard(self) -> list[str]:
        """Remove every staged temporary still there; the ones that could not be removed."""
        left = []
        for change in self.changes:
            for tmp in (change.new, change.old):
                if tmp is None:
                    continue
                try:
                    os.unlink(tmp)
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    left.append(f"{tmp} ({exc.strerror or exc})")
            change.new = change.old = None
        return left


def _describe_live(
    root: str, current: str, target: str, plan: list[_Planned], now: tuple[dict[str, Any], str]
) -> tuple[str, str]:
    """What the node is on before the restore: (a deployment id or '', words for the messages).
    ``now``: the target's manifest and where the release link points."""
    manifest, link_now = now
    if target == current:
        if not plan and link_now == manifest["release_dir"]:
            return current, f"deployment {current}"
        differ = ", ".join(p.entry["path"] for p in plan) or "the release link"
        return "", f"its files as they were before this call (which differ from deployment {current} in {differ})"
    if not current:
        return "", "its files as they were before this call (no deployment was current)"
    try:
        manifest, contents = _load_deployment(root, current)
        drift = _restore_plan(manifest, contents)
    except DeploymentError:
        return "", f"its files as they were before this call (deployment {current}'s record cannot be read)"
    if drift or link_now != manifest["release_dir"]:
        differ = ", ".join(p.entry["path"] for p in drift) or "the release link"
        return "", f"its files as they were before this call (which differ from deployment {current} in {differ})"
    return current, f"deployment {current}"


def _restore(root: str, target: str, current: str, release_link: str, *, check: bool) -> Outcome:
    """Make the live files and release link those of deployment `target`, then make it current, all
    or nothing (see :class:`_Transaction`). Order of the swap: the managed files, the release link,
    then the records (`current`, `previous`): the records move last, so until the very end they name
    the deployment the node was on."""
    try:
        previous = _link_target(root, PREVIOUS)
        manifest, contents = _load_deployment(root, target)
        release_dir = manifest["release_dir"]
        managed_path(release_link, "release link")
        if any(entry["path"] == release_link for entry in manifest["files"]):
            raise DeploymentError(f"deployment {target} names the release link {release_link} as a managed file")
        if not os.path.isdir(release_dir):
            raise DeploymentError(f"deployment {target} needs release {release_dir}, which is gone")
        plan = _restore_plan(manifest, contents)
        link_now = _read_release_link(release_link)
        link_change = link_now != release_dir
        node_on, before = "", ""
        if not check and (plan or link_change or target != current):
            node_on, before = _describe_live(root, current, target, plan, (manifest, link_now))
    except DeploymentError as exc:
        raise DeploymentError(
            f"{exc}; nothing was changed (the current deployment is still {current or 'none'})"
        ) from exc
    diffs = [
        _file_diff(p.entry["path"], p.live.content, p.content, bool(p.entry.get("secret") or p.live.secret))
        for p in plan
    ]
    files_changed = [p.entry["path"] for p in plan]
    warnings: list[str] = []
    if before:
        txn = _stage(
            root,
            target,
            current,
            previous,
            release_link=release_link,
            release_dir=release_dir,
            plan=plan,
            link_now=link_now,
            before=(node_on, before),
        )
        warnings = _swap(txn, target, before=(node_on, before))
    outcome = Outcome(
        bool(plan) or link_change or target != current,
        target,
        previous if target == current else "",
        _public(manifest),
        files_changed=files_changed,
        release_link_changed=link_change,
        diffs=diffs,
        warnings=warnings,
    )
    if target == current:
        outcome.msg = f"restored deployment {current} (release {release_dir})"
    else:
        outcome.msg = f"rolled back from deployment {current or 'none'} to {target} (release {release_dir})"
    return outcome


def _stage(
    root: str,
    target: str,
    current: str,
    previous: str,
    *,
    release_link: str,
    release_dir: str,
    plan: list[_Planned],
    link_now: str,
    before: tuple[str, str],
) -> _Transaction:
    """Every change staged, in swap order; on a failure the staged temporaries are removed and a
    DeploymentError says that nothing was changed."""
    txn = _Transaction()
    try:
        for p in plan:
            entry = p.entry
            new = None if entry.get("absent") else (p.content, int(entry["mode"], 8), entry["uid"], entry["gid"])
            txn.stage_file(entry["path"], new, p.live)
        if link_now != release_dir:
            txn.stage_link(release_link, release_dir, link_now)
        if target != current:
            txn.stage_link(os.path.join(root, CURRENT), target, current)
            if previous:
                txn.stage_link(os.path.join(root, PREVIOUS), None, previous)
    except (OSError, DeploymentError) as exc:
        txn.discard()
        raise DeploymentError(f"{exc}; nothing was changed: the node is on {before[1]}", node_on=before[0]) from exc
    except BaseException:
        txn.discard()
        raise
    return txn


def _swap(txn: _Transaction, target: str, *, before: tuple[str, str]) -> list[str]:
    """Swap and commit (the warnings: temporaries that could not be removed after success); on any
    failure the node is put back and a DeploymentError says what it is on."""
    try:
        txn.swap()
    except BaseException as exc:
        errors = txn.undo()
        txn.discard()
        if not isinstance(exc, OSError):
            raise
        reason = f"restoring deployment {target} failed: {exc.strerror or exc}" + (
            f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        )
        if not errors:
            raise DeploymentError(
                f"{reason}; every change was undone: the node is on {before[1]}", node_on=before[0]
            ) from exc
        still_new = [c.dest for c in txn.changes if c.swapped]
        if len(still_new) == len(txn.changes):
            raise DeploymentError(
                f"{reason}, after every file was in place, and undoing it failed ({'; '.join(errors)}): "
                f"the node is on deployment {target}",
                node_on=target,
            ) from exc
        raise DeploymentError(
            f"{reason}, and undoing it failed ({'; '.join(errors)}): the node is MIXED: "
            f"{', '.join(still_new)} are those of deployment {target}, everything else is {before[1]}; "
            f"run the rollback again or put the files back by hand",
            mixed=True,
        ) from exc
    return [f"could not remove the temporary {tmp} after the restore" for tmp in txn.discard()]


def query(root: str) -> Outcome:
    """Which deployment is current and which one a rollback would restore."""
    current = _link_target(root, CURRENT) if os.path.isdir(root) else ""
    previous = _link_target(root, PREVIOUS) if os.path.isdir(root) else ""
    manifest = _public(load_manifest(root, current)) if current else {}
    return Outcome(False, current, previous, manifest)
