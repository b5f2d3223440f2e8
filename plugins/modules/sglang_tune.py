#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_tune
short_description: Sweep SGLang server options on one node within a time budget and keep the best
version_added: "0.1.0"
description:
  - An action plugin (controller side, plugins/action/sglang_tune.py); playbooks/tune.yml calls it.
  - Coordinate descent over O(space) (module_utils/tune/search.py) starting from the node's own flags
    O(base_flags). Each candidate is rendered like role sglang_server renders options, checked by the
    installed SGLang's own parser (refused candidates are recorded and never started), switched to
    (module gpufleet.sglang.sglang_tune_switch, a journal first), made ready (module
    gpufleet.sglang.sglang_server_ready) and measured with the throughput gate's module with O(gate)
    (same shape, same trials). Crashes, out-of-memory exits and missed readiness deadlines are recorded
    with the reason and the journal's tail; the search goes on.
  - A candidate replaces the best so far when the gate's rule, read the other way round, says so (its
    median is more than O(min_gain) above and a one-sided Mann-Whitney test gives p < O(alpha)).
  - A candidate is only started while the time spent, plus the longest candidate so far, plus as much
    again for the restore, stays within O(budget_s).
  - Whatever happens once the sweep began, the node's recorded deployment is restored and made ready
    before the task returns; a sweep cut short leaves a journal on the node that the next tune.yml
    restores from first.
  - With O(sweep_dir), the sweep is written there next to the gate's baselines, keyed like them; with
    O(apply) and a winner that beats the original significantly, the tuned profile too.
author:
  - gpufleet.sglang contributors (!UNKNOWN)
options:
  space:
    description: Option name (a flag without C(--)) to the list of values to try; C(false)/C(null) remove the flag.
    type: dict
    required: true
  base_flags:
    description: The node's flags (profile, tuned profile and extra args merged, as role sglang_server merges them).
    type: dict
    required: true
  budget_s:
    description: Time budget of the sweep in seconds (> 0).
    type: float
    required: true
  min_gain:
    description: Smallest gain of the median (a fraction) that counts as better.
    type: float
    default: 0.05
  alpha:
    description: Significance level of the one-sided Mann-Whitney test.
    type: float
    default: 0.05
  max_passes:
    description: Passes over the options at most (a pass repeats only when the best changed).
    type: int
    default: 2
  apply:
    description: Write the winner as the tuned profile when it beats the original significantly (needs O(sweep_dir)).
    type: bool
    default: false
  server:
    description: The server as role sglang_server runs it (version, model_path, host, port, api_key, service,
      config_file, validate, validate_python, validate_env).
    type: dict
    required: true
  ready:
    description: Readiness wait per candidate (url, timeout_s, poll_s, max_restarts, journal_lines).
    type: dict
    required: true
  gate:
    description:
      - Options of module gpufleet.sglang.throughput_gate for each measurement (url, shape, trials, telemetry...).
    type: dict
    required: true
  sweep_dir:
    description: Controller directory for the sweep and tuned profile files (the gate's baseline directory).
    type: str
    default: ""
  key:
    description: The baseline key parts (host, model, model_revision, profile, sglang_version, gpu_model).
    type: dict
    default: {}
extends_documentation_fragment:
  - gpufleet.sglang.sglang_paths
  - gpufleet.sglang.sglang_paths.tune
attributes:
  check_mode:
    support: partial
    description: Reports the starting setting and changes nothing.
"""

EXAMPLES = r"""
- name: Sweep the attention backend and the running requests for 20 minutes
  gpufleet.sglang.sglang_tune:
    space:
      attention_backend: [flashinfer, triton]
      max_running_requests: [64, 256, 1024]
    base_flags: {tp: 8, attention_backend: flashinfer, max_running_requests: 64}
    budget_s: 1200
    server: {version: 0.5.23, model_path: /srv/models/glm5, config_file: /etc/sglang/sglang-server.yaml}
    ready: {url: "http://127.0.0.1:30000/ready", timeout_s: 1800}
    gate: {url: "http://127.0.0.1:30000", trials: 5}
"""

RETURN = r"""
candidates:
  description: Every candidate (flags, setting, status, median tok/s, trials, p_vs_best, GPU power % of limit,
    verdict, reason, journal tail, elapsed_s), in the order evaluated.
  returned: always
  type: list
  elements: dict
table:
  description: The candidate table as lines.
  returned: always
  type: list
  elements: str
best:
  description: The best candidate.
  returned: always
  type: dict
beats_original:
  description: Whether the best beats the original significantly.
  returned: always
  type: bool
"""
