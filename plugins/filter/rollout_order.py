# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter plugin: the rollout's host order (thin shell around rollout_plan.rollout_order)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: rollout_order
short_description: The rollout's host order, the nodes already out of the gateway first
version_added: "0.1.0"
description:
  - "C(hosts | gpufleet.sglang.rollout_order(out_now)): the hosts in O(out_now) first, then the others,
    each part in the order of O(_input) (inventory order)."
  - A node already out of the gateway (held out by an unfinished rollout, unhealthy, not listed) costs no
    capacity to roll; left for a later batch, it counts against the rollout's max_unavailable and can keep an
    earlier node from leaving the gateway until the wait for room runs out.
  - The hosts in O(steady) (nothing for the run to change, filter gpufleet.sglang.rollout_steady) go last, for
    their one batch (filter gpufleet.sglang.rollout_serial); a host both out and steady is out.
  - A name in O(out_now) or O(steady) that is not in O(_input) is ignored; a host named twice, or an item that is
    not a non-empty string, fails with a message naming it.
positional: _input, out_now
options:
  _input:
    description: The play's hosts in inventory order (C(ansible_play_hosts_all)).
    type: list
    elements: str
    required: true
  out_now:
    description: The hosts out of the gateway now.
    type: list
    elements: str
    required: true
  steady:
    description: The steady hosts.
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Node 3 is held out of the gateway, so it is rolled first
  ansible.builtin.debug:
    msg: "{{ ['node1', 'node2', 'node3'] | gpufleet.sglang.rollout_order(['node3']) }}"  # ['node3', 'node1', 'node2']
"""

RETURN = r"""
_value:
  description: The hosts, the ones out of the gateway first.
  type: list
  elements: str
"""


from ansible_collections.gpufleet.sglang.plugins.module_utils.fleet.rollout_plan import RolloutPlanError
from ansible_collections.gpufleet.sglang.plugins.module_utils.fleet.rollout_plan import rollout_order as order
from ansible_collections.gpufleet.sglang.plugins.plugin_utils.filter_errors import filter_errors


def rollout_order(hosts: object, out_now: object, steady: object = ()) -> list[str]:
    with filter_errors("rollout_order", RolloutPlanError):
        return order(hosts, out_now, steady)


class FilterModule:
    def filters(self) -> dict:
        return {"rollout_order": rollout_order}
