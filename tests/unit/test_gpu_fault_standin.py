# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The nvidia-smi stand-in gives gpu_health what it reads, and tests/standins/nvidia/gpu_fault.py injects a fault.

What gpu_health reads: ``nvidia-smi -q -x`` (the XML report), the query fields (the gate's telemetry reads
the same GPUs) and a kernel log with an Xid line. The faults: an Xid 79 line (failed), a link at Gen3 x8
under load, a power brake (degraded); ``clear`` puts everything back.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.gpufleet.sglang.plugins.module_utils.nvidia.gpu_health import check_options, evaluate

REPO = Path(__file__).resolve().parents[2]
STANDIN = REPO / "tests/standins/nvidia-smi"
FAULT = REPO / "tests/standins/nvidia/gpu_fault.py"
BASE = REPO / "tests/standins/nvidia/profiles/rtxpro6000-8gpu.json"
FIELDS = "index,utilization.gpu,pcie.link.gen.current,pcie.link.width.current,clocks_event_reasons.active,power.draw"


@pytest.fixture
def host(tmp_path):
    """A stand-in host: the pointer file at the 8-GPU profile, a state directory, an empty kernel log."""
    pointer = tmp_path / "nvidia-smi.json"
    pointer.write_text(json.dumps({"profile": str(BASE)}), encoding="utf-8")
    log = tmp_path / "kernel.log"
    log.write_text("", encoding="utf-8")
    return {"pointer": pointer, "state": tmp_path / "state", "log": log}


def smi(host, *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(STANDIN), *args],
        env={"STANDIN_NVIDIA_SMI_PROFILE": str(host["pointer"])},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def fault(host, *args: str) -> str:
    argv = [sys.executable, str(FAULT), *args, "--pointer", str(host["pointer"]), "--state-dir", str(host["state"])]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.strip()


def verdict(host) -> str:
    return evaluate(smi(host, "-q", "-x"), host["log"].read_text(encoding="utf-8"), check_options({}))["verdict"]


def query(host) -> dict[int, list[str]]:
    rows = smi(host, f"--query-gpu={FIELDS}", "--format=csv,noheader,nounits").strip().splitlines()
    return {int(cells[0]): cells[1:] for cells in (row.split(", ") for row in rows)}


def test_standin_serves_what_gpu_health_reads(host):
    assert verdict(host) == "healthy"
    rows = query(host)
    assert sorted(rows) == list(range(8))
    assert rows[3][:4] == ["0", "1", "16", "0x0000000000000001"]  # idle: Gen1 x16, gpu_idle
    assert 0 < float(rows[3][4]) < 100


def test_link_x8_fault_in_the_xml_and_the_query_fields_then_cleared(host):
    before = host["pointer"].read_text(encoding="utf-8")
    fault(host, "inject", "link-x8")
    assert verdict(host) == "degraded: gpu 3: PCIe link Gen3 x8 (max Gen5 x16)"
    rows = query(host)
    assert rows[3][:3] == ["98", "3", "8"]
    assert rows[2][:3] == ["98", "5", "16"]  # the others busy at their maximum link, as in the XML
    assert fault(host, "clear") == f"{host['pointer']} restored"
    assert host["pointer"].read_text(encoding="utf-8") == before
    assert verdict(host) == "healthy"


def test_power_brake_fault(host):
    fault(host, "inject", "power-brake")
    assert verdict(host).startswith("degraded: gpu 5: clocks held down: hw_slowdown, hw_power_brake_slowdown")
    assert query(host)[5][3] == "0x0000000000000088"
    fault(host, "clear")
    assert verdict(host) == "healthy"


def test_xid79_fault_fails_the_gpu_of_that_node_only_and_clear_removes_the_line(host, tmp_path):
    other = tmp_path / "other-node.log"
    other.write_text("", encoding="utf-8")
    host["log"].write_text("2026-12-01T10:00:00+0000 node1 kernel: a real line\n", encoding="utf-8")
    line = fault(host, "inject", "xid79", "--kernel-log", str(host["log"]), "--gpu", "2")
    assert "NVRM: Xid (PCI:0000:41:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus." in line
    assert verdict(host) == "failed: gpu 2: xid 79 (GPU has fallen off the bus)"
    assert evaluate(smi(host, "-q", "-x"), other.read_text(encoding="utf-8"), check_options({}))["level"] == "healthy"
    assert fault(host, "clear", "--kernel-log", str(host["log"])) == f"1 Xid line(s) removed from {host['log']}"
    assert host["log"].read_text(encoding="utf-8") == "2026-12-01T10:00:00+0000 node1 kernel: a real line\n"
    assert verdict(host) == "healthy"
