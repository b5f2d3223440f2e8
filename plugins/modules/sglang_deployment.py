#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_deployment
short_description: Record, query and roll back a node's whole SGLang deployment
version_added: "0.1.0"
description:
  - A deployment is one versioned unit of everything that makes an SGLang node serve the way it
    does - the release directory, the rendered server files (systemd unit, server configuration,
    environment and secrets files) and the model it serves.
  - O(state=present) records the live files as a deployment under O(root) (byte copies, mode 0600,
    with sha256, mode and owner in a manifest) and makes it C(current); the deployment that was
    current becomes C(previous). The same files again are the same deployment (no change).
  - O(state=rolled_back) restores the C(previous) deployment as a whole - every managed file
    byte-identical with its mode and owner, the release link pointed back at its release - makes
    it C(current) and forgets C(previous), so a second rollback in a row fails with a message and
    changes nothing. The caller restarts the service.
  - A rollback or restore is all or nothing. Every new file and link, and a copy of every live one
    it replaces, is first written under a temporary name next to it (fsynced, mode and owner set);
    only then are they renamed into place - the managed files, then the release link, then the
    records (C(current), C(previous)) - and the directories fsynced. A failure while staging
    changes nothing; a failure while renaming renames the copies back, so the node is on the
    deployment it was on before, and RV(msg) and RV(node_on) say which.
  - Manifests are records read from disk and checked before any file operation - their shape, the
    deployment ids (C(d-) and 16 hex digits), every path (absolute and normalised, outside O(root),
    not the release link). A record that is not a regular file (a FIFO, a device, a link) is refused
    without being opened.
  - O(state=restored) puts the live files and the release link back to the C(current) deployment
    (undoes what a run changed before it could record a new deployment, for example a release
    switch followed by a refused configuration); C(current) and C(previous) stay as they are.
  - O(state=query) reports the current and previous deployments and changes nothing.
author:
  - gpufleet.sglang contributors (!UNKNOWN)
options:
  state:
    description: What to do.
    type: str
    choices: [present, rolled_back, restored, query]
    default: present
  release_dir:
    description: The SGLang release directory this deployment runs. Required with O(state=present).
    type: path
  files:
    description:
      - The managed files, by absolute path. A file that does not exist is recorded as absent and a
        rollback removes it. Symbolic links and files over 1 MiB are refused.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path of the file.
        type: path
        required: true
      secret:
        description: The file holds secrets; its content is never shown in a diff.
        type: bool
        default: false
  model:
    description: The model the deployment serves (for example path and revision); part of its identity.
    type: dict
    default: {}
  meta:
    description: Facts kept with the deployment (SGLang version, profile); part of its identity.
    type: dict
    default: {}
  adopt:
    description:
      - With O(state=present), record only when the node has no current deployment yet - used to
        adopt the live state of a node deployed before deployments were recorded, before it changes.
    type: bool
    default: false
extends_documentation_fragment:
  - gpufleet.sglang.sglang_paths
  - gpufleet.sglang.sglang_paths.root
attributes:
  check_mode:
    support: full
    description: Reports which deployment is current and what a record or rollback would change.
  diff_mode:
    support: full
    description: A rollback shows the file changes; secret files show a placeholder, never their content.
notes:
  - Stdlib only; runs on the target host. The service restart is the caller's job.
"""

EXAMPLES = r"""
- name: Record what the server now runs
  gpufleet.sglang.sglang_deployment:
    release_dir: /opt/sglang/releases/sglang-0.5.23-1a2b3c4d5e
    files:
      - path: /etc/systemd/system/sglang-server.service
      - path: /etc/sglang/sglang-server.env
      - path: /etc/sglang/sglang-server.secrets.env
        secret: true
    meta:
      sglang_version: 0.5.23

- name: Roll back to the previous deployment
  gpufleet.sglang.sglang_deployment:
    state: rolled_back
  register: rollback
"""

RETURN = r"""
current:
  description: The current deployment id after the call (or the one it would be, in check mode).
  returned: always
  type: str
  sample: d-3f1c2b9a0d4e5f60
previous:
  description: The deployment a rollback would restore; empty when there is none.
  returned: always
  type: str
  sample: d-77aa01bb23cc45dd
manifest:
  description: The current deployment's manifest (release, model, meta, files with sha256; never contents).
  returned: always
  type: dict
files_changed:
  description: Managed files a rollback rewrote or removed.
  returned: when state is rolled_back or restored
  type: list
  elements: str
release_link_changed:
  description: Whether a rollback pointed the release link back.
  returned: when state is rolled_back or restored
  type: bool
msg:
  description:
    - What a rollback or restore did; on failure what went wrong and what the node is on now.
  returned: when state is rolled_back or restored
  type: str
node_on:
  description:
    - On a failed rollback or restore, the deployment the node's managed files and release link are
      exactly now (the one it was on before the call, or the restored one when it failed after every
      change was in place and could not be undone); empty when the node was not on one whole
      recorded deployment.
  returned: on failure, when state is rolled_back or restored
  type: str
  sample: d-3f1c2b9a0d4e5f60
mixed:
  description:
    - On a failed rollback or restore, true when the failure could not be undone and the node is
      partly changed (RV(msg) lists the files of the restored deployment); false when the node was
      left as it was.
  returned: on failure, when state is rolled_back or restored
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.sglang.plugins.module_utils.common.arg_spec import dict_list
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.deployment import (
    DeploymentError,
    query,
    record,
    restore_current,
    rollback,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.paths import DEPLOYMENTS_DIR, RELEASE_LINK


def run_module() -> None:
    module = AnsibleModule(
        argument_spec={
            "root": {"type": "path", "default": DEPLOYMENTS_DIR},
            "state": {"type": "str", "choices": ["present", "rolled_back", "restored", "query"], "default": "present"},
            "release_dir": {"type": "path"},
            "release_link": {"type": "path", "default": RELEASE_LINK},
            "files": dict_list(
                path={"type": "path", "required": True},
                secret={"type": "bool", "default": False},
            ),
            "model": {"type": "dict", "default": {}},
            "meta": {"type": "dict", "default": {}},
            "adopt": {"type": "bool", "default": False},
        },
        required_if=[("state", "present", ["release_dir"])],
        supports_check_mode=True,
    )
    params = module.params
    try:
        if params["state"] == "present":
            outcome = record(
                params["root"],
                params["release_dir"],
                [(f["path"], f["secret"]) for f in params["files"]],
                params["model"],
                params["meta"],
                check=module.check_mode,
                only_if_none=params["adopt"],
            )
        elif params["state"] == "rolled_back":
            outcome = rollback(params["root"], params["release_link"], check=module.check_mode)
        elif params["state"] == "restored":
            outcome = restore_current(params["root"], params["release_link"], check=module.check_mode)
        else:
            outcome = query(params["root"])
    except DeploymentError as exc:
        failed = {"msg": f"sglang_deployment: {exc}"}
        if params["state"] in ("rolled_back", "restored"):
            failed.update(node_on=exc.node_on, mixed=exc.mixed)
        module.fail_json(**failed)
    for warning in outcome.warnings:
        module.warn(warning)
    result = {
        "changed": outcome.changed,
        "current": outcome.current,
        "previous": outcome.previous,
        "manifest": outcome.manifest,
    }
    if params["state"] in ("rolled_back", "restored"):
        result["files_changed"] = outcome.files_changed
        result["release_link_changed"] = outcome.release_link_changed
        result["msg"] = outcome.msg
        if module._diff and outcome.diffs:
            result["diff"] = outcome.diffs
    module.exit_json(**result)


def main() -> None:
    run_module()


if __name__ == "__main__":
    main()
