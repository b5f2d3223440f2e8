#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_health
short_description: Say whether each NVIDIA GPU of a node is healthy, degraded or failed
version_added: "0.1.0"
description:
  - Reads C(nvidia-smi -q -x) (ECC errors, row remapping, retired pages, PCIe link, clock event reasons,
    power, persistence mode, the driver's recovery action) and the NVRM Xid lines of the kernel log, and
    returns a verdict per GPU and one for the node.
  - A verdict is V(healthy), V(degraded) followed by its reasons (it serves, but look at it) or V(failed)
    followed by its reasons (keep the node out of service). The reasons of the worst level are joined
    with semicolons in a fixed order, node reasons first (GPUs missing, nvidia-smi failing, Xid events of
    a GPU nvidia-smi no longer lists), then each GPU by index (Xid, readings nvidia-smi could not take,
    recovery action, row remapping, ECC, retired pages, PCIe link, clocks, power, persistence).
  - Xid codes whose NVIDIA immediate action is a GPU reset, a reboot, or the ECC/NVLink workflow (for example
    48, 64, 74, 79, 95, 119, 120, 140) make the GPU V(failed); any other Xid makes it V(degraded).
    docs/gpu-health.md has the table and the sources.
  - When O(nvidia_smi_path) is missing or fails, the node is V(failed) with nvidia-smi's message as the reason.
  - Read-only, except that with O(textfile) it writes the result as Prometheus text for node-exporter's
    textfile collector (the metrics docs/monitoring.md names); in check mode nothing is written.
author:
  - gpufleet.sglang contributors (!UNKNOWN)
options:
  kernel_log:
    description:
      - Where the Xid lines come from.
      - V(journalctl) runs C(journalctl -k --no-pager -o short-iso) (the current boot; O(since) narrows it).
      - V(dmesg) runs C(dmesg) (the kernel ring buffer, since boot or less when it wrapped).
      - V(file) reads O(kernel_log_path) (a saved C(journalctl -k) or C(dmesg) output, or C(/dev/kmsg) records).
      - V(text) takes O(kernel_log_text), a log the caller read elsewhere (the host of a container), or
        O(kernel_log_problem), why it could not.
      - V(none) skips the kernel log.
      - A kernel log that cannot be read makes the node V(degraded) (the reason says why), not V(healthy); so does a
        C(journalctl -k) of the whole boot without a single kernel message, which is what a container's journal
        shows (it gets no kernel messages; read the host's log).
    type: str
    choices: [journalctl, dmesg, file, text, none]
    default: journalctl
  kernel_log_text:
    description: With O(kernel_log=text), the kernel log lines (those with Xid events are enough).
    type: str
  kernel_log_problem:
    description: With O(kernel_log=text), why the caller could not read the kernel log (the node is V(degraded)).
    type: str
  kernel_log_scope:
    description:
      - V(node) - the kernel log is this node's own; an Xid of an address nvidia-smi does not list is this node's
        (its GPU fell off the bus).
      - V(host) - the log is the host's (the Proxmox host of a container) and carries every GPU of that host; an Xid
        of an address nvidia-smi does not list belongs to another guest and is only counted (C(xid_other_gpus)). A
        GPU of this node that fell off the bus shows as missing against O(expected_gpu_count).
    type: str
    choices: [node, host]
    default: node
  kernel_log_path:
    description: The file read with O(kernel_log=file).
    type: path
  since:
    description:
      - With O(kernel_log=journalctl), only Xid events from this time on (passed as C(--since=)); any time
        journalctl accepts, for example V(-1h), V(today) or V(2026-12-01 10:00:00).
      - Unset, the whole current boot is read.
    type: str
  expected_gpu_count:
    description:
      - How many GPUs the node must have. Fewer is V(failed), more is V(degraded).
      - Unset, the count is not checked.
    type: int
  busy_utilization_percent:
    description:
      - A GPU at or above this utilisation (and without the C(gpu_idle) clock event reason) is busy.
      - The PCIe link and power checks only judge busy GPUs, because links train down and power drops at idle.
    type: int
    default: 50
  min_power_percent:
    description:
      - A busy GPU drawing less than this share of its power limit is V(degraded) (C(under power)).
      - The default catches the reference deployment's under-use (about 250 W of 600 W, 42%).
    type: float
    default: 45.0
  max_volatile_correctable_ecc:
    description: More correctable ECC errors than this since the driver loaded (all volatile counters) is V(degraded).
    type: int
    default: 100
  degrading_clock_events:
    description:
      - Clock event reasons that make a GPU V(degraded) while active (C(clocks held down)). C(sw_power_cap) is
        normal near the power limit under load and is not among the defaults.
    type: list
    elements: str
    choices:
      - gpu_idle
      - applications_clocks_setting
      - sw_power_cap
      - hw_slowdown
      - hw_thermal_slowdown
      - hw_power_brake_slowdown
      - sync_boost
      - sw_thermal_slowdown
      - display_clocks_setting
    default: [hw_slowdown, hw_thermal_slowdown, hw_power_brake_slowdown, sw_thermal_slowdown]
  require_persistence_mode:
    description: Persistence mode off makes a GPU V(degraded).
    type: bool
    default: true
  pcie_check_idle:
    description:
      - Also compare the PCIe link with its maximum on idle GPUs.
      - Off by default since NVIDIA documents that the current link generation and width may be reduced when the
        GPU is not in use. Turn it on for hosts whose idle links stay at their maximum (the real H200 capture did).
    type: bool
    default: false
  xid_ignore_codes:
    description: Xid codes not to judge (they are still returned in RV(xid_events)).
    type: list
    elements: int
    default: []
  textfile:
    description:
      - Also write the result to this file as Prometheus text (C(gpufleet_node_health), C(gpufleet_gpu_health),
        C(gpufleet_gpu_count), C(gpufleet_gpu_power_draw_watts), C(gpufleet_gpu_power_limit_watts),
        C(gpufleet_gpu_health_timestamp_seconds)), for node-exporter's textfile collector.
      - The power series are written only for GPUs busy at the check, since the file is the reading of one moment
        and an idle GPU's draw would read as under-use to an alert that sees requests waiting later.
      - The name must end in C(.prom). Its directory is created (mode C(0755)) where it is missing, not in check
        mode; an existing one is left as it is (Debian's C(prometheus-node-exporter) reads
        C(/var/lib/prometheus/node-exporter), which role fleet_monitoring keeps). The file is replaced
        atomically, also when the task then fails with O(fail_on), so the alert rules see a failure.
      - The task is C(changed) only when the file says something new; the time of the check alone is not a change.
    type: path
  fail_on:
    description:
      - Fail the task when the node's verdict is at least this bad; V(none) always succeeds and only reports.
    type: str
    choices: [none, degraded, failed]
    default: none
extends_documentation_fragment:
  - gpufleet.sglang.nvidia_smi
attributes:
  check_mode:
    support: full
    description: Runs the same in check mode, but writes no O(textfile).
notes:
  - Reading the kernel log usually needs root (C(become)) or membership of the C(systemd-journal) or C(adm) group.
seealso:
  - module: gpufleet.sglang.nvidia_gpu_info
"""

EXAMPLES = r"""
- name: Check the GPUs before the node goes (back) into the gateway
  gpufleet.sglang.gpu_health:
    expected_gpu_count: 8
    since: -2h
    fail_on: failed
  register: __gpu_health

- name: Report a degraded GPU
  ansible.builtin.debug:
    msg: "{{ __gpu_health.verdict }}"
  when: __gpu_health.level == 'degraded'

- name: Judge a saved kernel log and ignore application page faults
  gpufleet.sglang.gpu_health:
    kernel_log: file
    kernel_log_path: /var/tmp/dmesg.txt
    xid_ignore_codes: [31]
"""

RETURN = r"""
verdict:
  description:
    - The node's verdict, V(healthy), or V(degraded) or V(failed) followed by a colon and the reasons of that level.
  returned: always
  type: str
  sample: >-
    failed: 7 of 8 expected GPUs present; xid 79 (GPU has fallen off the bus) on 0000:81:00,
    which nvidia-smi does not list
level:
  description: The node's verdict without reasons, V(healthy), V(degraded) or V(failed).
  returned: always
  type: str
  sample: failed
reasons:
  description: Every reason found on the node (all levels), GPU reasons prefixed with C(gpu <index>:).
  returned: always
  type: list
  elements: str
  sample: ["gpu 3: PCIe link Gen3 x8 (max Gen5 x16)"]
gpu_count:
  description: How many GPUs nvidia-smi listed.
  returned: always
  type: int
  sample: 8
driver_version:
  description: The driver version nvidia-smi reported; null when nvidia-smi gave nothing usable.
  returned: always
  type: str
  sample: "580.159.04"
gpus:
  description: One record per GPU in nvidia-smi's order, with what was read and its verdict.
  returned: always
  type: list
  elements: dict
  contains:
    index: {description: Position in nvidia-smi's output (its GPU index), type: int}
    pci_bus_id: {description: PCI bus id, type: str, sample: "00000000:01:00.0"}
    name: {description: Product name, type: str}
    uuid: {description: GPU UUID, type: str}
    verdict: {description: This GPU's verdict, type: str, sample: "degraded: PCIe link Gen3 x8 (max Gen5 x16)"}
    level: {description: "V(healthy), V(degraded) or V(failed)", type: str}
    busy:
      description:
        - Whether the GPU was busy (at least O(busy_utilization_percent) and not C(gpu_idle)).
        - The link and power are judged only then.
      type: bool
    reasons: {description: Every reason found on this GPU, type: list, elements: str}
    persistence_mode: {description: Persistence mode on, type: bool}
    recovery_action: {description: "The driver's recovery action (V(None) when nothing is needed)", type: str}
    trouble:
      description:
        - The markers nvidia-smi printed instead of readings (C(GPU requires reset), C(GPU is lost),
          C(Unknown Error)).
      type: list
      elements: str
    performance_state: {description: Performance state, type: str, sample: P0}
    utilization_gpu: {description: GPU utilisation in percent, type: int}
    temperature_gpu: {description: GPU temperature in C, type: int}
    pcie:
      description: PCIe link generation and width, current and max, and the replay counter.
      type: dict
      sample: {"gen_current": 5, "gen_max": 5, "width_current": 16, "width_max": 16, "replay_counter": 0}
    clock_events:
      description: Each clock event reason and whether it is active.
      type: dict
      sample: {"gpu_idle": true, "sw_power_cap": false, "hw_slowdown": false, "hw_power_brake_slowdown": false}
    power:
      description: Power draw (1 s average and instant) and limits in W.
      type: dict
      sample: {"draw_w": 122.25, "draw_instant_w": 81.23, "limit_w": 700.0, "default_limit_w": 700.0,
               "max_limit_w": 700.0}
    ecc:
      description: ECC mode, volatile (since the driver loaded) and aggregate (lifetime) counters, repair flags.
      type: dict
    retired_pages:
      description: Retired page counts and pending flags (GPUs before Ampere; null where not applicable).
      type: dict
    remapped_rows:
      description: Remapped rows (correctable, uncorrectable), pending and failure flags, the bank histogram.
      type: dict
      sample: {"correctable": 0, "uncorrectable": 0, "pending": false, "failure": false,
               "histogram": {"max": 3072, "high": 0, "partial": 0, "low": 0, "none": 0}}
xid_events:
  description: The Xid events of the kernel log (all of them, ignored codes included).
  returned: always
  type: list
  elements: dict
  sample: [{"pci": "0000:81:00", "code": 79, "pid": null, "process": null, "text": "GPU has fallen off the bus.",
            "time": "2026-11-30T09:10:02+0000"}]
xid_unparsed:
  description: Kernel log lines that mention an Xid but not in a known shape (clipped).
  returned: always
  type: list
  elements: str
xid_other_gpus:
  description: With O(kernel_log_scope=host), the Xid events of GPUs nvidia-smi does not list (other guests' GPUs).
  returned: always
  type: int
kernel_log:
  description: How the kernel log was read (source, command, since, scope).
  returned: always
  type: dict
  sample: {"source": "journalctl", "command": ["journalctl", "-k", "--no-pager", "-o", "short-iso"],
           "since": null}
thresholds:
  description: The thresholds the verdicts used (the options with their defaults).
  returned: always
  type: dict
textfile:
  description: The O(textfile) and whether it was written (not in check mode).
  returned: when O(textfile) is set
  type: dict
  sample: {"path": "/var/lib/prometheus/node-exporter/gpufleet_gpu_health.prom", "written": true}
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.sglang.plugins.module_utils.nvidia.gpu_health import (
    DEFAULTS,
    FAIL_ON,
    KERNEL_LOG_SCOPES,
    KERNEL_LOG_SOURCES,
    GpuHealthError,
    collect,
    fails,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.nvidia.gpu_health_metrics import (
    MetricsError,
    render,
    write_textfile,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.nvidia.host_calls import host_calls
from ansible_collections.gpufleet.sglang.plugins.module_utils.nvidia.smi import CLOCK_EVENT_REASONS

ARGUMENT_SPEC = {
    "nvidia_smi_path": {"type": "str", "default": "nvidia-smi"},
    "kernel_log": {"type": "str", "choices": list(KERNEL_LOG_SOURCES), "default": "journalctl"},
    "kernel_log_path": {"type": "path"},
    "kernel_log_text": {"type": "str"},
    "kernel_log_problem": {"type": "str"},
    "kernel_log_scope": {"type": "str", "choices": list(KERNEL_LOG_SCOPES), "default": "node"},
    "since": {"type": "str"},
    "expected_gpu_count": {"type": "int"},
    "busy_utilization_percent": {"type": "int", "default": DEFAULTS["busy_utilization_percent"]},
    "min_power_percent": {"type": "float", "default": DEFAULTS["min_power_percent"]},
    "max_volatile_correctable_ecc": {"type": "int", "default": DEFAULTS["max_volatile_correctable_ecc"]},
    "degrading_clock_events": {
        "type": "list",
        "elements": "str",
        "choices": list(CLOCK_EVENT_REASONS),
        "default": DEFAULTS["degrading_clock_events"],
    },
    "require_persistence_mode": {"type": "bool", "default": DEFAULTS["require_persistence_mode"]},
    "pcie_check_idle": {"type": "bool", "default": DEFAULTS["pcie_check_idle"]},
    "xid_ignore_codes": {"type": "list", "elements": "int", "default": DEFAULTS["xid_ignore_codes"]},
    "fail_on": {"type": "str", "choices": list(FAIL_ON), "default": "none"},
    "textfile": {"type": "path"},
}


def run_module() -> None:
    module = AnsibleModule(
        argument_spec=ARGUMENT_SPEC,
        required_if=[
            ("kernel_log", "file", ("kernel_log_path",)),
            ("kernel_log", "text", ("kernel_log_text", "kernel_log_problem"), True),
        ],
        supports_check_mode=True,
    )

    which, run = host_calls(module)

    def read_file(path: str) -> str:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()

    try:
        result = collect(module.params, which, run, read_file)
    except GpuHealthError as exc:
        module.fail_json(msg=str(exc))
    changed = False
    if module.params["textfile"]:
        path = module.params["textfile"]
        written = not module.check_mode
        try:
            text = render(result, time.time())
            if written:
                changed = write_textfile(path, text, create_dir=True)
        except MetricsError as exc:
            module.fail_json(msg=f"GPU health: {result['verdict']}; the textfile was not written: {exc}", **result)
        result["textfile"] = {"path": path, "written": written}
    if fails(result["level"], module.params["fail_on"]):
        module.fail_json(msg=f"GPU health: {result['verdict']}", changed=changed, **result)
    module.exit_json(changed=changed, **result)


def main() -> None:
    run_module()


if __name__ == "__main__":
    main()
