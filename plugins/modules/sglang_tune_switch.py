#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_tune_switch
short_description: Check, switch to and restore from a candidate SGLang server configuration (tune.yml)
version_added: "0.1.0"
description:
  - The node side of a sweep of server options (action gpufleet.sglang.sglang_tune, playbook tune.yml).
  - O(state=begin) checks that the node runs its recorded deployment (module gpufleet.sglang.sglang_deployment)
    byte for byte and writes the sweep journal O(journal) naming it. It refuses when a journal is already
    there (an unfinished sweep; restore first) or when the live files differ from the record.
  - O(state=switch) updates the journal with the candidate first, then installs O(config_text) as
    O(config_file) (same mode and owner, temp file and rename) and restarts O(service).
  - O(state=restore) does nothing without a journal. With one, it restores the recorded deployment's files
    (sglang_deployment C(restored)), restarts O(service) and removes the journal last, so an interrupted
    restore is retried by the next run.
author:
  - gpufleet.sglang contributors (!UNKNOWN)
options:
  state:
    description: What to do.
    type: str
    choices: [begin, switch, restore]
    required: true
  service:
    description: The server's systemd unit.
    type: str
    default: sglang-server
  config_file:
    description: The server's options file (C(--config)); required with O(state=switch).
    type: path
  config_text:
    description: The candidate's options file text (holds the API key; never logged).
    type: str
  candidate:
    description: A label of the candidate, kept in the journal.
    type: str
    default: ""
extends_documentation_fragment:
  - gpufleet.sglang.sglang_paths
  - gpufleet.sglang.sglang_paths.tune
attributes:
  check_mode:
    support: none
    description: The sglang_tune action never calls it in check mode (a sweep in check mode only plans).
notes:
  - Stdlib only; runs on the target host as root.
"""

EXAMPLES = r"""
- name: Restore the node after an interrupted sweep
  gpufleet.sglang.sglang_tune_switch:
    state: restore
"""

RETURN = r"""
original:
  description: The recorded deployment the sweep started from (and restores to).
  returned: state is begin or restore
  type: str
restored:
  description: With O(state=restore), whether a journal was found and the node restored.
  returned: state is restore
  type: bool
journal_found:
  description: The journal found by O(state=restore) (state, original, candidate, times), if any.
  returned: state is restore
  type: dict
"""

from datetime import datetime, timezone

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.deployment import (
    DeploymentError,
    query,
    restore_current,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.paths import (
    DEPLOYMENTS_DIR,
    RELEASE_LINK,
    TUNE_JOURNAL,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.tune.journal import (
    JournalError,
    install,
    read,
    remove,
    write,
)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


def _systemctl(module: AnsibleModule, *args: str) -> None:
    rc, _out, err = module.run_command(["systemctl", *args])
    if rc != 0:
        module.fail_json(msg=f"sglang_tune_switch: systemctl {' '.join(args)} failed (rc {rc}): {err.strip()}")


def run_module() -> None:
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["begin", "switch", "restore"], "required": True},
            "journal": {"type": "path", "default": TUNE_JOURNAL},
            "deployments_dir": {"type": "path", "default": DEPLOYMENTS_DIR},
            "release_link": {"type": "path", "default": RELEASE_LINK},
            "service": {"type": "str", "default": "sglang-server"},
            "config_file": {"type": "path"},
            "config_text": {"type": "str", "no_log": True},
            "candidate": {"type": "str", "default": ""},
        },
        required_if=[("state", "switch", ["config_file", "config_text"])],
        supports_check_mode=False,
    )
    p = module.params
    try:
        journal = read(p["journal"])
        if p["state"] == "begin":
            if journal is not None:
                module.fail_json(
                    msg=f"sglang_tune_switch: a sweep journal is already there ({p['journal']}: {journal}); "
                    "an earlier sweep did not finish. Restore first (state=restore, as tune.yml does)."
                )
            now = query(p["deployments_dir"])
            if not now.current:
                module.fail_json(
                    msg=f"sglang_tune_switch: no recorded deployment under {p['deployments_dir']}: nothing to "
                    "restore the node to after a sweep. Deploy it with playbooks/sglang.yml first."
                )
            drift = restore_current(p["deployments_dir"], p["release_link"], check=True)
            if drift.changed:
                module.fail_json(
                    msg=f"sglang_tune_switch: the node's live files differ from its recorded deployment "
                    f"{now.current} ({', '.join(drift.files_changed) or 'release link'}); a sweep would "
                    "restore the record, not what runs. Deploy with playbooks/sglang.yml first."
                )
            write(p["journal"], {"state": "begun", "original": now.current, "candidate": "", "started": _now()})
            module.exit_json(changed=True, original=now.current)
        if p["state"] == "switch":
            if journal is None:
                module.fail_json(msg="sglang_tune_switch: state=switch without a journal (state=begin first)")
            write(p["journal"], dict(journal, state="candidate", candidate=p["candidate"], switched=_now()))
            install(p["config_file"], p["config_text"].encode("utf-8"), like=p["config_file"])
            _systemctl(module, "reset-failed", p["service"])
            _systemctl(module, "restart", p["service"])
            module.exit_json(changed=True)
        # restore
        if journal is None:
            module.exit_json(changed=False, restored=False, journal_found={}, original="")
        outcome = restore_current(p["deployments_dir"], p["release_link"])
        _systemctl(module, "daemon-reload")
        _systemctl(module, "reset-failed", p["service"])
        _systemctl(module, "restart", p["service"])
        remove(p["journal"])
        module.exit_json(
            changed=True,
            restored=True,
            journal_found=journal,
            original=outcome.current,
            files_changed=outcome.files_changed,
            msg=f"restored deployment {outcome.current} after sweep state {journal.get('state')!r}"
            f"{' (candidate ' + journal['candidate'] + ')' if journal.get('candidate') else ''}",
        )
    except (DeploymentError, JournalError, OSError) as exc:
        module.fail_json(msg=f"sglang_tune_switch: {exc}")


def main() -> None:
    run_module()


if __name__ == "__main__":
    main()
