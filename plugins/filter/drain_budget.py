# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter plugin: a node's drain budget (rollout_plan.drain_budget and request_rate)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: drain_budget
short_description: A node's drain budget, from the gate's per-request decode rate or set by the user
version_added: "0.1.0"
description:
  - O(budget_s) > 0 is taken as it is (C(source=set)). Else, from the newest of the gate's records (O(_input))
    of O(host) that holds C(median_output_tokens_per_s) and C(shape.concurrency), the per-request decode rate is
    their quotient and the budget is O(max_new_tokens) / rate + O(margin_s), rounded up (C(source=gate)).
    Without one, or when that is above O(ceiling_s), O(ceiling_s) (C(source=ceiling)).
  - A value out of range, or O(budget_s) above O(ceiling_s), fails with a message that names the variable.
positional: _input, host, settings
options:
  _input:
    description: The gate's records (C(throughput_gate_result), baseline documents or their JSON text); may be empty.
    type: list
    elements: raw
    required: true
  host:
    description: The node's inventory name (the records' C(key.host)).
    type: str
    required: true
  settings:
    description:
      - C(budget_s) (the user's budget; 0 sizes it), C(max_new_tokens) (the longest output a request to the node
        may ask for), C(margin_s) (added to the sized budget), C(ceiling_s) (the server's stop budget,
        C(sglang_server_drain_budget_s)).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Size the drain
  ansible.builtin.set_fact:
    budget: >-
      {{ [throughput_gate_result | default({})] | gpufleet.sglang.drain_budget(inventory_hostname,
         {'budget_s': 0, 'max_new_tokens': 8192, 'margin_s': 30, 'ceiling_s': 600}) }}
"""

RETURN = r"""
_value:
  description:
    - C(budget_s), C(source) (V(set), V(gate), V(ceiling)), C(record) (which gate record gave the rate),
      C(max_new_tokens), C(tokens_per_s), C(margin_s), C(ceiling_s).
  type: dict
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.sglang.plugins.module_utils.fleet.rollout_plan import (
    RolloutPlanError,
    drain_budget,
    pick_record,
)
from ansible_collections.gpufleet.sglang.plugins.plugin_utils.filter_errors import filter_errors


def _number(value: object) -> object:
    """Templated numbers arrive as strings: back to int or float; anything else unchanged (and refused)."""
    if isinstance(value, str):
        for cast in (int, float):
            try:
                return cast(value)
            except ValueError:
                continue
    return value


def drain_budget_filter(records: object, host: object, settings: object) -> dict[str, object]:
    if not isinstance(settings, Mapping):
        raise AnsibleFilterError(f"drain_budget: settings must be a dict, got {type(settings).__name__}")
    rate, what = pick_record(records if isinstance(records, list) else [records], str(host))
    with filter_errors("drain_budget", RolloutPlanError):
        out = drain_budget(
            budget_s=_number(settings.get("budget_s", 0)),
            max_new_tokens=_number(settings.get("max_new_tokens")),
            tokens_per_s=rate or 0,
            margin_s=_number(settings.get("margin_s", 0)),
            ceiling_s=_number(settings.get("ceiling_s")),
        )
    return dict(out, record=what)


class FilterModule:
    def filters(self) -> dict:
        return {"drain_budget": drain_budget_filter}
