# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The record of a container whose restart is pending on its Proxmox host (role proxmox_lxc_gpu,
proxmox_lxc_gpu_restart_changed: rollout): checked before any of it becomes a command's argument.

The role writes `<pending_dir>/<vmid>.json` as root; the SGLang rollout reads it back with the node's
vmid and restarts the container it names. A record is a file on disk: whatever it holds, only a
record of exactly that vmid, a known platform and a container name of the role's own shape passes."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

PLATFORMS = ("proxmox", "lxc")
FIELDS = ("vmid", "hostname", "platform", "config")
# the container names role proxmox_lxc_gpu accepts (tasks/preflight.yml): letters, digits, dashes
HOSTNAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
MAX_BYTES = 4096


class PendingRecordError(ValueError):
    """A pending-restart record that is not one; the message names the file and what is wrong."""


class _DuplicateKeyError(ValueError):
    """A JSON object of the record names a key twice."""


def _object(pairs: list[tuple[str, object]]) -> dict:
    doc = dict(pairs)
    if len(doc) != len(pairs):
        names = [key for key, _value in pairs]
        raise _DuplicateKeyError(sorted({k for k in names if names.count(k) > 1}))
    return doc


def parse_pending_record(text: object, vmid: object, path: str = "the record") -> dict:
    """The checked record (vmid, hostname, platform, config) of container `vmid`, from the file's text."""
    if isinstance(vmid, bool) or not isinstance(vmid, (int, str)) or not re.fullmatch(r"[1-9][0-9]{2,8}", str(vmid)):
        raise PendingRecordError(f"{path}: asked for vmid {vmid!r}, which is not a vmid (100 and up)")
    want = int(vmid)
    if not isinstance(text, str):
        raise PendingRecordError(f"{path}: expected the record's text, got {type(text).__name__}")
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise PendingRecordError(f"{path}: over {MAX_BYTES} bytes, not a pending-restart record")
    try:
        doc = json.loads(text, object_pairs_hook=_object)
    except _DuplicateKeyError as exc:
        # json.loads keeps the last of two equal keys: a planted record could show one vmid and act on another
        raise PendingRecordError(f"{path}: names {exc} more than once") from None
    except ValueError as exc:
        raise PendingRecordError(f"{path}: not JSON ({exc}); remove it, run role proxmox_lxc_gpu again") from None
    if not isinstance(doc, Mapping):
        raise PendingRecordError(f"{path}: expected a JSON object, got {type(doc).__name__}")
    unknown = sorted(str(k) for k in doc if k not in FIELDS)
    missing = [k for k in FIELDS if k not in doc]
    if unknown or missing:
        raise PendingRecordError(f"{path}: fields missing {missing}, unknown {unknown[:5]}")
    got = doc["vmid"]
    if isinstance(got, bool) or not isinstance(got, int) or got != want:
        raise PendingRecordError(f"{path}: names vmid {got!r}, not {want}: it is not this container's record")
    hostname = doc["hostname"]
    if not isinstance(hostname, str) or not HOSTNAME.fullmatch(hostname):
        raise PendingRecordError(f"{path}: hostname {hostname!r} is not a container name (letters, digits, dashes)")
    platform = doc["platform"]
    if platform not in PLATFORMS:
        raise PendingRecordError(f"{path}: platform {platform!r} is not one of {list(PLATFORMS)}")
    config = doc["config"]
    if not isinstance(config, str) or not config.startswith("/") or any(c in config for c in "\x00\n\r"):
        raise PendingRecordError(f"{path}: config {config!r} is not an absolute path")
    return {"vmid": want, "hostname": hostname, "platform": platform, "config": config}


# `pct list` (pve-container, PVE::CLI::pct): a header, then one row per container, printed with
# "%-10s %-10s %-12s %-20s" (VMID, Status, Lock, Name); the lock column is blank when there is none
_PCT_ROW = re.compile(r"([1-9][0-9]{2,8}) +([a-z]+)(?: +[A-Za-z0-9_-]+)*")
_PCT_HEADER = re.compile(r"VMID +Status +Lock +Name")


def running_vmids(text: object, platform: object, containers: object) -> list:
    """The vmids of ``containers`` (the role's list: vmid, hostname) that run, from one read of the host,
    each as the list gives it (an int, or the string of one), in the list's order.

    ``text`` is what ``pct list`` prints (platform proxmox) or ``lxc-ls --running -1`` (platform lxc, one
    running container's name per line). A container the host does not list, or lists in another state, is
    not running. A line that is not of that format is an error naming it, so a change of the command's
    output is seen, not read as "stopped" and acted on.
    """
    if platform not in PLATFORMS:
        raise PendingRecordError(f"platform {platform!r} is not one of {list(PLATFORMS)}")
    if not isinstance(text, str):
        raise PendingRecordError(f"expected the output of the container listing, got {type(text).__name__}")
    if not isinstance(containers, list) or not all(isinstance(c, Mapping) for c in containers):
        raise PendingRecordError("containers must be a list of mappings (vmid, hostname)")
    running: set[str] = set()
    for number, line in enumerate(text.splitlines(), 1):
        row = line.strip()
        if not row:
            continue
        if platform == "lxc":
            if not re.fullmatch(r"[A-Za-z0-9_.-]+", row):
                raise PendingRecordError(f"lxc-ls line {number}: {row[:80]!r} is not a container name")
            running.add(row)
            continue
        if number == 1 and _PCT_HEADER.fullmatch(row):
            continue
        found = _PCT_ROW.fullmatch(row)
        if found is None:
            raise PendingRecordError(f"pct list line {number}: {row[:80]!r} is not a row of VMID, status, lock, name")
        if found.group(2) == "running":
            running.add(found.group(1))
    key = "hostname" if platform == "lxc" else "vmid"
    return [c["vmid"] for c in containers if str(c.get(key)) in running]
