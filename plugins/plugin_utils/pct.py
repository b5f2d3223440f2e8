# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the collection's `pct exec` connections check and build on the controller (pure; never sent to a node).

Both connections (pct_pipelined over paramiko, pct_ssh over OpenSSH) put inventory values on the Proxmox
host's command line: the container id and, for a user other than root, the become method. They are
checked here first, so a careless or hostile inventory value never reaches the host's shell.
"""

from __future__ import annotations

import re

from ansible.errors import AnsibleConnectionFailure

# Proxmox VE's container ids (pvesh get /cluster/nextid: 100 to 999999999)
VMID_MIN = 100
VMID_MAX = 999_999_999
# a become method is a command and its options, plain words: it reaches the host's shell unquoted
BECOME_METHOD_RE = re.compile(r"[A-Za-z0-9_./-]+(?: [A-Za-z0-9_./=-]+)*")
# where Proxmox VE installs pct, as community.proxmox.proxmox_pct_remote calls it
PCT = "/usr/sbin/pct"


def checked_vmid(vmid: object, host: object) -> int:
    """``vmid`` when it is a Proxmox container id, else ``AnsibleConnectionFailure`` naming it."""
    if isinstance(vmid, bool) or not isinstance(vmid, int) or not VMID_MIN <= vmid <= VMID_MAX:
        raise AnsibleConnectionFailure(
            f"proxmox_vmid {vmid!r} of {host} is not a container id (an integer from {VMID_MIN} to {VMID_MAX}): "
            "nothing was run; set proxmox_vmid in the inventory"
        )
    return vmid


def checked_become_method(method: object, host: object) -> str:
    """``method`` when it is plain words (a command and its options), else ``AnsibleConnectionFailure``."""
    if not isinstance(method, str) or not BECOME_METHOD_RE.fullmatch(method):
        raise AnsibleConnectionFailure(
            f"proxmox_become_method {method!r} of {host} is not a command with plain options (letters, digits "
            "and _ . / = -, words separated by one space): it would reach the Proxmox host's shell as it is; "
            "nothing was run"
        )
    return method


def pct_exec_line(cmd: str, vmid: object, user: object, become_method: object, host: object) -> str:
    """The line the Proxmox host's shell runs for ``cmd`` in container ``vmid``: ``/usr/sbin/pct exec <vmid>
    -- <cmd>``, behind the become method when the login is not root; ``cmd`` is Ansible's own command line
    (a shell and its quoted script), which the host's shell splits into pct's arguments, as
    community.proxmox.proxmox_pct_remote does. The inventory's values are checked first."""
    line = f"{PCT} exec {checked_vmid(vmid, host)} -- {cmd}"
    if user != "root":
        line = f"{checked_become_method(become_method, host)} {line}"
    return line
