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
restores the previous deployment's files byte for byte (temp file + fsync + rename), points the
release link back at its release, makes it current and forgets `previous`, so a second rollback
in a row has nothing to go back to and says so.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.sglang.plugins.module_utils.atomic_file import (
    FileWriteError,
    fsync_dir,
    replace_file,
    swap_symlink,
)

MANIFEST = "manifest.json"
CURRENT = "current"
PREVIOUS = "previous"
MAX_FILE_BYTES = 1 << 20  # the managed files are small text files; refuse anything larger
SCHEMA = 1


class DeploymentError(Exception):
    """A named failure: the message says what is wrong and that nothing was changed."""


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


def read_file_state(path: str, secret: bool = False) -> FileState:
    """Read one managed file; a missing file is recorded as absent, a symlink or a non-file refused."""
    if not os.path.isabs(path):
        raise DeploymentError(f"managed file {path!r} is not an absolute path")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return FileState(path=path, absent=True, secret=secret)
    except OSError as exc:
        raise DeploymentError(f"cannot read managed file {path}: {exc.strerror}") from exc
    if not stat.S_ISREG(st.st_mode):
        raise DeploymentError(f"managed file {path} is not a regular file (a link or a device); refusing to record it")
    if st.st_size > MAX_FILE_BYTES:
        raise DeploymentError(f"managed file {path} is {st.st_size} bytes, over the {MAX_FILE_BYTES}-byte limit")
    try:
        with open(path, "rb") as handle:
            content = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise DeploymentError(f"cannot read managed file {path}: {exc.strerror}") from exc
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


def _link_target(root: str, name: str) -> str:
    """The deployment id a link points at, or '' when there is none."""
    try:
        return os.path.basename(os.readlink(os.path.join(root, name)))
    except FileNotFoundError:
        return ""
    except OSError as exc:
        raise DeploymentError(f"cannot read {os.path.join(root, name)}: {exc.strerror}") from exc


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


def load_manifest(root: str, dep_id: str) -> dict[str, Any]:
    """Read and check a deployment's manifest and its stored copies (sha256)."""
    path = os.path.join(root, dep_id, MANIFEST)
    try:
        with open(path, encoding="utf-8") as handle:
            manifest = json.load(handle)
    except FileNotFoundError as exc:
        raise DeploymentError(f"deployment {dep_id}: {path} is missing") from exc
    except (OSError, ValueError) as exc:
        raise DeploymentError(f"deployment {dep_id}: {path} is unreadable or not JSON ({exc})") from exc
    if not isinstance(manifest, dict) or manifest.get("schema") != SCHEMA or manifest.get("id") != dep_id:
        raise DeploymentError(f"deployment {dep_id}: {path} is not a gpufleet deployment manifest (schema {SCHEMA})")
    for entry in manifest.get("files", []):
        if entry.get("absent"):
            continue
        stored = os.path.join(root, dep_id, "files", entry["stored"])
        try:
            with open(stored, "rb") as handle:
                digest = hashlib.sha256(handle.read()).hexdigest()
        except OSError as exc:
            raise DeploymentError(
                f"deployment {dep_id}: stored copy {stored} of {entry['path']} is unreadable ({exc.strerror})"
            ) from exc
        if digest != entry["sha256"]:
            raise DeploymentError(
                f"deployment {dep_id}: stored copy of {entry['path']} does not match its sha256 (corrupted)"
            )
    return manifest


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
    exists = os.path.isfile(os.path.join(root, dep_id, MANIFEST))
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
            f"no previous deployment to roll back to under {root} (current: {current or 'none'}); nothing was changed"
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


def _restore_plan(
    root: str, target: str, manifest: dict[str, Any]
) -> tuple[list[tuple[dict[str, Any], bytes]], list[dict[str, str]]]:
    """The files of deployment ``target`` that differ from the live ones, with their stored content,
    and the diffs (changes nothing)."""
    plan: list[tuple[dict[str, Any], bytes]] = []
    diffs: list[dict[str, str]] = []
    for entry in manifest["files"]:
        live = read_file_state(entry["path"], bool(entry.get("secret")))
        content = b""
        if not entry.get("absent"):
            with open(os.path.join(root, target, "files", entry["stored"]), "rb") as handle:
                content = handle.read()
        want = {k: v for k, v in entry.items() if k not in ("stored", "secret")}
        if live.key() == want:
            continue
        plan.append((entry, content))
        diffs.append(_file_diff(entry["path"], live.content, content, bool(entry.get("secret") or live.secret)))
    return plan, diffs


def _apply_plan(plan: list[tuple[dict[str, Any], bytes]]) -> None:
    """Write (or remove, where the deployment had no such file) each planned file."""
    for entry, content in plan:
        if entry.get("absent"):
            try:
                os.unlink(entry["path"])
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise DeploymentError(f"cannot remove {entry['path']}: {exc.strerror}") from exc
        else:
            atomic_write(entry["path"], content, int(entry["mode"], 8), entry["uid"], entry["gid"])


def _restore(root: str, target: str, current: str, release_link: str, *, check: bool) -> Outcome:
    """Make the live files and release link those of deployment `target`, then make it current."""
    previous = _link_target(root, PREVIOUS)
    manifest = load_manifest(root, target)
    release_dir = manifest["release_dir"]
    if not os.path.isdir(release_dir):
        raise DeploymentError(f"deployment {target} needs release {release_dir}, which is gone; nothing was changed")
    plan, diffs = _restore_plan(root, target, manifest)
    try:
        link_now = os.readlink(release_link)
    except OSError:
        link_now = ""
    link_change = link_now != release_dir
    if not check:
        _apply_plan(plan)
        if link_change:
            _atomic_symlink(release_dir, release_link)
        if target != current:
            _atomic_symlink(target, os.path.join(root, CURRENT))
            os.unlink(os.path.join(root, PREVIOUS))
            fsync_dir(root)
    if target == current:
        return Outcome(
            bool(plan) or link_change,
            current,
            previous,
            _public(manifest),
            files_changed=[entry["path"] for entry, _content in plan],
            release_link_changed=link_change,
            diffs=diffs,
            msg=f"restored deployment {current} (release {release_dir})",
        )
    return Outcome(
        True,
        target,
        "",
        _public(manifest),
        files_changed=[entry["path"] for entry, _content in plan],
        release_link_changed=link_change,
        diffs=diffs,
        msg=f"rolled back from deployment {current or 'none'} to {target} (release {release_dir})",
    )


def query(root: str) -> Outcome:
    """Which deployment is current and which one a rollback would restore."""
    current = _link_target(root, CURRENT) if os.path.isdir(root) else ""
    previous = _link_target(root, PREVIOUS) if os.path.isdir(root) else ""
    manifest = _public(load_manifest(root, current)) if current else {}
    return Outcome(False, current, previous, manifest)
