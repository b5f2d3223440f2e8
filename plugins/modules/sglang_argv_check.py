#!/usr/bin/python
# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_argv_check
short_description: Check an SGLang server argv or options file with the installed SGLang's own parser
description:
  - The argv check. O(python) (the release venv's python, which imports the installed SGLang) builds SGLang's
    argument parser as C(sglang.launch_server) does and parses O(argv), merging a C(--config FILE) in with that
    release's own config merger. Nothing on the node changes.
  - With O(config_text), that text is written to a private temporary directory and checked as C(--config FILE)
    (appended to O(argv)); the directory is removed afterwards.
  - A refusal is returned as RV(ok=false) with the parser's message, not as a failure; the caller decides
    (role sglang_server fails the play, the sglang_tune action skips the candidate).
  - Every form of each API key (C(--api-key), C(--admin-api-key), in O(argv) or in the options file) is masked
    in what is returned.
  - The check does not run C(ServerArgs.__post_init__) (that probes GPUs and the model), so it catches unknown
    flags, bad choices and bad types, not conflicts SGLang only finds at startup.
author:
  - gpufleet.sglang contributors (!UNKNOWN)
options:
  python:
    description: The Python that imports the installed SGLang (the release venv's).
    type: path
    required: true
  argv:
    description: The server options to check (without the launcher), for example C([--config, /etc/sglang/x.yaml]).
    type: list
    elements: str
    default: []
  config_text:
    description: An options file's text to check as C(--config FILE) (holds the API key; never logged).
    type: str
  env:
    description: Extra environment for the parser (for example C(CUDA_VISIBLE_DEVICES)).
    type: dict
    default: {}
  timeout_s:
    description: Deadline of the check in seconds (importing SGLang imports torch).
    type: int
    default: 300
attributes:
  check_mode:
    support: full
    description: The check changes nothing and runs in check mode too. A missing O(python) in check mode
      (SGLang not installed yet) returns RV(checked=false) instead of failing.
notes:
  - Runs on the target host; the parser needs SGLang's runtime dependencies (torch, triton), not a GPU.
"""

EXAMPLES = r"""
- name: Check the options file with SGLang's parser
  gpufleet.sglang.sglang_argv_check:
    python: /opt/sglang/current/venv/bin/python
    argv: [--config, /etc/sglang/sglang-server.yaml]
  register: checked

- name: Fail when the parser refuses it
  ansible.builtin.fail:
    msg: "{{ checked.error }}"
  when: not checked.ok
"""

RETURN = r"""
ok:
  description: Whether SGLang's parser accepted the argv (true when not RV(checked)).
  returned: always
  type: bool
checked:
  description: Whether the check ran (false only in check mode without O(python)).
  returned: always
  type: bool
stage:
  description: Where the check ended (C(done), C(config) reading the options file, C(parse) the argv).
  returned: when checked
  type: str
version:
  description: The SGLang version whose parser checked it.
  returned: when checked
  type: str
error:
  description: The parser's message when it refused, keys masked; empty when accepted.
  returned: always
  type: str
warnings_seen:
  description: What SGLang printed while building the parser and parsing (keys masked).
  returned: when checked
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.argv_check import ArgvCheckError, run


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "python": {"type": "path", "required": True},
            "argv": {"type": "list", "elements": "str", "default": []},
            "config_text": {"type": "str", "no_log": True},
            "env": {"type": "dict", "default": {}},
            "timeout_s": {"type": "int", "default": 300},
        },
        supports_check_mode=True,
    )
    p = module.params
    if module.check_mode and not os.path.exists(p["python"]):
        module.exit_json(changed=False, ok=True, checked=False, error="")
    try:
        result = run(p["python"], p["argv"], config_text=p["config_text"], env=p["env"], timeout_s=p["timeout_s"])
    except ArgvCheckError as exc:
        module.fail_json(msg=f"sglang_argv_check: {exc}", ok=False, checked=False, error=str(exc))
    warnings = result.pop("warnings", [])
    module.exit_json(changed=False, checked=True, warnings_seen=warnings, **result)


if __name__ == "__main__":
    main()
