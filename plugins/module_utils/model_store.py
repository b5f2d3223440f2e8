# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The model store's rules, as small pure functions (stdlib only; runs on the Proxmox host).

Layout of a store:

    <store>/<org>/<repo>/<commit>/            one verified snapshot of a repository
    <store>/<org>/<repo>/<commit>/.gpufleet-model.json   what was verified: every file's size and digest
    <store>/<org>/<repo>/<commit>.partial/    a download in progress (resumed by the next run)
    <store>/current/<name> -> ../<org>/<repo>/<commit>   the snapshot each declared model name serves
    <store>/.gpufleet/refs.json               branch/tag -> commit, resolved once and recorded
    <store>/.gpufleet/progress-<name>.json    bytes done / total / rate while a download runs

A file is verified against the Hub's metadata: the sha256 of files stored in LFS, the git blob id
(sha1 of "blob <size>\\0" + content) of the others, and always the size.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from typing import Any

from ansible_collections.gpufleet.sglang.plugins.module_utils.atomic_file import replace_file, swap_symlink

REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
MARKER = ".gpufleet-model.json"
CHUNK = 8 * 1024 * 1024


class ModelStoreError(Exception):
    """A named failure of the model store."""


def check_model(model: dict[str, Any]) -> list[str]:
    """What is wrong with one declared model (empty when it is fine)."""
    errors = []
    name = str(model.get("name", ""))
    label = name or "<unnamed>"
    if not NAME_RE.match(name):
        errors.append(f"model {label!r}: name must match {NAME_RE.pattern}")
    source = model.get("source", "hub")
    if source not in ("hub", "local"):
        errors.append(f"model {label}: source {source!r} is not one of hub, local")
    if not REPO_RE.match(str(model.get("repo", ""))):
        errors.append(f"model {label}: repo {model.get('repo')!r} is not '<org>/<name>'")
    revision = str(model.get("revision", ""))
    if not revision or any(c in revision for c in "\n\r\t ") or revision.startswith("-") or ".." in revision:
        errors.append(f"model {label}: revision {revision!r} is not a branch, tag or commit")
    if source == "local":
        if not COMMIT_RE.match(revision):
            errors.append(f"model {label}: a local source needs revision set to the 40-hex commit it holds")
        if not str(model.get("local_path", "")).startswith("/"):
            errors.append(f"model {label}: a local source needs local_path (an absolute directory)")
    return errors


def is_commit(revision: str) -> bool:
    return bool(COMMIT_RE.match(revision))


def snapshot_dir(store: str, repo: str, commit: str) -> str:
    return os.path.join(store, repo, commit)


def current_link(store: str, name: str) -> str:
    return os.path.join(store, "current", name)


def git_blob_oid_and_sha256(path: str) -> tuple[str, str, int]:
    """The git blob id, the sha256 and the size of a file, read once in chunks."""
    size = os.path.getsize(path)
    sha1 = hashlib.sha1(b"blob %d\0" % size)
    sha256 = hashlib.sha256()
    with open(path, "rb") as handle:
        while True:
            chunk = handle.read(CHUNK)
            if not chunk:
                break
            sha1.update(chunk)
            sha256.update(chunk)
    return sha1.hexdigest(), sha256.hexdigest(), size


def verify_file(base: str, entry: dict[str, Any], full: bool = True) -> str:
    """'' when the file matches its entry; else why not. Quick mode checks the size only."""
    path = os.path.join(base, entry["path"])
    try:
        size = os.path.getsize(path)
    except OSError:
        return "missing"
    if size != entry["size"]:
        return f"size {size} != {entry['size']}"
    if not full:
        return ""
    oid, sha256, _size = git_blob_oid_and_sha256(path)
    if entry.get("sha256"):
        return "" if sha256 == entry["sha256"] else f"sha256 {sha256[:12]}... != {entry['sha256'][:12]}..."
    if entry.get("oid"):
        return "" if oid == entry["oid"] else f"git blob id {oid[:12]}... != {entry['oid'][:12]}..."
    return ""


def verify_all(base: str, entries: list[dict[str, Any]], full: bool = True) -> tuple[dict[str, str], int, float]:
    """(failures by path, bytes checked, seconds) for every entry."""
    began = time.monotonic()
    failures = {}
    checked = 0
    for entry in entries:
        why = verify_file(base, entry, full)
        if why:
            failures[entry["path"]] = why
        else:
            checked += entry["size"]
    return failures, checked, time.monotonic() - began


def space_needed(base: str, entries: list[dict[str, Any]]) -> int:
    """Bytes still to download: every entry not yet present at its full size."""
    needed = 0
    for entry in entries:
        path = os.path.join(base, entry["path"])
        have = os.path.getsize(path) if os.path.isfile(path) else 0
        needed += entry["size"] if have != entry["size"] else 0
    return needed


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} TiB"


def check_space(name: str, needed: int, free: int, reserve: int) -> None:
    """Refuse, with the numbers, when the download would not fit (keeping `reserve` bytes free)."""
    if needed + reserve > free:
        raise ModelStoreError(
            f"model {name}: not enough space: the download needs {human(needed)} ({needed} bytes) "
            f"plus a reserve of {human(reserve)}, the store has {human(free)} ({free} bytes) free; "
            "nothing was downloaded"
        )


def read_json(path: str, default: Any) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        return default
    except (OSError, ValueError) as exc:
        raise ModelStoreError(f"{path} is unreadable or not JSON ({exc}); remove it to start over") from exc


def write_json(path: str, data: Any) -> None:
    """Atomic JSON write (mode 0644), creating the directory: :func:`atomic_file.replace_file`."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    replace_file(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8"), mode=0o644)


def point_link(link: str, target: str) -> bool:
    """Point link at target (relative), creating its directory; True when it changed."""
    os.makedirs(os.path.dirname(link), exist_ok=True)
    return swap_symlink(target, link)


def bytes_on_disk(base: str) -> int:
    """Bytes written so far under a download directory (finished and .incomplete files)."""
    total = 0
    for dirpath, _dirs, files in os.walk(base):
        for name in files:
            if name.endswith((".lock", ".metadata")):
                continue
            try:
                total += os.path.getsize(os.path.join(dirpath, name))
            except OSError:
                continue
    return total
