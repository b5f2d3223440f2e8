# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter plugin: a container's pending-restart record, checked (module_utils/nvidia/lxc_pending.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: lxc_pending_record
short_description: The checked record of a container whose restart is pending on its Proxmox host
description:
  - Parses the text of C(<proxmox_lxc_gpu_pending_dir>/<vmid>.json) (role proxmox_lxc_gpu writes it for a running
    container whose config changed) and returns it only when it is the record of O(vmid), with a known platform
    and a container name of the role's shape, so that nothing else from the file reaches a command.
  - Anything else (not JSON, over 4,096 bytes, a field missing or unknown, another vmid) is an error naming O(path)
    and what is wrong.
positional: _input, vmid, path
options:
  _input:
    description: The record file's text.
    type: str
    required: true
  vmid:
    description: The container's vmid, which the record must name.
    type: int
    required: true
  path:
    description: The record's path, for the error message.
    type: str
    default: the record
"""

EXAMPLES = r"""
# role proxmox_lxc_gpu, entry point pending, on the Proxmox host
- name: Read the pending restart's record
  ansible.builtin.slurp:
    src: /var/lib/gpufleet/lxc-restart-pending/101.json
  register: raw

- name: Publish it, checked (only a record of vmid 101 with a known platform and name passes)
  ansible.builtin.set_fact:
    pending: "{{ raw.content | b64decode | gpufleet.sglang.lxc_pending_record(101, raw.source) }}"
"""

RETURN = r"""
_value:
  description: C(vmid) (int), C(hostname), C(platform) (V(proxmox) or V(lxc)), C(config) (the container's config path).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.sglang.plugins.module_utils.nvidia.lxc_pending import (
    PendingRecordError,
    parse_pending_record,
)


def lxc_pending_record(text: object, vmid: object, path: str = "the record") -> dict:
    try:
        return parse_pending_record(text, vmid, path)
    except PendingRecordError as exc:
        raise AnsibleFilterError(str(exc)) from None


class FilterModule:
    def filters(self) -> dict:
        return {"lxc_pending_record": lxc_pending_record}
