# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter plugin: a systemd EnvironmentFile= text (thin shell around sglang.server_config.render_env_file)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: sglang_server_env_file
short_description: Render a dict of environment variables into a systemd EnvironmentFile text, safely quoted
version_added: "0.1.0"
description:
  - One C(NAME="value") line per variable, sorted by name; the value is double-quoted with C(\\), C("),
    C(`) and C($) escaped, which systemd reads back verbatim.
  - A name that is not an identifier (a trailing newline included), a value that is not a string or a number,
    or a value with a non-printable character (a NUL ends the file for systemd, a newline would add a line of
    its own) fails with a message naming the variable, never its value.
  - A header line with a non-printable character, or ending with C(\\) (systemd before 254 continues such a
    comment over the next line), fails too.
positional: _input, header, what
options:
  _input:
    description: The variables.
    type: dict
    required: true
  header:
    description: Comment lines put first (each prefixed with C(# )).
    type: str
    default: ""
  what:
    description: What the variables are called in the inventory, named first in an error (C(sglang_env:) ...).
    type: str
    default: sglang_server
"""

EXAMPLES = r"""
- name: Environment of the server
  ansible.builtin.copy:
    content: "{{ {'HF_TOKEN': vault_hf_token} | gpufleet.sglang.sglang_server_env_file('managed by Ansible') }}"
    dest: /etc/sglang/sglang-server.secrets.env
    mode: "0600"
  no_log: true
"""

RETURN = r"""
_value:
  description: The file's text, ending with a newline.
  type: str
"""

from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.server_config import (
    ServerConfigError,
    render_env_file,
)


def sglang_server_env_file(env: dict[str, Any], header: str = "", what: str = "sglang_server") -> str:
    try:
        return render_env_file(env, str(header or ""))
    except ServerConfigError as exc:
        raise AnsibleFilterError(f"{what}: {exc}") from exc


class FilterModule:
    def filters(self) -> dict:
        return {"sglang_server_env_file": sglang_server_env_file}
