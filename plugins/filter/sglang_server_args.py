# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter plugin: render SGLang server flags for a given SGLang version (thin shell around sglang_args)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: sglang_server_args
short_description: Render a dict of SGLang server flags into an argv list for one SGLang version
version_added: "0.1.0"
description:
  - Keys are flag names with underscores or dashes and without C(--) (C(tp), C(moe_runner_backend)).
  - C(true) renders a bare switch, C(false) and C(null) omit the flag, lists render several values,
    dicts render as JSON text.
  - Flags renamed between releases are mapped for the target version, for example
    C(disable_cuda_graph) becomes C(--cuda-graph-backend-decode disabled --cuda-graph-backend-prefill disabled)
    where the version has those, and C(cuda_graph_max_bs) becomes C(--cuda-graph-max-bs-decode).
  - A flag the version does not know fails with a message naming the flag and the version.
  - A value (or list item) that reads as an option fails with a message naming the key and why, that is one that
    starts with C(-) (only plain negative numbers such as C(-1) or C(-0.5) are values), also behind blanks or as a
    Unicode dash; C(--admin-api-key=x) would otherwise become that option in SGLang's config merge.
  - C(api_key), C(admin_api_key) and C(config) are refused as keys (the key comes from C(sglang_server_api_key),
    the options file is the role's own).
positional: _input, version
options:
  _input:
    description: The flags, a dict of flag name to value.
    type: dict
    required: true
  version:
    description: The SGLang version the argv is for, for example C(0.5.23) or C(0.5.12.post1).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Render the GLM-5 profile for SGLang 0.5.23
  ansible.builtin.debug:
    msg: "{{ {'tp': 8, 'disable_cuda_graph': true} | gpufleet.sglang.sglang_server_args('0.5.23') }}"
  # ['--tp-size', '8', '--cuda-graph-backend-decode', 'disabled', '--cuda-graph-backend-prefill', 'disabled']
"""

RETURN = r"""
_value:
  description: The argv without the launcher, one list item per word.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.args import SGLangArgsError, render_argv


def sglang_server_args(flags: dict, version: str) -> list[str]:
    try:
        return render_argv(flags, str(version))
    except SGLangArgsError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule:
    def filters(self) -> dict:
        return {"sglang_server_args": sglang_server_args}
