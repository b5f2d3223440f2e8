# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter plugin: what is wrong with a list of declared models (thin shell around model_store)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: model_store_errors
short_description: List what is wrong with the models declared for the model store
version_added: "0.1.0"
description:
  - Checks each model (name, repo, revision, source, endpoint, local_path) and that names are unique.
  - An endpoint carrying credentials (user information, a query string, a fragment) is refused; the
    message shows its scheme and host at most, never the credential.
  - Returns one message per problem, naming the model; an empty list when all are fine.
positional: _input, default_endpoint
options:
  _input:
    description: The models, as in C(model_store_models).
    type: list
    elements: dict
    required: true
  default_endpoint:
    description: The endpoint of a model without its own (C(model_store_endpoint)).
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Refuse bad model declarations before changing anything
  ansible.builtin.assert:
    that: model_store_models | gpufleet.sglang.model_store_errors(model_store_endpoint) | length == 0
    fail_msg: "{{ model_store_models | gpufleet.sglang.model_store_errors(model_store_endpoint) | join('; ') }}"
"""

RETURN = r"""
_value:
  description: One message per problem.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.model_store import check_model


def model_store_errors(models: list, default_endpoint: str = "") -> list[str]:
    if not isinstance(models, list):
        raise AnsibleFilterError(f"model_store_models must be a list of dicts, got {type(models).__name__}")
    errors: list[str] = []
    seen: set[str] = set()
    for index, model in enumerate(models):
        if not isinstance(model, dict):
            errors.append(f"model #{index}: must be a dict with name, repo and revision, got a {type(model).__name__}")
            continue
        errors.extend(check_model(model, default_endpoint))
        name = str(model.get("name", ""))
        if name in seen:
            errors.append(f"model {name}: declared twice")
        seen.add(name)
    return errors


class FilterModule:
    def filters(self) -> dict:
        return {"model_store_errors": model_store_errors}
