# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter plugin: whether a node has nothing for this run to change (thin shell around rollout_plan.steady)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: rollout_steady
short_description: Whether the rollout's plan found nothing to change on a node, and why not
version_added: "0.1.0"
description:
  - "C(plan | gpufleet.sglang.rollout_steady): C(steady) when every part of the plan holds: the plan read the
    node (C(read)), it is in the gateway (C(in_gateway)), the pins name the release it runs (C(release)), no
    container restart is pending (C(container)), no earlier run left a restart pending (C(restart_mark)),
    its server's files are as this run writes them (C(files)) and its gate of this key stands (C(gate))."
  - Each part is C({ok, detail}); a part missing or of another shape does not hold. C(reasons) lists those that
    do not, with their detail. playbooks/sglang.yml rolls the steady nodes last, all in one batch.
positional: _input
options:
  _input:
    description: The node's plan, a dict of the parts above.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Decide
  ansible.builtin.set_fact:
    verdict: "{{ {'read': {'ok': true}, 'in_gateway': {'ok': true}} | gpufleet.sglang.rollout_steady }}"
    # {'steady': false, 'reasons': ['its release changes', ...]}
"""

RETURN = r"""
_value:
  description: C(steady) (bool) and C(reasons) (list of str, empty when steady).
  type: dict
"""

from ansible_collections.gpufleet.sglang.plugins.module_utils.fleet.rollout_plan import RolloutPlanError, steady
from ansible_collections.gpufleet.sglang.plugins.plugin_utils.filter_errors import filter_errors


def rollout_steady(plan: object) -> dict:
    with filter_errors("rollout_steady", RolloutPlanError):
        return steady(plan)


class FilterModule:
    def filters(self) -> dict:
        return {"rollout_steady": rollout_steady}
