# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter plugin: the members the gateway does not route to (thin shell around
rollout_plan.parse_workers and rollout_plan.unavailable, the capacity check's own rule)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: gateway_unavailable
short_description: The members the gateway does not route to, each with why
version_added: "0.1.0"
description:
  - "C(workers | gpufleet.sglang.gateway_unavailable(members)): of O(members) (inventory name to worker URL),
    those that the answer O(_input) of smg's C(GET /workers) does not list (V(not listed)), or lists as
    failing its health checks (V(unhealthy)) or still registering (V(not ready)); the same rule as the
    rollout's capacity check (module rollout_room)."
  - An answer that is not smg's shape (no C(workers) list, an entry without a C(url) string or a boolean
    C(is_healthy)) fails with a message naming the entry.
positional: _input, members
options:
  _input:
    description: The JSON answer of C(GET /workers) (smg 1.13 and later).
    type: dict
    required: true
  members:
    description: Inventory name to worker URL.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Is this node out of the gateway, and why?
  ansible.builtin.debug:
    msg: >-
      {{ (workers.json | gpufleet.sglang.gateway_unavailable({inventory_hostname: url}))[inventory_hostname]
         | default('') }}
"""

RETURN = r"""
_value:
  description: Inventory name to why (V(not listed), V(unhealthy), V(not ready)); the members it routes to are left out.
  type: dict
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.sglang.plugins.module_utils.fleet.rollout_plan import (
    RolloutPlanError,
    parse_workers,
    unavailable,
)
from ansible_collections.gpufleet.sglang.plugins.plugin_utils.filter_errors import filter_errors


def gateway_unavailable(workers: object, members: object) -> dict[str, str]:
    if not isinstance(members, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) and k and v for k, v in members.items()
    ):
        raise AnsibleFilterError(
            f"gateway_unavailable: members must map inventory names to worker URLs, got {members!r:.200}"
        )
    with filter_errors("gateway_unavailable", RolloutPlanError):
        return unavailable(members, parse_workers(workers))


class FilterModule:
    def filters(self) -> dict:
        return {"gateway_unavailable": gateway_unavailable}
