#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fleet_report
short_description: Render the fleet's gate history and last sweeps as one self-contained HTML page
version_added: "0.1.0"
description:
  - An action plugin; it runs on the controller only (plugins/action/fleet_report.py) and touches no host.
  - Reads the throughput gate's history files (C(*.history.jsonl)) and the sweeps of tune.yml (C(*.sweep.json))
    in O(baseline_dir), draws with matplotlib the output tok/s per host over time (new SGLang releases and model
    revisions marked), the last sweep per host (tok/s per candidate) and the GPU power against the limit per run,
    and writes O(dest) with the charts embedded (SVG data URIs) and the tables the charts come from.
  - Next to the throughput chart, a table of the cold starts the gate recorded (C(cold_start) of a history record),
    per node and release - time to ready, SGLang's startup phases, the CUDA-graph capture - each also marked on
    the chart.
  - A line of a history file that is not a gate run record is listed on the page as a problem, not guessed; so is a
    C(cold_start) of the wrong shape (the run is shown without it).
  - With O(alerts), a table of the alert rules' firing episodes (alert, node, severity, other labels, first and last
    sample firing, minutes) from Prometheus' answer to a range query of C(ALERTS{alertstate="firing"}); an answer or a
    series of the wrong shape is listed as a problem.
requirements:
  - matplotlib on the controller (requirements.txt)
author:
  - gpufleet.sglang contributors (!UNKNOWN)
options:
  baseline_dir:
    description: The gate's baseline directory on the controller (throughput_gate_baseline_dir).
    type: path
    required: true
  dest:
    description: The HTML file to write (atomically).
    type: path
    required: true
  title:
    description: Title of the page.
    type: str
    default: gpufleet.sglang fleet report
  alerts:
    description:
      - The JSON answer of Prometheus' C(GET /api/v1/query_range) for C(ALERTS{alertstate="firing"}) (role
        fleet_monitoring, entry point alerts, publishes it as C(fleet_monitoring_alerts.answer)); unset, the page says
        that no alert history was asked for.
    type: raw
  alerts_step_s:
    description: The step of that range query, seconds; samples more than two steps apart are separate episodes.
    type: float
    default: 60.0
attributes:
  check_mode:
    support: full
    description: Reads the files and reports what it would write.
"""

EXAMPLES = r"""
- name: Render the report
  gpufleet.sglang.fleet_report:
    baseline_dir: "{{ inventory_dir }}/.gpufleet/baselines"
    dest: "{{ inventory_dir }}/.gpufleet/report.html"
  run_once: true
"""

RETURN = r"""
runs:
  description: Gate runs read.
  returned: always
  type: int
sweeps:
  description: Hosts with a sweep.
  returned: always
  type: list
  elements: str
problems:
  description: Lines or files that could not be read.
  returned: always
  type: list
  elements: str
dest:
  description: The page written.
  returned: always
  type: str
alerts:
  description: Alert episodes shown (null without O(alerts)).
  returned: always
  type: int
"""
