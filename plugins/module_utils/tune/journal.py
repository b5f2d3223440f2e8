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
from typing import Any

from ansible_collections.gpufleet.sglang.plugins.module_utils.common.atomic_file import replace_file

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
    """Write the journal crash-safely (atomic_file.replace_file), 0600, creating its directory (0700)."""
    os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
    text = json.dumps(dict(data, version=VERSION), sort_keys=True) + "\n"
    replace_file(path, text.encode("utf-8"), mode=0o600, prefix=".tune-journal.")


def remove(path: str) -> bool:
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


def install(path: str, content: bytes, like: str) -> None:
    """Write ``content`` to ``path`` crash-safely with the mode and owner of the file ``like``."""
    st = os.stat(like)
    replace_file(path, content, mode=st.st_mode & 0o7777, uid=st.st_uid, gid=st.st_gid, prefix=".tune-candidate.")
