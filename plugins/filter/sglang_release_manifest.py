# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter plugin: an installed SGLang release's manifest, checked (module_utils/sglang/release_manifest.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: sglang_release_manifest
short_description: The id, version and Python of an installed SGLang release, from its manifest's text
version_added: "0.1.0"
description:
  - "C(text | gpufleet.sglang.sglang_release_manifest): the fields of role sglang's C(gpufleet-release.json)
    that the rollout's plan uses, each checked: C(id) (the release directory's name), C(version) and
    C(pins.python)."
  - The text is data from a node. Never an error; a text that is not such a manifest (none, not JSON, a field
    missing or of another shape, over 64 KiB) gives C(ok=false) and a C(problem) naming what is wrong.
options:
  _input:
    description: The manifest's text; an empty string for none.
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: The release current points at
  ansible.builtin.set_fact:
    current_release: "{{ (manifest_read.content | default('') | b64decode) | gpufleet.sglang.sglang_release_manifest }}"
"""

RETURN = r"""
_value:
  description: C(ok), C(problem), C(id), C(version), C(python) (empty strings where C(ok) is false).
  type: dict
"""

from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.release_manifest import parse_release_manifest


class FilterModule:
    def filters(self) -> dict:
        return {"sglang_release_manifest": parse_release_manifest}
