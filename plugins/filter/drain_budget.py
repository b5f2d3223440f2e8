# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter plugin: a node's drain budget (rollout_plan.drain_budget and request_rate)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: drain_budget
short_description: A node's drain budget, from the gate's per-request decode rate or set by the user
version_added: "0.3.0"
description:
  - O(budget_s) > 0 is taken as it is (C(source=set)). Else, with a gate record or baseline (O(_input))
    that holds C(median_output_tokens_per_s) and C(shape.concurrency), the per-request decode rate is
    their quotient and the budget is O(max_new_tokens) / rate + O(margin_s), rounded up (C(source=gate)).
    Without one, O(unmeasured_s) (C(source=unmeasured)).
  - A value out of range fails with a message that names the variable.
positional: _input, budget_s, max_new_tokens, margin_s, unmeasured_s
options:
  _input:
    description: The gate's record of the node (C(throughput_gate_result) or a baseline document); may be empty.
    type: raw
    required: true
  budget_s:
    description: The user's budget in seconds; 0 sizes it.
    type: int
    required: true
  max_new_tokens:
    description: The longest output a request to the node may ask for, in tokens.
    type: int
    required: true
  margin_s:
    description: Seconds added to the sized budget.
    type: int
    required: true
  unmeasured_s:
    description: The budget when no rate is known.
    type: int
    required: true
"""

EXAMPLES = r"""
- name: Size the drain
  ansible.builtin.set_fact:
    budget: "{{ throughput_gate_result | default({}) | gpufleet.sglang.drain_budget(0, 8192, 30, 600) }}"
"""

RETURN = r"""
_value:
  description: C(budget_s), C(source) (V(set), V(gate), V(unmeasured)), C(max_new_tokens), C(tokens_per_s), C(margin_s).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.sglang.plugins.module_utils.rollout_plan import (
    RolloutPlanError,
    drain_budget,
    request_rate,
)


def _number(value: object) -> object:
    """Templated numbers arrive as strings: back to int or float; anything else unchanged (and refused)."""
    if isinstance(value, str):
        for cast in (int, float):
            try:
                return cast(value)
            except ValueError:
                continue
    return value


def drain_budget_filter(
    record: object, budget_s: object, max_new_tokens: object, margin_s: object, unmeasured_s: object
) -> dict[str, object]:
    try:
        return drain_budget(
            budget_s=_number(budget_s),
            max_new_tokens=_number(max_new_tokens),
            tokens_per_s=request_rate(record) or 0,
            margin_s=_number(margin_s),
            unmeasured_s=_number(unmeasured_s),
        )
    except RolloutPlanError as exc:
        raise AnsibleFilterError(f"drain_budget: {exc}") from None


class FilterModule:
    def filters(self) -> dict:
        return {"drain_budget": drain_budget_filter}
