# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter plugin: which retired variable names a play still sets, and their new names, as one phrase."""

from __future__ import annotations

DOCUMENTATION = r"""
name: retired_names
short_description: Name the retired variables a play still sets, with the names that replace them
version_added: "0.2.0"
description:
  - A role refuses a retired variable name instead of ignoring it (docs/glossary.md); this filter is
    the one place of that rule's test and wording, for the roles' C(ansible.builtin.assert) tasks.
  - "Returns C(<old>[, <old>...] retired: rename to <new>[, <new>...]) for every retired name set
    in O(defined) (in the order of the input), or an empty string when none is."
positional: _input, defined
options:
  _input:
    description: The retired names, each mapped to the name that replaces it.
    type: dict
    required: true
  defined:
    description: The variables of the play (C(vars)).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Refuse the retired names
  ansible.builtin.assert:
    that: __retired | length == 0
    fail_msg: "my_role: {{ __retired }}; nothing was changed."
    quiet: true
  vars:
    __retired: "{{ {'my_role_old': 'my_role_new'} | gpufleet.sglang.retired_names(vars) }}"
"""

RETURN = r"""
_value:
  description: The phrase naming the retired names that are set and their new names; empty when none is.
  type: str
"""

from collections.abc import Container, Mapping

from ansible.errors import AnsibleFilterError


def retired_names(retired: Mapping[str, str], defined: Container[str]) -> str:
    if not isinstance(retired, Mapping):
        raise AnsibleFilterError(f"retired_names: expected a dict of old to new names, got {type(retired).__name__}")
    found = [(old, new) for old, new in retired.items() if old in defined]
    if not found:
        return ""
    return f"{', '.join(old for old, _new in found)} retired: rename to {', '.join(new for _old, new in found)}"


class FilterModule:
    def filters(self) -> dict:
        return {"retired_names": retired_names}
