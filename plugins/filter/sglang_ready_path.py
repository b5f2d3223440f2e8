# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter plugin: the readiness path of an SGLang version (thin shell around sglang.server_ready.ready_path)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: sglang_ready_path
short_description: The readiness path of an SGLang server version
version_added: "0.1.0"
description:
  - C(/ready) for SGLang 0.5.23 and later (200 once the server has warmed up), C(/health_generate)
    (a real one-token generation) before; O(override) when it is not empty.
  - Versions are ordered by PEP 440 (module_utils common/version_order.py, C(reaches)), so a pre-release
    or dev build such as C(0.5.23rc1) counts as 0.5.23.
  - The one place of this rule; roles sglang_server and sglang_tune both use it.
positional: _input, override
options:
  _input:
    description: The SGLang version.
    type: str
    required: true
  override:
    description: A path to use instead (C(sglang_server_ready_path)); empty for the version's own.
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Readiness URL of the server
  ansible.builtin.set_fact:
    ready_url: "http://127.0.0.1:30000{{ '0.5.23' | gpufleet.sglang.sglang_ready_path(sglang_server_ready_path) }}"
"""

RETURN = r"""
_value:
  description: The path, starting with C(/).
  type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.server_ready import ready_path


def sglang_ready_path(version: str, override: str = "") -> str:
    try:
        return ready_path(str(version), str(override or ""))
    except ValueError as exc:
        raise AnsibleFilterError(f"sglang_ready_path: {exc}") from exc


class FilterModule:
    def filters(self) -> dict:
        return {"sglang_ready_path": sglang_ready_path}
