# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The container options of the connections pct_ssh and pct_pipelined: those of
community.proxmox.proxmox_pct_remote, word for word (a unit test checks pct_pipelined's stay equal to
them), and what plugin_utils/pct.py makes of them, said once here."""

from __future__ import annotations


class ModuleDocFragment:
    # gpufleet.sglang.pct_container
    DOCUMENTATION = r"""
options:
  vmid:
    description:
      - LXC Container ID
    type: int
    vars:
      - name: proxmox_vmid
  proxmox_become_method:
    description:
      - Become command used in proxmox
    type: str
    default: sudo
    vars:
      - name: proxmox_become_method
notes:
  - O(vmid) is the container's id (C(pct exec <vmid>)), an integer from 100 to 999999999; anything else fails
    before a command is sent.
  - O(proxmox_become_method) is the command that runs C(pct) when O(remote_user) is not root (plain words, for
    example C(sudo)).
  - Inside the container a shell (C(sh)) and C(cat) are needed, as for C(proxmox_pct_remote).
"""
