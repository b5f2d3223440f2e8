# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The sweep journal on the node (stdlib only): written before the first switch to a candidate, kept
while candidates run, removed only once the node runs its recorded deployment again.

A journal found at the start of a run means an earlier sweep did not finish (Ctrl-C, a lost
connection, a killed controller): the node may run a candidate's options. ``tune.yml`` then restores
the recorded deployment (module sglang_deployment's ``restored``) and restarts the server before
anything else. docs/tuning.md describes the sequence.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

VERSION = 1


class JournalError(ValueError):
    """A journal that cannot be read or written; the message names the file."""


def read(path: str) -> dict[str, Any] | None:
    """The journal, or None when there is none."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise JournalError(f"cannot read the sweep journal {path}: {exc.strerror}") from exc
    try:
        data = json.loads(text)
    except ValueError:
        # a torn write cannot happen (rename), but a hand-edited file can: it still means "restore"
        return {"version": VERSION, "state": "unreadable", "original": "", "candidate": ""}
    if not isinstance(data, dict):
        return {"version": VERSION, "state": "unreadable", "original": "", "candidate": ""}
    return data


def write(path: str, data: dict[str, Any]) -> None:
    """Write the journal atomically (temp file in the same directory, fsync, rename), 0600."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tune-journal.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(dict(data, version=VERSION), handle, sort_keys=True)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def remove(path: str) -> bool:
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


def install(path: str, content: bytes, like: str) -> None:
    """Write ``content`` to ``path`` atomically with the mode and owner of the file ``like``."""
    st = os.stat(like)
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tune-candidate.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, st.st_mode & 0o7777)
        os.chown(tmp, st.st_uid, st.st_gid)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
