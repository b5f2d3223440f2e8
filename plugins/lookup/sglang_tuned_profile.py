# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Lookup plugin: the flags of a node's tuned profile (written by tune.yml) on the controller."""

from __future__ import annotations

DOCUMENTATION = r"""
name: sglang_tuned_profile
short_description: The flags of the tuned profile tune.yml wrote for a node, profile and SGLang version
version_added: "0.1.0"
description:
  - Reads the C(*.tuned.json) files in the directory given as the term (the gate's baseline directory) and
    returns the flags of the one whose key matches O(host), O(profile), O(sglang_version) and
    O(model_revision); an empty dict when none matches or the directory does not exist.
  - More than one match, or a file that cannot be read, is an error naming the files.
  - The flags of the match are checked like a profile's (module_utils/sglang/args.py C(check_profile)); a value
    that SGLang's parser would read as an option (C(--admin-api-key=x)) or a secret flag as a key fails, naming the
    file and the key.
options:
  _terms:
    description: The directory.
    required: true
  host:
    description: The inventory host name.
    type: str
    required: true
  profile:
    description: The profile the tuned flags were found for.
    type: str
    required: true
  sglang_version:
    description: The SGLang version they were found on.
    type: str
    required: true
  model_revision:
    description: The model revision (C(unpinned) without a model store).
    type: str
    default: unpinned
"""

EXAMPLES = r"""
- name: Tuned flags of this node
  ansible.builtin.debug:
    msg: "{{ lookup('gpufleet.sglang.sglang_tuned_profile', baseline_dir, host=inventory_hostname,
      profile='glm5_nvfp4_tp8', sglang_version='0.5.23') }}"
"""

RETURN = r"""
_raw:
  description: One dict, the tuned flags (empty when there is no tuned profile).
  type: list
  elements: dict
"""

import os

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.gpufleet.sglang.plugins.module_utils.tune.profile import TunedProfileError, find_tuned


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        if len(terms) != 1:
            raise AnsibleLookupError("sglang_tuned_profile: give exactly one directory")
        directory = str(terms[0])
        if not os.path.isdir(directory):
            return [{}]
        match = {name: self.get_option(name) for name in ("host", "profile", "sglang_version", "model_revision")}
        match["model_revision"] = match["model_revision"] or "unpinned"
        try:
            found = find_tuned(directory, match)
        except TunedProfileError as exc:
            raise AnsibleLookupError(f"sglang_tuned_profile: {exc}") from exc
        return [found[1]["flags"] if found else {}]
