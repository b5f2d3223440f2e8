# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter plugin: the scheduled re-gate's unit values, checked and quoted (around systemd_unit.regate_units)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: regate_units
short_description: The values of the scheduled re-gate's systemd service and timer, checked and quoted
version_added: "0.1.0"
description:
  - "C(settings | gpufleet.sglang.regate_units): the role fleet_regate's variables (without their
    C(fleet_regate_) prefix) turned into what its unit templates print: the C(ExecStart=) line with every
    argument quoted for systemd, the C(Environment=) assignments, the calendar event, the delay and the deadline."
  - A value that cannot go into a unit file as given (a line break, a relative path, a calendar event with
    a quote or a C(%)) fails with a message naming the variable and the fix; nothing is rendered.
positional: _input
options:
  _input:
    description: name, user, ansible_playbook, inventory, playbook, config, vault_password_file, lock_file, flock,
      on_calendar, randomized_delay, deadline_s.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: The re-gate's command line
  ansible.builtin.debug:
    msg: "{{ (settings | gpufleet.sglang.regate_units).exec_start }}"
"""

RETURN = r"""
_value:
  description: exec_start, argv, environment, on_calendar, randomized_delay, deadline_s, user, name, lock_conflict_exit.
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.sglang.plugins.module_utils.common import systemd_unit


def regate_units(settings: object) -> dict:
    try:
        return systemd_unit.regate_units(settings)
    except systemd_unit.UnitValueError as exc:
        raise AnsibleFilterError(f"fleet_regate: {exc}; nothing was installed") from None


class FilterModule:
    def filters(self) -> dict:
        return {"regate_units": regate_units}
