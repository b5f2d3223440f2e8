#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gate_metrics
short_description: Write a node's last throughput gate run as Prometheus text for node-exporter's textfile collector
version_added: "0.1.0"
description:
  - Renders the throughput gate's record of one run (the role throughput_gate's C(throughput_gate_result))
    as the metrics docs/monitoring.md names (C(gpufleet_gate_verdict), C(gpufleet_gate_failed),
    C(gpufleet_gate_output_tokens_per_second), C(gpufleet_gate_baseline_tokens_per_second),
    C(gpufleet_gate_delta_ratio), C(gpufleet_gate_tolerance_ratio), C(gpufleet_gate_baseline_concurrency),
    C(gpufleet_gate_timestamp_seconds), and C(gpufleet_gate_info) with the baseline key as labels) and puts
    them at O(textfile) atomically (a scrape reads the old file or the new one).
  - Reports C(changed) only when the verdict, the baseline, the tolerance or the key changed, not when only
    the run's own median, delta and time did. In check mode nothing is written.
author:
  - gpufleet.sglang contributors (!UNKNOWN)
options:
  record:
    description:
      - The gate's record of the run (verdict, failed, median_output_tokens_per_s, baseline_median, delta_pct,
        key, shape, time).
    type: dict
    required: true
  tolerance:
    description: The gate's tolerance the run was judged with; default - the throughput_gate module's.
    type: float
  baseline_written:
    description:
      - The run wrote the baseline (a first run, an update, an accepted one); the baseline is then the run's median.
    type: bool
    default: false
  textfile:
    description:
      - Where the file goes, a C(*.prom) file in an existing directory (node-exporter's
        C(--collector.textfile.directory)).
    type: path
    required: true
attributes:
  check_mode:
    support: full
    description: Renders the file, writes nothing.
  diff_mode:
    support: none
    description: Returns no diff.
  platform:
    support: full
    platforms: posix
    description: Any POSIX target with Python.
"""

EXAMPLES = r"""
- name: Export the gate's result for the alert rules
  gpufleet.sglang.gate_metrics:
    record: "{{ throughput_gate_result }}"
    tolerance: 0.1
    textfile: /var/lib/prometheus/node-exporter/gpufleet_gate.prom
"""

RETURN = r"""
textfile:
  description: The O(textfile) and whether it was written (not in check mode).
  returned: always
  type: dict
  sample: {"path": "/var/lib/prometheus/node-exporter/gpufleet_gate.prom", "written": true}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.metrics import GateMetricsError, render, same_state
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.spec import default
from ansible_collections.gpufleet.sglang.plugins.module_utils.nvidia.gpu_health_metrics import (
    MetricsError,
    write_textfile,
)

ARGUMENT_SPEC: dict[str, dict[str, object]] = {
    "record": {"type": "dict", "required": True},
    "tolerance": {"type": "float"},
    "baseline_written": {"type": "bool", "default": False},
    "textfile": {"type": "path", "required": True},
}


def run_module() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    tolerance = params["tolerance"] if params["tolerance"] is not None else default("tolerance")
    path = params["textfile"]
    try:
        text = render(params["record"], tolerance, baseline_written=params["baseline_written"])
        changed = False if module.check_mode else write_textfile(path, text, same=same_state)
    except (GateMetricsError, MetricsError) as exc:
        module.fail_json(msg=f"gate_metrics: the textfile {path} was not written: {exc}")
    module.exit_json(changed=changed, textfile={"path": path, "written": not module.check_mode})


def main() -> None:
    run_module()


if __name__ == "__main__":
    main()
