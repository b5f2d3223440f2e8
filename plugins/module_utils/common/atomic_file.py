# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Crash-safe file and symlink replacement (stdlib only; runs on targets and the controller).

The one place the collection writes a file or repoints a link in place:

``replace_file`` writes the new bytes to a temporary file in the destination's directory,
fsyncs it, gives it the mode and owner asked for, renames it over the destination and fsyncs
the directory, so that after a crash or power loss the file is either the old or the new one,
never a mix or empty. Any OS error (EROFS, EFBIG, ENOSPC, EACCES, ...) removes the temporary
file and is raised as ``FileWriteError`` whose message names the path and the reason.

``swap_symlink`` points a link at a new target the same way: a new link under a temporary name,
renamed over the old one (there is never a moment without the link), then the directory fsynced.

``stage_file`` and ``stage_symlink`` are the first half of each: the new file (fsynced, with
its mode and owner) or link under a temporary name in the destination's directory, returned for
the caller to rename into place with ``os.replace`` later, so that several files can be made
ready before any of them changes (``sglang_deployment``'s all-or-nothing restore).

``fsync_dir`` makes a rename in a directory durable where the file system supports it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import tempfile
from collections.abc import Iterator
from typing import Any

# fsync on a directory is refused by some file systems (FUSE, for example PVE's pmxcfs, answers
# EINVAL or ENOSYS): the rename is then as durable as that file system makes it.
_DIR_FSYNC_UNSUPPORTED = frozenset({errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBADF})


class FileWriteError(OSError):
    """A file or link could not be replaced; the message names the path and the reason.

    An ``OSError`` (its ``errno`` is the one of the failed call), so that callers which handle
    OS errors keep handling it; ``str()`` is the message.
    """

    def __init__(self, message: str, errno_: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno_


def fsync_dir(directory: str) -> None:
    """fsync ``directory`` so a rename in it survives a crash (ignored where unsupported)."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in _DIR_FSYNC_UNSUPPORTED:
            raise
    finally:
        os.close(fd)


def _describe(exc: OSError) -> str:
    return exc.strerror or str(exc)


@contextlib.contextmanager
def _temporary(failure: str) -> Iterator[list[str]]:
    """Around making a temporary file or link and renaming it into place: the caller appends the
    temporary's path to the yielded list and clears it once renamed. Whatever is still listed when
    the block ends (an error, an interrupt) is removed; an OS error becomes FileWriteError("failure: reason")."""
    pending: list[str] = []
    try:
        yield pending
    except OSError as exc:
        raise FileWriteError(f"{failure}: {_describe(exc)}", exc.errno) from exc
    finally:
        for tmp in pending:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _write_fd(fd: int, data: bytes, mode: int, uid: int | None, gid: int | None) -> None:
    """Write all of ``data``, fsync, set owner and mode, close."""
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
        if uid is not None or gid is not None:
            os.fchown(fd, -1 if uid is None else uid, -1 if gid is None else gid)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def replace_file(path: str, data: bytes, **options: Any) -> None:
    """Atomically replace (or create) ``path`` with ``data``; see the module docstring. ``options``:
    those of :func:`stage_file` (mode, uid, gid, prefix)."""
    tmp = stage_file(path, data, **options)
    with _temporary(f"cannot write {path}") as pending:
        pending.append(tmp)
        os.replace(tmp, path)
        pending.clear()
        fsync_dir(os.path.dirname(os.path.abspath(path)))


def stage_file(
    path: str,
    data: bytes,
    *,
    mode: int = 0o644,
    uid: int | None = None,
    gid: int | None = None,
    prefix: str = ".gpufleet.",
) -> str:
    """``data`` in a new temporary file next to ``path`` (fsynced, mode and owner set): its path.

    ``path`` itself is not touched; ``os.replace(returned, path)`` makes it the new ``path``. On
    error nothing is left behind and ``FileWriteError`` names ``path``.
    """
    directory = os.path.dirname(os.path.abspath(path))
    with _temporary(f"cannot write {path}") as pending:
        fd, tmp = tempfile.mkstemp(prefix=f"{prefix}{os.path.basename(path)}.", suffix=".tmp", dir=directory)
        pending.append(tmp)
        _write_fd(fd, data, mode, uid, gid)
        pending.clear()
    return tmp


def stage_symlink(target: str, link: str, *, prefix: str = ".gpufleet.") -> str:
    """A new link to ``target`` under a fresh temporary name next to ``link``: its path.

    ``link`` itself is not touched; ``os.replace(returned, link)`` repoints it. On error nothing
    is left behind and ``FileWriteError`` names both.
    """
    directory = os.path.dirname(os.path.abspath(link))
    with _temporary(f"cannot point {link} at {target}"):
        attempts = 0
        while True:
            tmp = os.path.join(directory, f"{prefix}{os.path.basename(link)}.{secrets.token_hex(6)}.tmp")
            try:
                os.symlink(target, tmp)
            except FileExistsError:
                attempts += 1
                if attempts >= 100:
                    raise
                continue
            return tmp


def swap_symlink(target: str, link: str, *, prefix: str = ".gpufleet.") -> bool:
    """Point ``link`` at ``target`` atomically (creating it if missing); False when it already did.

    The new link is made under a temporary name in ``link``'s directory and renamed over ``link``;
    on error the temporary link is removed, ``link`` is as it was, and ``FileWriteError`` names both.
    """
    try:
        if os.readlink(link) == target:
            return False
    except OSError:
        pass  # missing, or not a link: replaced below
    directory = os.path.dirname(os.path.abspath(link))
    tmp = os.path.join(directory, f"{prefix}{os.path.basename(link)}.{os.getpid()}.tmp")
    with _temporary(f"cannot point {link} at {target}") as pending:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        pending.append(tmp)
        os.symlink(target, tmp)
        os.replace(tmp, link)
        pending.clear()
        fsync_dir(directory)
    return True
