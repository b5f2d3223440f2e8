# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter plugin: the one message of a failed rollout (module_utils/fleet/rollback_message.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: rollback_message
short_description: The message a failed rollout fails the play with
description:
  - What failed on the node and what it runs now, in one line of plain text, from the facts
    C(playbooks/tasks/rollback.yml) noted. Control characters and line breaks in any string become spaces.
  - An unknown, missing or mistyped field is an error naming it.
options:
  _input:
    description:
      - "The rollback's facts: C(host), C(what) (what failed), C(action) (C(none), C(restored), C(rolled_back)),
        and as far as the rollback got C(out_of_gateway), C(restarted), C(via_gateway), C(restore) (the
        sglang_deployment result), C(now) (its manifest), C(version), C(restore_error), C(restore_left),
        C(stop_error), C(verify_error), C(serving_after_s), C(verified), C(gateway_error). A null field counts
        as left out."
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Word the message
  ansible.builtin.set_fact:
    message: >-
      {{ {'host': inventory_hostname, 'what': 'throughput gate FAIL', 'action': 'none'}
         | gpufleet.sglang.rollback_message }}
"""

RETURN = r"""
_value:
  description: The message.
  type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.sglang.plugins.module_utils.fleet.rollback_message import (
    RollbackMessageError,
    rollback_message,
)


def rollback_message_filter(facts: object) -> str:
    try:
        return rollback_message(facts)
    except RollbackMessageError as exc:
        raise AnsibleFilterError(str(exc)) from None


class FilterModule:
    def filters(self) -> dict:
        return {"rollback_message": rollback_message_filter}
