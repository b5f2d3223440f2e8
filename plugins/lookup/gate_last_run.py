# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Lookup plugin: a node's newest throughput-gate run for one baseline key, from the controller's history."""

from __future__ import annotations

DOCUMENTATION = r"""
name: gate_last_run
short_description: The newest throughput-gate run recorded for a baseline key
version_added: "0.1.0"
description:
  - Reads the history file of the key (C(<label>__<hash>.history.jsonl) in the directory given as the term, the
    gate's baseline directory) and returns the newest run recorded for exactly that key, as the fleet report
    reads it (module_utils/fleet/report.py C(last_run)), with C(passed) added; an empty dict when the directory,
    the file or such a run does not exist.
  - A line that is not a valid run record (cut off, corrupt, another key) is passed over, so a damaged file can only
    make an older run, or none, the newest one.
  - A key part that is empty or holds a control character is an error naming the part.
options:
  _terms:
    description: The directory.
    required: true
  key:
    description: The baseline key (host, model, model_revision, profile, sglang_version, gpu_model).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: The newest gate run of this node's key
  ansible.builtin.debug:
    msg: "{{ lookup('gpufleet.sglang.gate_last_run', throughput_gate_baseline_dir, key=__key) }}"
"""

RETURN = r"""
_raw:
  description: One dict, the run (host, time, verdict, reason, failed, median_output_tokens_per_s, ..., passed) or {}.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.gpufleet.sglang.plugins.module_utils.fleet.report import LAST_RUN_TAIL_BYTES, last_run, passed
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.baseline import BaselineError, Paths, make_key


def read_tail(path: str, size: int) -> bytes | None:
    """The last ``size`` bytes of a file, None when it does not exist."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, 2)
            end = handle.tell()
            handle.seek(max(0, end - size))
            return handle.read(size)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise AnsibleLookupError(f"gate_last_run: cannot read {path}: {exc.strerror or exc}") from None


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        if len(terms) != 1:
            raise AnsibleLookupError("gate_last_run: give exactly one directory")
        given = self.get_option("key")
        try:
            key = make_key(**{str(k): v for k, v in (given or {}).items()})
        except BaselineError as exc:
            raise AnsibleLookupError(f"gate_last_run: {exc}") from None
        data = read_tail(Paths.for_key(str(terms[0]), key).history, LAST_RUN_TAIL_BYTES)
        row = last_run(data, key) if data else None
        return [dict(row, passed=passed(row)) if row else {}]
