#!/usr/bin/python
# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: lxc_gpu_config
short_description: Pass NVIDIA GPUs into a Proxmox or plain LXC container by editing its config
version_added: "0.1.0"
description:
  - Finds the host's NVIDIA device nodes (C(<dev_dir>/nvidia*), C(<dev_dir>/nvidia-caps/*)) and their
    majors by C(stat); majors are never assumed (nvidia-uvm and nvidia-caps majors are dynamic).
  - Chooses the nodes a container needs for O(gpus) (its GPUs, C(nvidiactl), C(nvidia-uvm),
    C(nvidia-uvm-tools), C(nvidia-caps) when present) and merges them into the container's config.
  - "Proxmox (O(platform=proxmox)), C(/etc/pve/lxc/<vmid>.conf) in C(key: value) syntax, either native
    C(devN:) entries (PVE >= 8.1, O(passthrough=native)) or raw C(lxc.cgroup2.devices.allow) and
    C(lxc.mount.entry) lines (O(passthrough=raw))."
  - Plain LXC (O(platform=lxc)), C(/var/lib/lxc/<name>/config) in C(key = value) syntax, raw lines with the
    devices cgroup key of the host's layout (C(lxc.cgroup2.devices.allow) on a unified host,
    C(lxc.cgroup.devices.allow) on a legacy or hybrid one).
  - Each cgroup rule allows one exact node, so a withheld GPU cannot be reached even by C(mknod).
    Mount entries have no C(optional), so a node missing at start stops the container instead of
    starting it without the node.
  - Unrelated lines, PVE's description comments and snapshot sections are kept byte for byte;
    lines are split on LF only (as PVE and LXC read them), so CRLF line endings, comments holding
    any Unicode (form feed, NEL, U+2028) and a missing final newline are kept. New lines take the
    file's line ending. A second run with the same input reports no change.
  - "The write is crash-safe: a temporary file in the config's directory, fsynced, given the old
    file's mode and owner, renamed over the config, then the directory fsynced. Any OS error
    (read-only file system, file size limit, full disk, permission) fails naming the path and
    leaves neither a temporary file nor a changed config."
  - A symlinked O(path) is followed and its target is written; the link itself is never replaced
    (RV(dest) names the file written). A dangling link fails like a missing file.
author:
  - gpufleet.sglang contributors (!UNKNOWN)
options:
  path:
    description:
      - The container's config file. It must exist (create the container first); in check mode a missing
        file is planned as empty, so a play can validate every container before creating any.
    type: path
    required: true
  platform:
    description:
      - "Where the container runs, which decides the config syntax: V(proxmox) (Proxmox VE, C(key: value))
        or V(lxc) (plain LXC, C(key = value))."
    type: str
    choices: [proxmox, lxc]
    default: proxmox
  passthrough:
    description:
      - V(native) writes PVE C(devN:) entries (PVE >= 8.1); V(raw) writes C(lxc.*) cgroup and mount lines.
      - Plain LXC always uses raw lines.
    type: str
    choices: [native, raw]
    default: native
  gpus:
    description: V(all) or a list of GPU indexes (as nvidia-smi numbers them).
    type: raw
    required: true
  available_gpus:
    description:
      - GPU indexes the host has (from C(nvidia_gpu_info)'s RV(gpus)). Default, the C(/dev/nvidiaN) nodes found.
    type: list
    elements: int
  gpu_minors:
    description: GPU index to C(/dev/nvidiaN) minor where they differ (default minor = index).
    type: dict
  dev_dir:
    description: Where the host's device nodes are. Config lines always name C(/dev/...).
    type: path
    default: /dev
  include_caps:
    description: Also pass the C(nvidia-caps) nodes present on the host (MIG).
    type: bool
    default: true
  cgroup:
    description: Devices cgroup of the host for O(platform=lxc); V(auto) reads O(mounts_path).
    type: str
    choices: [auto, v1, v2]
    default: auto
  mounts_path:
    description: The mount table read for O(cgroup=auto).
    type: path
    default: /proc/self/mounts
  settings:
    description:
      - Single-valued keys to set, for example C(cores), C(memory), C(lxc.prlimit.memlock). Updated in place.
      - Keys are letters, digits, C(.), C(_) and C(-) only (no section syntax). Keys the module manages
        (C(devN), C(lxc.cgroup*.devices.allow), C(lxc.mount.entry)) and keys that may appear more than once
        (C(lxc.idmap), C(lxc.environment), C(lxc.hook.*), ...) are refused, as setting them would delete lines.
      - Values are strings or numbers (booleans are written V(1)/V(0)); a value with a control character
        (newline, carriage return, tab, form feed, NEL, U+2028, U+2029) or leading/trailing whitespace fails
        naming the key.
    type: dict
    default: {}
  shm_size:
    description: Mount a C(/dev/shm) tmpfs of this size (V(64G)); empty leaves C(/dev/shm) alone.
    type: str
    default: ""
  dev_mode:
    description: Access mode of native C(devN) entries.
    type: str
    default: "0666"
  dev_gid:
    description: Group id of native C(devN) entries in the container (unset, PVE's default).
    type: int
  bind_mounts:
    description:
      - Host directories bind-mounted into the container, read-only unless O(bind_mounts[].read_only=false),
        for example the host's model store.
      - Proxmox - C(mpN) entries in free slots; plain LXC - C(lxc.mount.entry) lines.
      - Paths are absolute and normalised, of letters, digits and C(._@+-/) only - no C(.), C(..) or empty
        segment (C(//)); a trailing C(/) is dropped. A target is always below the container's root, never the
        root itself (C(/), C(//), C(/./) fail naming the target).
    type: list
    elements: dict
    default: []
    suboptions:
      source:
        description: The directory on the host.
        type: path
        required: true
      target:
        description: Where the container sees it.
        type: path
        required: true
      read_only:
        description: Mount it read-only (a write in the container fails with EROFS).
        type: bool
        default: true
  bind_mounts_root:
    description:
      - Bind mounts whose source is under this host directory are managed by the module, so one no longer
        in O(bind_mounts) is removed. Empty - only the sources listed are managed.
      - It must be a real subdirectory of the host, absolute and normalised (no C(.), C(..) or empty segment).
        C(/), or a path that normalises to it, fails - with it every bind mount of the container would count
        as managed and be removed.
    type: path
    default: ""
attributes:
  check_mode:
    support: full
    description: Plans the merged config and reports the change without writing it.
  diff_mode:
    support: full
    description: Shows the config file before and after the merge.
notes:
  - Proxmox's C(community.proxmox.proxmox) module has no option for C(devN) or raw C(lxc.*) keys, hence a
    config edit. A running container sees the change only after a restart; C(changed) tells when.
"""

EXAMPLES = r"""
- name: Pass GPUs 0 and 1 into CT 101 (PVE >= 8.1 native entries)
  gpufleet.sglang.lxc_gpu_config:
    path: /etc/pve/lxc/101.conf
    gpus: [0, 1]
    available_gpus: "{{ nvidia_driver_facts.gpus | map(attribute='index') | list }}"
    settings:
      cores: "32"
      memory: "262144"
      lxc.prlimit.memlock: unlimited

- name: Pass all GPUs into a plain LXC container
  gpufleet.sglang.lxc_gpu_config:
    path: /var/lib/lxc/sglang-01/config
    platform: lxc
    gpus: all
    shm_size: 64G
"""

RETURN = r"""
gpus:
  description: GPU indexes passed.
  returned: success
  type: list
  elements: int
  sample: [0, 1]
devices:
  description: Host device nodes passed, with the majors found on the host.
  returned: success
  type: list
  elements: dict
  sample: [{"path": "/dev/nvidia0", "major": 195, "minor": 0}]
entries:
  description: The managed device entries as C([key, value]) pairs.
  returned: success
  type: list
  elements: list
  sample: [["dev0", "/dev/nvidia0,mode=0666"]]
path:
  description: O(path) as given (the container's config path the role publishes).
  returned: always
  type: str
  sample: /etc/pve/lxc/101.conf
dest:
  description: The file read and written, O(path) with symlinks resolved.
  returned: always
  type: str
  sample: /etc/pve/nodes/pve1/lxc/101.conf
differs:
  description:
    - Whether the config differs from the one this task wants (V(true) where it does not exist yet). The
      same as C(changed) as the module returns it, but kept where the task's C(changed_when) overrides
      C(changed), as a plan run in check mode does (the role writes only the configs its plan found differing).
  returned: always
  type: bool
  sample: false
exists:
  description: Whether the config file existed (false only in check mode, for a container not created yet).
  returned: always
  type: bool
  sample: true
cgroup_layout:
  description: The host's cgroup layout (V(unified), V(hybrid), V(legacy)); null for O(platform=proxmox).
  returned: success
  type: str
  sample: hybrid
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.sglang.plugins.module_utils.common.arg_spec import dict_list
from ansible_collections.gpufleet.sglang.plugins.module_utils.common.atomic_file import FileWriteError, replace_file
from ansible_collections.gpufleet.sglang.plugins.module_utils.nvidia.lxc_gpu import (
    CGROUP_KEYS,
    LxcGpuError,
    cgroup_devices_key,
    cgroup_layout,
    gpu_indexes_from_nodes,
    parse_bind_mounts,
    parse_device_nodes,
    plan_config,
    resolve_gpu_selection,
    select_device_nodes,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.nvidia.smi import scan_device_nodes


def _read_config(path: str) -> str:
    """The config text, exactly (no newline translation); LxcGpuError when not UTF-8."""
    with open(path, "rb") as handle:
        data = handle.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LxcGpuError(f"is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") from exc


def _write(path: str, text: str) -> None:
    """Replace ``path`` with ``text``, keeping its mode and owner."""
    st = os.stat(path)
    uid = st.st_uid if os.geteuid() == 0 else None
    gid = st.st_gid if os.geteuid() == 0 else None
    replace_file(path, text.encode("utf-8"), mode=st.st_mode & 0o7777, uid=uid, gid=gid, prefix=".lxc_gpu_config.")


def run_module() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "platform": {"type": "str", "choices": ["proxmox", "lxc"], "default": "proxmox"},
            "passthrough": {"type": "str", "choices": ["native", "raw"], "default": "native"},
            "gpus": {"type": "raw", "required": True},
            "available_gpus": {"type": "list", "elements": "int"},
            "gpu_minors": {"type": "dict"},
            "dev_dir": {"type": "path", "default": "/dev"},
            "include_caps": {"type": "bool", "default": True},
            "cgroup": {"type": "str", "choices": ["auto", "v1", "v2"], "default": "auto"},
            "mounts_path": {"type": "path", "default": "/proc/self/mounts"},
            "settings": {"type": "dict", "default": {}},
            "shm_size": {"type": "str", "default": ""},
            "dev_mode": {"type": "str", "default": "0666"},
            "dev_gid": {"type": "int"},
            "bind_mounts": dict_list(
                source={"type": "path", "required": True},
                target={"type": "path", "required": True},
                read_only={"type": "bool", "default": True},
            ),
            "bind_mounts_root": {"type": "path", "default": ""},
        },
        supports_check_mode=True,
    )
    p = module.params
    path = p["path"]
    dest = os.path.realpath(path)
    result: dict = {
        "changed": False,
        "path": path,
        "dest": dest,
        "exists": False,
        "differs": True,
        "gpus": [],
        "devices": [],
        "entries": [],
        "cgroup_layout": None,
    }
    via = f" (symlink {path} -> {dest})" if dest != os.path.abspath(path) else ""
    exists = result["exists"] = os.path.isfile(dest)
    if os.path.exists(dest) and not exists:
        module.fail_json(msg=f"container config {dest}{via} is not a regular file", **result)
    if not exists and not module.check_mode:
        module.fail_json(msg=f"container config {dest}{via} does not exist: create the container first", **result)
    if not os.path.isdir(p["dev_dir"]):
        module.fail_json(msg=f"dev_dir {p['dev_dir']} is not a directory", **result)
    try:
        host_nodes = parse_device_nodes(scan_device_nodes(p["dev_dir"], name_as="/dev"))
        available = p["available_gpus"] if p["available_gpus"] is not None else gpu_indexes_from_nodes(host_nodes)
        gpus = resolve_gpu_selection(p["gpus"], available)
        minors = {int(k): int(v) for k, v in (p["gpu_minors"] or {}).items()}
        nodes = select_device_nodes(host_nodes, gpus, minors, include_caps=p["include_caps"])
        cgroup_key = CGROUP_KEYS[2]
        passthrough = p["passthrough"]
        if p["platform"] == "lxc":
            passthrough = "raw"
            if p["cgroup"] == "auto":
                with open(p["mounts_path"], encoding="utf-8") as handle:
                    result["cgroup_layout"] = cgroup_layout(handle.read())
                cgroup_key = cgroup_devices_key(result["cgroup_layout"])
            else:
                cgroup_key = CGROUP_KEYS[1 if p["cgroup"] == "v1" else 2]
        before = _read_config(dest) if exists else ""
        after, entries = plan_config(
            before,
            platform=p["platform"],
            nodes=nodes,
            passthrough=passthrough,
            cgroup_key=cgroup_key,
            settings=p["settings"],
            shm_size=p["shm_size"],
            dev_mode=p["dev_mode"],
            dev_gid=p["dev_gid"],
            owned_majors={n.major for n in host_nodes.values()},
            bind_mounts=parse_bind_mounts(p["bind_mounts"]),
            bind_mounts_root=p["bind_mounts_root"] or "",
        )
    except (LxcGpuError, ValueError) as exc:
        module.fail_json(msg=f"{dest}{via}: {exc}", **result)
    except OSError as exc:
        module.fail_json(msg=f"{dest}{via}: cannot read {exc.filename or dest}: {exc.strerror or exc}", **result)
    result.update(
        gpus=gpus,
        devices=[{"path": n.path, "major": n.major, "minor": n.minor} for n in nodes],
        entries=[list(e) for e in entries],
        changed=after != before,
        differs=after != before or not exists,
    )
    if module._diff:
        result["diff"] = {"before": before, "after": after, "before_header": dest, "after_header": dest}
    if result["changed"] and not module.check_mode:
        try:
            _write(dest, after)
        except FileWriteError as exc:
            module.fail_json(msg=f"{exc}{via}; the config was left as it was", **result)
        except OSError as exc:
            module.fail_json(msg=f"cannot write {dest}{via}: {exc.strerror or exc}", **result)
    module.exit_json(**result)


def main() -> None:
    run_module()


if __name__ == "__main__":
    main()
