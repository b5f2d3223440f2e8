#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2025, gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_source_info
short_description: Read where an installed SGLang decides to run the FlashInfer autotune
version_added: "0.1.0"
description:
  - Reads an installed SGLang package with Python's C(ast) module; it never imports SGLang
    (importing it needs torch and CUDA).
  - Reports the SGLang version, which of the known source layouts holds the FlashInfer autotune
    decision, the MoE runner backends that decision whitelists, and the entries that are present
    only as comments (disabled upstream, for example C(flashinfer_cutlass) in 0.5.8 to 0.5.12.post1).
  - Known layouts are C(model_runner) (C(ModelRunner._should_run_flashinfer_autotune) in
    C(sglang/srt/model_executor/model_runner.py), 0.5.8 to 0.5.13), C(base_runner)
    (C(BaseRunner._should_run_flashinfer_autotune) in C(sglang/srt/model_executor/runner/base_runner.py), 0.5.14)
    and C(flashinfer_autotune) (C(should_run_flashinfer_autotune) in
    C(sglang/srt/model_executor/runner/flashinfer_autotune.py), 0.5.15 and later).
  - Fails, naming the files looked for and the version, when none of the known layouts is found.
  - Refuses to guess. The decision function or its class bound more than once in its scope (Python
    uses the last), a backend list with an entry that is not a string literal, a malformed dist-info
    C(RECORD) entry for the file, a file over 8 MiB or not UTF-8, and source the parser cannot handle
    (nesting too deep for its recursion or memory limits) each fail with a message naming the file
    and, where there is one, the line.
author:
  - gpufleet maintainers (!UNKNOWN)
extends_documentation_fragment:
  - gpufleet.sglang.read_only
options:
  path:
    description:
      - The directory that holds the C(sglang) package, for example a virtual environment's
        C(site-packages) directory.
    type: path
    required: true
  wanted_backends:
    description:
      - The MoE runner backends the caller wants autotuned. Only where every one of them is already in the
        whitelist is O(kept_patch) checked.
    type: list
    elements: str
    default: []
  kept_patch:
    description:
      - A patch that may have been applied to O(path) before (role sglang keeps the autotune patch it applied
        with the release). Where every backend of O(wanted_backends) is autotuned, the module checks with
        C(patch --dry-run --batch --reverse --force --fuzz=0 -p1) whether the files hold exactly that patch,
        and returns the answer in RV(kept_patch_reverses). Nothing is changed.
    type: path
notes:
  - Stdlib only; runs on the target host. With O(kept_patch) it runs GNU C(patch) in dry-run mode.
"""

EXAMPLES = r"""
- name: Read the autotune whitelist of the installed SGLang
  gpufleet.sglang.sglang_source_info:
    path: /opt/sglang/current/venv/lib/python3.11/site-packages
  register: sglang_src

- name: Fail when flashinfer_cutlass is not autotuned
  ansible.builtin.assert:
    that: "'flashinfer_cutlass' in sglang_src.autotuned_backends"
    fail_msg: "{{ sglang_src.autotune_file }} (SGLang {{ sglang_src.version }}) does not autotune flashinfer_cutlass"
"""

RETURN = r"""
version:
  description:
    - SGLang version from C(sglang/_version.py), C(sglang/version.py) or the dist-info METADATA.
    - Null when none of them says.
  returned: always
  type: str
  sample: 0.5.12.post1
path:
  description: The directory that was read.
  returned: always
  type: str
  sample: /opt/sglang/current/venv/lib/python3.11/site-packages
layout:
  description: Which known layout holds the autotune decision.
  returned: always
  type: str
  choices: [model_runner, base_runner, flashinfer_autotune]
  sample: model_runner
autotune_file:
  description: Absolute path of the file holding the autotune decision.
  returned: always
  type: str
  sample: /opt/sglang/current/venv/lib/python3.11/site-packages/sglang/srt/model_executor/model_runner.py
autotune_relpath:
  description: The same file relative to O(path) (the path a patch names).
  returned: always
  type: str
  sample: sglang/srt/model_executor/model_runner.py
autotune_function:
  description: Qualified name of the function deciding whether to autotune.
  returned: always
  type: str
  sample: ModelRunner._should_run_flashinfer_autotune
autotuned_backends:
  description: Active entries of the MoE runner backend whitelist, in source order.
  returned: always
  type: list
  elements: str
  sample: [flashinfer_trtllm, flashinfer_mxfp4, flashinfer_cutedsl]
commented_backends:
  description: Entries present in the whitelist only as comments (disabled), in source order.
  returned: always
  type: list
  elements: str
  sample: [flashinfer_trtllm_routed, flashinfer_cutlass]
autotune_file_sha256:
  description: sha256 (hex) of the autotune file as found.
  returned: always
  type: str
autotune_file_pristine:
  description:
    - Whether the autotune file matches the hash the package's dist-info RECORD lists for it
      (false once patched); null when no RECORD lists it (for example a source checkout).
  returned: always
  type: bool
kept_patch_reverses:
  description:
    - Whether O(kept_patch) reverses cleanly against O(path) (the files hold that patch, applied); null where
      it was not checked (no O(kept_patch), a wanted backend not autotuned, or no C(patch) on the host).
  returned: always
  type: bool
whitelist:
  description: Where the whitelist is, for rendering a patch against the exact source found.
  returned: always
  type: dict
  contains:
    start_line:
      description: 1-based line of the opening bracket.
      type: int
    end_line:
      description: 1-based line of the closing bracket.
      type: int
    commented:
      description: Commented entries with their 1-based line (C(backend), C(line)).
      type: list
      elements: dict
    context_start_line:
      description: 1-based line number of the first element of RV(whitelist.context_lines).
      type: int
    context_lines:
      description: The whitelist's lines with up to 3 lines of context either side, verbatim.
      type: list
      elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.source import SourceError, inspect_sglang


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "wanted_backends": {"type": "list", "elements": "str", "default": []},
            "kept_patch": {"type": "path"},
        },
        supports_check_mode=True,
    )
    path = module.params["path"]
    try:
        facts = inspect_sglang(path)
    except SourceError as exc:
        module.fail_json(msg=str(exc), path=path)
    except (OSError, UnicodeDecodeError) as exc:
        module.fail_json(msg=f"cannot read SGLang source under {path}: {exc}", path=path)
    except (RecursionError, MemoryError) as exc:
        limit = "recursion" if isinstance(exc, RecursionError) else "memory"
        module.fail_json(msg=f"reading SGLang source under {path} ran out of {limit}", path=path)
    facts["kept_patch_reverses"] = None
    kept = module.params["kept_patch"]
    if kept and set(module.params["wanted_backends"]) <= set(facts["autotuned_backends"]):
        facts["kept_patch_reverses"] = kept_patch_reverses(module, path, kept)
    module.exit_json(changed=False, **facts)


def kept_patch_reverses(module: AnsibleModule, path: str, kept: str) -> bool | None:
    """Whether ``kept`` reverses with no fuzz against ``path`` (a dry run: nothing is written)."""
    patch = module.get_bin_path("patch")
    if patch is None:
        return None
    rc, _out, _err = module.run_command(
        [patch, "--dry-run", "--batch", "--reverse", "--force", "--fuzz=0", "-p1", "-d", path, "-i", kept]
    )
    return rc == 0


if __name__ == "__main__":
    main()
