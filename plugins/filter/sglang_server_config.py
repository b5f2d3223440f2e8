# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter plugin: the SGLang options file (thin shell around sglang_server_config)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: sglang_server_config
short_description: Render an SGLang server argv and API key into the text of its C(--config) options file
version_added: "0.1.0"
description:
  - Turns the argv rendered by P(gpufleet.sglang.sglang_server_args#filter) into the YAML file SGLang reads
    with C(--config) (SGLang >= 0.5.3), keys with dashes as the flags, values as strings, switches as
    C(true), written in the JSON subset of YAML.
  - The API key, when not empty, is added as C(api-key); C(--api-key), C(--admin-api-key) or C(--config) in
    the argv itself are refused.
  - A value that reads as an option (C(--admin-api-key=x), a prefix of an option such as C(--api), C(-h), or
    such a word behind blanks or a Unicode dash) is refused with a message naming the flag, since SGLang's config
    merge would hand it to argparse as that option.
  - A value with a non-printable character (newline, other control characters, line separators) is
    refused with a message naming the flag, never the value.
  - Returns an empty string for a version whose parser has no C(--config) and no API key; with a key it
    fails, since the key would have to go on the command line.
positional: _input, version, api_key
options:
  _input:
    description: The argv without the launcher.
    type: list
    elements: str
    required: true
  version:
    description: The SGLang version the file is for.
    type: str
    required: true
  api_key:
    description: The API key, or an empty string.
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Options file for SGLang 0.5.23
  ansible.builtin.copy:
    content: "{{ ['--model-path', '/m'] | gpufleet.sglang.sglang_server_config('0.5.23', vault_key) }}"
    dest: /etc/sglang/sglang-server.yaml
    mode: "0600"
  no_log: true
"""

RETURN = r"""
_value:
  description: The file's text (a JSON object, which is valid YAML), or an empty string (see above).
  type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.args import SGLangArgsError, known_flags
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.server_config import (
    ServerConfigError,
    check_text,
    config_from_argv,
    render_config,
    supports_config,
)


def sglang_server_config(argv: list[str], version: str, api_key: str = "") -> str:
    try:
        if supports_config(str(version)):
            return render_config([str(word) for word in argv], str(version), str(api_key or ""))
        if api_key:
            raise ServerConfigError(
                f"SGLang {version} has no --config option, so the API key could only be passed on the "
                "command line, where any local user reads it; upgrade SGLang or leave sglang_server_api_key empty"
            )
        for word in argv:
            check_text("an SGLang option", str(word))
        config_from_argv([str(word) for word in argv], known_flags(str(version)))
        return ""
    except (ServerConfigError, SGLangArgsError) as exc:
        raise AnsibleFilterError(f"sglang_server: {exc}") from exc


class FilterModule:
    def filters(self) -> dict:
        return {"sglang_server_config": sglang_server_config}
