# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a node's files, directories and accounts are, against what a role wants (stdlib only; runs on targets).

A role that writes a dozen files and directories sends a dozen modules to the node on every run,
each about 0.2 CPU s there (docs/connection.md, "Lever C"), even when nothing changed. ``node_state``
answers in one pass whether every one of them is already as the role would leave it; only then does
the role skip its writing tasks. Whatever is not provably as wanted is drift, and the role's normal
tasks run and fix it, so a changed file is found as before.

``check_wants`` schema-checks the wants (they come from an inventory through a role): absolute
paths without control characters or ``..``, a known state, an octal mode, a 64-hex sha256, owner
and group names or numeric ids. It returns them normalised or raises ``StateError`` naming the entry and the field.

``observe`` reads one path with ``lstat`` (symlinks are not followed), the keys of
``ansible.builtin.stat`` that roles read: exists, isreg, isdir, islnk, mtime, lnk_target, lnk_source. As
that module, it fails (``OSError``) where a parent is not a directory.

``file_drift`` compares a want with the path as found: the type (a symlink is never the file or the
directory wanted: ``copy`` and ``file`` would act on it), the owner and group by name or numeric id
(as ``ansible.builtin.file`` takes them: digits are the id), the mode bits
and, for a file, the sha256 of its bytes. It returns the reasons, each naming the path.

``account_drift`` compares a wanted user (primary group, supplementary groups where the node has
them, home that exists, shell) with the passwd and group databases as read.

``read_state`` does all of it on the node: the observed paths and the reasons, one list.
"""

from __future__ import annotations

import errno
import grp
import hashlib
import os
import pwd
import re
import stat

STATES = ("file", "directory", "absent")
# a file larger than this is not hashed: reported as drift (the writing task then compares it itself)
MAX_HASHED_BYTES = 16 * 1024 * 1024
_MODE = re.compile(r"^0?[0-7]{3,4}\Z")
_SHA256 = re.compile(r"^[0-9a-f]{64}\Z")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?\Z")
# a file's owner or group may also be a numeric id, as ansible.builtin.file takes it (an unprivileged
# container's root is uid 100000 on its Proxmox host, a uid with no name there)
_ID = re.compile(r"^(0|[1-9][0-9]{0,9})\Z")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class StateError(ValueError):
    """A want that cannot be checked; the message names the entry and the field."""


def _path(value: object, where: str) -> str:
    if not isinstance(value, str) or not value.startswith("/"):
        raise StateError(f"{where}: path must be an absolute path, got {value!r}")
    if _CONTROL.search(value) or "/../" in value + "/" or "/./" in value + "/":
        raise StateError(f"{where}: path {value!r} has a control character or a '.' or '..' segment")
    return value


def _name(value: object, where: str, field: str) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise StateError(f"{where}: {field} must be a user or group name, got {value!r}")
    return value


def _owner(value: object, where: str, field: str) -> str | None:
    """A file's wanted owner or group: None (not checked), a numeric id as digits, or a name."""
    if value is None or (isinstance(value, str) and _ID.match(value)):
        return value
    return _name(value, where, field)


def _flag(value: object, where: str, field: str) -> bool:
    if not isinstance(value, bool):
        raise StateError(f"{where}: {field} must be true or false, got {value!r}")
    return value


def check_wants(
    files: list, users: list, groups: list, paths: list
) -> tuple[list[dict], list[dict], list[str], list[str]]:
    """The wants and the paths to read, checked and normalised (mode as an int), or ``StateError``."""
    out_files: list[dict] = []
    for i, want in enumerate(files):
        where = f"files[{i}]"
        if not isinstance(want, dict):
            raise StateError(f"{where}: must be a dict, got {type(want).__name__}")
        path = _path(want.get("path"), where)
        state = want.get("state", "file")
        if state not in STATES:
            raise StateError(f"{where} ({path}): state must be one of {', '.join(STATES)}, got {state!r}")
        item: dict = {"path": path, "state": state}
        if state != "absent":
            mode = want.get("mode")
            if not isinstance(mode, str) or not _MODE.match(mode):
                raise StateError(f"{where} ({path}): mode must be an octal string such as '0644', got {mode!r}")
            item["mode"] = int(mode, 8)
            # None: not checked (a writing task that does not set it leaves it as it is)
            for field in ("owner", "group"):
                item[field] = _owner(want.get(field), f"{where} ({path})", field)
        if state == "file":
            digest = want.get("sha256")
            if not isinstance(digest, str) or not _SHA256.match(digest):
                raise StateError(f"{where} ({path}): sha256 must be 64 lowercase hex digits")
            item["sha256"] = digest
        out_files.append(item)
    out_users: list[dict] = []
    for i, want in enumerate(users):
        where = f"users[{i}]"
        if not isinstance(want, dict):
            raise StateError(f"{where}: must be a dict, got {type(want).__name__}")
        name = _name(want.get("name"), where, "name")
        extra = want.get("groups_where_present", [])
        if not isinstance(extra, list):
            raise StateError(f"{where} ({name}): groups_where_present must be a list")
        shell = want.get("shell")
        out_users.append(
            {
                "name": name,
                # None: the primary group is not checked (a user created without naming one)
                "group": None if want.get("group") is None else _name(want.get("group"), f"{where} ({name})", "group"),
                "groups_where_present": [_name(g, f"{where} ({name})", "groups_where_present") for g in extra],
                "home": _path(want.get("home"), f"{where} ({name}) home"),
                "shell": _path(shell, f"{where} ({name}) shell"),
                "home_exists": _flag(want.get("home_exists", True), f"{where} ({name})", "home_exists"),
            }
        )
    out_groups = [_name(g, f"groups[{i}]", "name") for i, g in enumerate(groups)]
    out_paths = [_path(p, f"paths[{i}]") for i, p in enumerate(paths)]
    return out_files, out_users, out_groups, out_paths


def observe(path: str) -> dict:
    """``lstat`` of ``path`` as the keys of ``ansible.builtin.stat`` (follow: false) that roles read."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return {"exists": False}
    seen = {
        "exists": True,
        "isreg": stat.S_ISREG(st.st_mode),
        "isdir": stat.S_ISDIR(st.st_mode),
        "islnk": stat.S_ISLNK(st.st_mode),
    }
    seen["mtime"] = st.st_mtime
    if seen["islnk"]:
        seen["lnk_target"] = os.readlink(path)
        seen["lnk_source"] = os.path.realpath(path)
    return seen


def _sha256(path: str) -> str | None:
    """sha256 of a regular file's bytes, None when it is larger than MAX_HASHED_BYTES."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            size += len(chunk)
            if size > MAX_HASHED_BYTES:
                return None
            digest.update(chunk)
    return digest.hexdigest()


def _type_of(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "special file"


def _same_id(wanted: str, name: str, number: int) -> bool:
    """Whether ``wanted`` (a name, or a numeric id as ``ansible.builtin.file`` takes one) is the owner found."""
    return wanted == name or (_ID.match(wanted) is not None and int(wanted) == number)


def file_drift(
    want: dict, lstat_result: os.stat_result | None, owner: str, group: str, sha256: str | None
) -> list[str]:
    """Why ``want`` is not met by the path as found (``lstat_result`` None: absent), or []."""
    path = want["path"]
    if want["state"] == "absent":
        return [] if lstat_result is None else [f"{path}: exists, wanted absent"]
    if lstat_result is None:
        return [f"{path}: missing, wanted a {want['state']}"]
    found = _type_of(lstat_result.st_mode)
    if found != want["state"]:
        return [f"{path}: is a {found}, wanted a {want['state']}"]
    reasons = []
    owner_ok = want["owner"] is None or _same_id(want["owner"], owner, lstat_result.st_uid)
    group_ok = want["group"] is None or _same_id(want["group"], group, lstat_result.st_gid)
    if not (owner_ok and group_ok):
        reasons.append(f"{path}: owned by {owner}:{group}, wanted {want['owner'] or owner}:{want['group'] or group}")
    if stat.S_IMODE(lstat_result.st_mode) != want["mode"]:
        reasons.append(f"{path}: mode {stat.S_IMODE(lstat_result.st_mode):04o}, wanted {want['mode']:04o}")
    if want["state"] == "file" and sha256 != want["sha256"]:
        reasons.append(f"{path}: content differs" if sha256 is not None else f"{path}: too large to compare")
    return reasons


def account_drift(
    want: dict,
    passwd: tuple | None,
    *,
    primary_group: str | None,
    member_of: list[str],
    existing_groups: list[str],
    home_is_dir: bool,
) -> list[str]:
    """Why the user ``want`` is not as ``ansible.builtin.user`` would leave it (append: true), or [].

    ``passwd`` is the user's passwd entry (None: no such user), ``primary_group`` the name of its gid,
    ``member_of`` the groups listing it as a member, ``existing_groups`` every group on the node.
    """
    name = want["name"]
    if passwd is None:
        return [f"user {name}: missing"]
    reasons = []
    if want["group"] is not None and primary_group != want["group"]:
        reasons.append(f"user {name}: primary group {primary_group}, wanted {want['group']}")
    missing = [
        g for g in want["groups_where_present"] if g in existing_groups and g not in member_of and g != primary_group
    ]
    if missing:
        reasons.append(f"user {name}: not in group(s) {', '.join(missing)}")
    if passwd.pw_dir != want["home"]:
        reasons.append(f"user {name}: home {passwd.pw_dir}, wanted {want['home']}")
    elif want.get("home_exists", True) and not home_is_dir:
        reasons.append(f"user {name}: home {want['home']} is not a directory")
    if passwd.pw_shell != want["shell"]:
        reasons.append(f"user {name}: shell {passwd.pw_shell}, wanted {want['shell']}")
    return reasons


# the entries listed of one directory at most: a directory holding more is an error naming it, not a
# reply of unbounded size (a releases directory holds a few, a pending-restart directory one per container)
MAX_LISTED = 4096


def list_directory(path: str, limit: int = MAX_LISTED) -> list[dict]:
    """The entries of directory ``path`` whose names do not start with a dot, as ``ansible.builtin.find``
    (``hidden: false``, ``recurse: false``, ``follow: false``) sees them: each with ``name``, ``path`` and the
    keys of :func:`observe`, sorted by name. A path that does not exist lists nothing; more than ``limit``
    entries, or a path that is not a directory, is an ``OSError`` naming it."""
    try:
        with os.scandir(path) as entries:
            names = []
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                names.append(entry.name)
                if len(names) > limit:
                    raise OSError(errno.E2BIG, f"more than {limit} entries to list", path)
    except FileNotFoundError:
        return []
    listed = []
    for name in sorted(names):
        full = os.path.join(path, name)
        listed.append({"name": name, "path": full, **observe(full)})
    return listed


def read_state(files: list[dict], users: list[dict], groups: list[str], paths: list[str]) -> dict:
    """Observe ``paths`` and compare the checked wants with the node: {stat, drift}."""

    def user_name(uid: int) -> str:
        try:
            return pwd.getpwuid(uid).pw_name
        except KeyError:
            return str(uid)

    def group_name(gid: int) -> str:
        try:
            return grp.getgrgid(gid).gr_name
        except KeyError:
            return str(gid)

    drift: list[str] = []
    for want in files:
        try:
            found = os.lstat(want["path"])
        except (FileNotFoundError, NotADirectoryError):
            found = None
        digest = None
        if found is not None and want["state"] == "file" and stat.S_ISREG(found.st_mode):
            digest = _sha256(want["path"])
        owner = user_name(found.st_uid) if found is not None else ""
        group = group_name(found.st_gid) if found is not None else ""
        drift += file_drift(want, found, owner, group, digest)
    all_groups = grp.getgrall()
    existing = [g.gr_name for g in all_groups]
    for name in groups:
        if name not in existing:
            drift.append(f"group {name}: missing")
    for want in users:
        try:
            entry = pwd.getpwnam(want["name"])
        except KeyError:
            entry = None
        primary = group_name(entry.pw_gid) if entry is not None else None
        member_of = [g.gr_name for g in all_groups if want["name"] in g.gr_mem]
        home_is_dir = entry is not None and os.path.isdir(entry.pw_dir)
        drift += account_drift(
            want, entry, primary_group=primary, member_of=member_of, existing_groups=existing, home_is_dir=home_is_dir
        )
    return {"stat": {path: observe(path) for path in paths}, "drift": drift}
