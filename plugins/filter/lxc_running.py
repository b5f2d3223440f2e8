# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter plugin: which of a host's containers run, from one listing (module_utils/nvidia/lxc_pending.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: lxc_running
short_description: The vmids of the role's containers that run, from one listing of the host
description:
  - Reads what C(pct list) prints (platform V(proxmox)) or C(lxc-ls --running -1) (platform V(lxc)) and returns the
    vmids of the containers of O(containers) that run. One read of the host for all its containers, where role
    proxmox_lxc_gpu read each container's status apart.
  - A line that is not of the listing's format is an error naming it; a container the host does not list is not
    running.
positional: _input, platform, containers
options:
  _input:
    description: The listing's standard output.
    type: str
    required: true
  platform:
    description: V(proxmox) or V(lxc).
    type: str
    required: true
  containers:
    description: The role's containers (each with C(vmid) and C(hostname)).
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Read which containers run
  ansible.builtin.command:
    argv: [pct, list]
  register: listing
  changed_when: false

- name: Publish them
  ansible.builtin.set_fact:
    running: "{{ listing.stdout | gpufleet.sglang.lxc_running('proxmox', proxmox_lxc_gpu_containers) }}"
"""

RETURN = r"""
_value:
  description: The running containers' vmids as O(containers) gives them, in its order.
  type: list
  elements: raw
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.sglang.plugins.module_utils.nvidia.lxc_pending import (
    PendingRecordError,
    running_vmids,
)


def lxc_running(text: object, platform: object, containers: object) -> list:
    try:
        return running_vmids(text, platform, containers)
    except PendingRecordError as exc:
        raise AnsibleFilterError(f"lxc_running: {exc}") from None


class FilterModule:
    def filters(self) -> dict:
        return {"lxc_running": lxc_running}
