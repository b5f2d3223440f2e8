# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter plugin: the rollout's serial batches (thin shell around rollout_plan.serial_batches)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: rollout_serial
short_description: The rollout's serial batches, the canary first, then batches of max_unavailable nodes
version_added: "0.1.0"
description:
  - "C(n_nodes | gpufleet.sglang.rollout_serial(max_unavailable)): V(1) (the canary) then batches of
    O(max_unavailable) nodes, the last one what is left; the sizes add up to O(_input)."
  - O(max_unavailable) is a count >= 1 or C(N%) of O(_input) (rounded down, at least 1); anything else
    (V(0), V(-1), V(150%), V(abc)) fails with a message naming the value and the fix.
  - With O(steady), the last O(steady) nodes of the rollout order (nothing for the run to change, filter
    gpufleet.sglang.rollout_steady) take one batch of their own after the others.
positional: _input, max_unavailable
options:
  _input:
    description: The number of nodes behind the gateway.
    type: int
    required: true
  max_unavailable:
    description: A count >= 1 or a percentage in (0%, 100%].
    type: raw
    required: true
  steady:
    description: How many of the nodes are steady (at most O(_input)).
    type: int
    default: 0
"""

EXAMPLES = r"""
- name: Batches for 20 nodes, 25% at a time
  ansible.builtin.debug:
    msg: "{{ 20 | gpufleet.sglang.rollout_serial('25%') }}"  # [1, 5, 5, 5, 4]

- name: Batches for 20 nodes, 25% at a time, 15 of them steady
  ansible.builtin.debug:
    msg: "{{ 20 | gpufleet.sglang.rollout_serial('25%', steady=15) }}"  # [1, 4, 15]
"""

RETURN = r"""
_value:
  description: Batch sizes for the play keyword C(serial).
  type: list
  elements: int
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.sglang.plugins.module_utils.fleet.rollout_plan import RolloutPlanError, serial_batches
from ansible_collections.gpufleet.sglang.plugins.plugin_utils.filter_errors import filter_errors


def rollout_serial(n_nodes: object, max_unavailable: object, steady: object = 0) -> list[int]:
    counts = []
    for what, value in (("the number of nodes", n_nodes), ("the number of steady nodes", steady)):
        try:
            counts.append(int(str(value)))
        except ValueError:
            raise AnsibleFilterError(f"rollout_serial: {what} {value!r} is not an integer") from None
    with filter_errors("rollout_serial", RolloutPlanError):
        return serial_batches(counts[0], max_unavailable, counts[1])


class FilterModule:
    def filters(self) -> dict:
        return {"rollout_serial": rollout_serial}
