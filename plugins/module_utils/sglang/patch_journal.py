# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Pure functions of the patch journal (stdlib only; runs on targets).

The journal is a directory next to a release: before a patch is applied, every file it will
touch is copied into ``files/`` and listed in ``journal.json`` (``existed: false`` for a file the
patch creates, with the directories it will create). While ``journal.json`` exists the tree is
possibly half-patched; the next run restores the listed files from it (or removes the created
ones) and only then removes the journal.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

JOURNAL_FILE = "journal.json"
FILES_DIR = "files"
SCRATCH_DIR = "scratch"
JOURNAL_VERSION = 1


class JournalError(ValueError):
    """A patch or journal that cannot be used safely; the message says which and why."""


def _strip_path(raw: str, strip: int, where: str) -> str:
    path = raw.split("\t", 1)[0].strip()
    if path.startswith('"'):
        raise JournalError(f"{where}: quoted file name {path!r} is not supported")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if path.startswith("/") and strip == 0:
        raise JournalError(f"{where}: absolute path {path!r}")
    if len(parts) <= strip:
        raise JournalError(f"{where}: path {path!r} has no component left after stripping {strip}")
    rel = parts[strip:]
    if ".." in rel:
        raise JournalError(f"{where}: path {path!r} leaves the patched tree ('..')")
    return "/".join(rel)


def patch_targets(text: str, strip: int = 1) -> list[str]:
    """Relative paths of the files a unified diff touches, after stripping ``strip`` components.

    A file deleted by the patch (``+++ /dev/null``) is named by its ``---`` line. Absolute paths
    and ``..`` are refused: a patch must stay inside the tree it is applied to.
    """
    if strip < 0:
        raise JournalError(f"strip must be >= 0, got {strip}")
    targets: list[str] = []
    old: str | None = None
    for lineno, line in enumerate(text.splitlines(), start=1):
        if line.startswith("--- "):
            old = line[4:]
        elif line.startswith("+++ ") and old is not None:
            new = line[4:]
            raw = old if new.split("\t", 1)[0].strip() == "/dev/null" else new
            path = _strip_path(raw, strip, f"patch line {lineno}")
            if path not in targets:
                targets.append(path)
            old = None
    if not targets:
        raise JournalError("the patch names no file (no '--- '/'+++ ' header pair)")
    return targets


def missing_dirs(relpath: str, exists: Any) -> list[str]:
    """Ancestor directories of ``relpath`` that ``exists(dir)`` says are absent, deepest last."""
    missing = []
    parent = posixpath.dirname(relpath)
    while parent:
        if exists(parent):
            break
        missing.append(parent)
        parent = posixpath.dirname(parent)
    return list(reversed(missing))


def new_entries(
    journal: Mapping[str, Any], targets: Sequence[str], existing: Iterable[str], absent_dirs: Mapping[str, list[str]]
) -> list[dict[str, Any]]:
    """Entries to add to ``journal`` for ``targets`` not listed yet (the first backup wins)."""
    listed = {entry["path"] for entry in journal.get("entries", [])}
    present = set(existing)
    return [
        {"path": path, "existed": path in present, "created_dirs": [] if path in present else absent_dirs.get(path, [])}
        for path in targets
        if path not in listed
    ]


def dump_journal(entries: Sequence[Mapping[str, Any]]) -> bytes:
    """``journal.json`` contents."""
    return (
        json.dumps({"version": JOURNAL_VERSION, "entries": list(entries)}, indent=1, sort_keys=True) + "\n"
    ).encode()


def load_journal(data: bytes, where: str) -> dict[str, Any]:
    """Parse ``journal.json``; JournalError naming ``where`` when it is not one we wrote."""
    try:
        journal = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise JournalError(f"{where} is not a patch journal: {exc}") from exc
    if not isinstance(journal, dict) or journal.get("version") != JOURNAL_VERSION:
        raise JournalError(f"{where} is not a version {JOURNAL_VERSION} patch journal")
    entries = journal.get("entries")
    if not isinstance(entries, list):
        raise JournalError(f"{where} has no list of entries")
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str) or "existed" not in entry:
            raise JournalError(f"{where}: bad entry {entry!r}")
        parts = entry["path"].split("/")
        if entry["path"].startswith("/") or ".." in parts or "" in parts:
            raise JournalError(f"{where}: entry path {entry['path']!r} leaves the patched tree")
        for directory in entry.get("created_dirs", []):
            if not isinstance(directory, str) or directory.startswith("/") or ".." in directory.split("/"):
                raise JournalError(f"{where}: created directory {directory!r} leaves the patched tree")
    return journal
