# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter plugin: running and queued requests from an SGLang /metrics page (rollout_plan.parse_load)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: sglang_load
short_description: Running and queued requests of an SGLang server, from its /metrics page
version_added: "0.1.0"
description:
  - The sums of the samples of C(sglang:num_running_reqs) and C(sglang:num_queue_reqs) (one sample per
    label set, e.g. per data-parallel rank) on a Prometheus text page, as served by SGLang started with
    C(--enable-metrics).
  - A page without either gauge, or with a value that is not a count >= 0, fails with a message that
    names it and says to start the server with C(enable_metrics).
positional: _input
options:
  _input:
    description: The text of GET /metrics.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: What the node runs
  ansible.builtin.debug:
    msg: "{{ (metrics.content | gpufleet.sglang.sglang_load).running }} running"
"""

RETURN = r"""
_value:
  description: C(running) and C(queued), integers.
  type: dict
"""


from ansible_collections.gpufleet.sglang.plugins.module_utils.fleet.rollout_plan import RolloutPlanError, parse_load
from ansible_collections.gpufleet.sglang.plugins.plugin_utils.filter_errors import filter_errors


def sglang_load(text: object) -> dict[str, int]:
    with filter_errors("sglang_load", RolloutPlanError):
        load = parse_load(text)
    return {"running": load.running, "queued": load.queued}


class FilterModule:
    def filters(self) -> dict:
        return {"sglang_load": sglang_load}
