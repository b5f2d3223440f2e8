# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one check for a path built from outside data (stdlib only; runs on targets and the controller).

Every name that comes from outside the collection (a Hub listing, a commit id, a record on disk,
a deployment manifest, an inventory value) goes through here before it becomes part of a path:

``relative_name`` refuses what is not a plain relative path: empty, absolute, an empty segment
(``a//b``, a trailing ``/``), a ``.`` or ``..`` segment, a backslash, a NUL or another control
character, or a segment longer than the file system allows. The name is returned unchanged, so a
name is either used as given or refused: never silently rewritten into another one.

``confine`` joins such a name to a root and checks, on the real file system, that no existing
part of the result is a symlink that leads out of the root (an attacker's link planted inside
the root counts). It returns the joined path.

``segment`` is ``relative_name`` for a single path component (no ``/``).

``inside`` answers whether a path (after resolving symlinks) lies within a root.

``open_regular`` opens such a name under a root for reading without following any symlink below
the root (each directory is opened with ``O_NOFOLLOW`` relative to the one above, so a link swapped
in after a check cannot redirect it) and without blocking: the name is looked at with ``lstat``
first and opened with ``O_NONBLOCK`` only when it is a regular file, then checked again on the open
descriptor. A symlink, a directory, a FIFO, a socket or a device is refused.

Errors are ``PathError`` (a ``ValueError``) whose message names what was checked and why it
was refused.
"""

from __future__ import annotations

import errno
import os
import stat

# longest name of one path component on Linux file systems (NAME_MAX)
NAME_MAX = 255


class PathError(ValueError):
    """A name or path from outside data that may not be used."""


def _segment_why_not(part: str) -> str | None:
    if part == "":
        return "has an empty segment"
    if part in (".", ".."):
        return f"has a '{part}' segment"
    if len(part.encode("utf-8", "surrogateescape")) > NAME_MAX:
        return f"has a segment longer than {NAME_MAX} bytes"
    return None


def _why_not(name: object) -> str | None:
    if not isinstance(name, str):
        return f"is a {type(name).__name__}, not a string"
    whole = (
        (name == "", "is empty"),
        (any(ord(c) < 0x20 or ord(c) == 0x7F for c in name), "contains a control character"),
        ("\\" in name, "contains a backslash"),
        (name.startswith("/"), "is absolute"),
    )
    for refused, why in whole:
        if refused:
            return why
    return next((why for why in map(_segment_why_not, name.split("/")) if why), None)


def relative_name(name: object, what: str) -> str:
    """``name`` if it is a plain relative path (see the module's text), else ``PathError``."""
    why = _why_not(name)
    if why is not None:
        raise PathError(f"{what} {name!r} {why}: only a relative path without '.', '..' or empty segments is accepted")
    return name  # type: ignore[return-value]


def segment(name: object, what: str) -> str:
    """``name`` if it is one plain path component, else ``PathError``."""
    relative_name(name, what)
    if "/" in name:  # type: ignore[operator]
        raise PathError(f"{what} {name!r} contains '/': a single path component is expected")
    return name  # type: ignore[return-value]


def inside(root: str, path: str) -> bool:
    """Whether ``path``, symlinks resolved, is ``root`` or lies below it (``root`` resolved too)."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    return real == real_root or real.startswith(real_root.rstrip("/") + "/")


def confine(root: str, name: object, what: str) -> str:
    """``root``/``name`` after checking ``name`` (``relative_name``) and that no existing part of
    the result leads out of ``root`` through a symlink; else ``PathError``."""
    if not isinstance(root, str) or not os.path.isabs(root):
        raise PathError(f"the root for {what} must be an absolute path, got {root!r}")
    rel = relative_name(name, what)
    path = os.path.join(root, rel)
    # the deepest part that exists decides where the rest would land
    probe = path
    while not os.path.lexists(probe) and probe != root:
        probe = os.path.dirname(probe)
    if not inside(root, probe):
        raise PathError(f"{what} {rel!r} leads out of {root} through a symlink ({probe} -> {os.path.realpath(probe)})")
    return path


# the kinds of file that stat tells apart by ``st_mode``, each with its noun in messages
FILE_KINDS = (
    (stat.S_ISREG, "regular file"),
    (stat.S_ISDIR, "directory"),
    (stat.S_ISLNK, "symlink"),
    (stat.S_ISFIFO, "FIFO"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
)


def file_kind(mode: int) -> str | None:
    """The noun of :data:`FILE_KINDS` for a file of ``mode`` (``st_mode``), or None for a kind it does not name."""
    return next((noun for test, noun in FILE_KINDS if test(mode)), None)


def kind_of(mode: int) -> str:
    """What a file of ``mode`` (``st_mode``) is, in words ("a regular file", "a FIFO", ...)."""
    noun = file_kind(mode)
    return f"a {noun}" if noun else "not a regular file"


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def open_regular(root: str, name: object, what: str) -> int:
    """A read-only descriptor of the regular file ``root``/``name`` (see the module's text).

    ``name`` is checked with ``relative_name``; ``root`` itself may be reached through symlinks
    (it is the caller's choice), nothing below it is followed. ``PathError`` names a part that is a
    symlink or not a directory, or a last part that is not a regular file; a missing part raises
    ``FileNotFoundError``; other OS errors pass through.
    """
    rel = relative_name(name, what)
    parts = rel.split("/")
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for depth, part in enumerate(parts[:-1], start=1):
            try:
                sub = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                where = "/".join(parts[:depth])
                raise PathError(
                    f"{what} {rel!r}: {where} is a symlink or not a directory: refused, never followed"
                ) from exc
            os.close(fd)
            fd = sub
        mode = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False).st_mode
        if not stat.S_ISREG(mode):
            raise PathError(f"{what} {rel!r} is {kind_of(mode)}, not a regular file: refused, never opened")
        try:
            found = os.open(parts[-1], _FILE_FLAGS, dir_fd=fd)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            raise PathError(f"{what} {rel!r} became a symlink: refused, never followed") from exc
        mode = os.fstat(found).st_mode
        if not stat.S_ISREG(mode):
            os.close(found)
            raise PathError(f"{what} {rel!r} is {kind_of(mode)}, not a regular file: refused")
        return found
    finally:
        os.close(fd)
