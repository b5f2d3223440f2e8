# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter plugin: the rollout's one line per drained node (rollout_plan.drain_line)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: drain_line
short_description: The rollout's line for a drained node
version_added: "0.1.0"
description:
  - "C(<host>: drained in <seconds> s (<running> running, <queued> queued at removal; budget <budget> s;
    <stragglers> straggler(s) <outcome>), back in the gateway), from the C(sglang_gateway_drain) fact."
positional: _input, host
options:
  _input:
    description: The C(sglang_gateway_drain) fact.
    type: dict
    required: true
  host:
    description: The node's inventory name.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Print the drain
  ansible.builtin.debug:
    msg: "{{ sglang_gateway_drain | gpufleet.sglang.drain_line(inventory_hostname) }}"
"""

RETURN = r"""
_value:
  description: The line.
  type: str
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.sglang.plugins.module_utils.fleet.rollout_plan import drain_line


def drain_line_filter(drain: object, host: object) -> str:
    if not isinstance(drain, Mapping):
        raise AnsibleFilterError(f"drain_line: expected the sglang_gateway_drain fact, got {type(drain).__name__}")
    try:
        return drain_line(str(host), drain)
    except KeyError as exc:
        raise AnsibleFilterError(f"drain_line: sglang_gateway_drain has no {exc}") from None


class FilterModule:
    def filters(self) -> dict:
        return {"drain_line": drain_line_filter}
