# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""GPU health in the playbooks, run for real on this machine (local connection, the nvidia-smi stand-in).

- ``site.yml --tags health`` runs the check on every GPU node and prints one line per node; it runs
  no task of the deploy, the gate or the gateway (the `always` tasks of playbooks/sglang.yml end
  with the play) and writes only each node's health textfile.
- ``playbooks/sglang.yml`` stops at a node whose GPU health is failed before anything changes on it,
  with the node, the GPU and why, and never reaches the deploy, the gate or the gateway (in check mode:
  the code before this change deployed here).
Each node reads its own stand-in profile through a wrapper (nodes share this machine).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml
from lib.playbook import Result, run_playbook

REPO = Path(__file__).resolve().parents[2]
STANDIN = REPO / "tests/standins/nvidia-smi"
PROFILES = REPO / "tests/standins/nvidia/profiles"
LOGS = REPO / "tests/unit/fixtures/nvidia/kernel-log"
NODES = {
    # node: (stand-in profile, kernel log)
    "node1": ("rtxpro6000-8gpu-missing-gpu", "journal-xid79-gpu-lost.txt"),
    "node2": ("rtxpro6000-8gpu", "journal-clean.txt"),
    "node3": ("rtxpro6000-8gpu-link-x8-gen3", "journal-clean.txt"),
    # node2's profile again: three containers of one host, each shown its own host log in one run
    "node4": ("rtxpro6000-8gpu", "journal-clean.txt"),
    "node5": ("rtxpro6000-8gpu", "journal-clean.txt"),
}
# the tasks a health-only run may run (the host's facts of gpu_nodes.yml are gathered whatever the tags)
HEALTH_TASKS = {
    "Gathering Facts",
    "End the rollout in a run that only checks GPU health",
    "Check the node's GPUs",
    "gpufleet.sglang.sglang_server : Forget a kernel log read by an earlier check of this play",
    "gpufleet.sglang.sglang_server : Read the host's kernel log (file)",
    "gpufleet.sglang.sglang_server : Note the host's kernel log",
    "gpufleet.sglang.sglang_server : Check the GPUs (gpu_health)",
    "gpufleet.sglang.sglang_server : Publish sglang_server_gpu_health",
    "One line per node",
    # the tune play's end (site.yml imports it with the tag never; its end is tagged always)
    "End the play in a site.yml run without the tag tune",
}


def inventory(tmp_path: Path, nodes: list[str], host_logs: dict[str, Path] | None = None) -> Path:
    hosts = {}
    for node in nodes:
        profile, log = NODES[node]
        smi = tmp_path / f"nvidia-smi-{node}"
        env = f"STANDIN_NVIDIA_SMI_PROFILE={PROFILES / (profile + '.json')}"
        smi.write_text(f'#!/bin/sh\n{env} exec {sys.executable} {STANDIN} "$@"\n', encoding="utf-8")
        smi.chmod(0o755)
        hosts[node] = {
            "sglang_server_health_nvidia_smi_path": str(smi),
            "sglang_server_health_kernel_log_path": str(LOGS / log),
            "sglang_server_health_textfile": str(tmp_path / node / "gpufleet_gpu_health.prom"),
        }
    data = {
        "all": {
            "vars": {
                "ansible_connection": "local",
                "ansible_python_interpreter": sys.executable,
                "ansible_become": False,
                "sglang_root": str(tmp_path / "sglang"),
                "sglang_server_health_kernel_log": "file",
                "sglang_server_health_expected_gpu_count": 8,
            },
            "children": {
                "gpu_nodes": {"hosts": hosts},
                "sglang_nodes": {"hosts": dict.fromkeys(nodes)},
                "proxmox_hosts": {"hosts": {"pve": {}} if host_logs else {}},
            },
        }
    }
    if host_logs:
        # the nodes are containers of "pve": their kernel log is read there (the file stands in for its journal)
        for node in nodes:
            hosts[node]["sglang_server_health_kernel_log_host"] = "pve"
            hosts[node]["sglang_server_health_kernel_log_path"] = str(host_logs[node])
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def playbook(
    tmp_path: Path,
    nodes: list[str],
    play: str,
    *args: str,
    check: bool = False,
    host_logs: dict[str, Path] | None = None,
) -> Result:
    # the default callback with JSON results: the tests read the tasks' messages as JSON strings
    env = {"ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default", "ANSIBLE_CALLBACK_RESULT_FORMAT": "json"}
    inv = inventory(tmp_path, nodes, host_logs)
    return run_playbook(REPO / play, inventory=inv, args=args, env=env, check=check, timeout=600)


def tasks_run(output: str) -> set[str]:
    """The tasks that ran, without Ansible's own argument checks of the roles (which run under any tags)."""
    return {t for t in re.findall(r"^TASK \[(.+?)\] \*", output, re.M) if " : Validating arguments against " not in t}


def test_health_only_run_checks_every_node_prints_one_line_each_and_deploys_nothing(tmp_path):
    proc = playbook(tmp_path, ["node1", "node2", "node3"], "site.yml", "--tags", "health").expect(0)
    ran = tasks_run(proc.stdout)
    assert ran <= HEALTH_TASKS, sorted(ran - HEALTH_TASKS)
    assert "gpufleet.sglang.sglang_server : Check the GPUs (gpu_health)" in ran
    lines = re.findall(r'^\s+"(node\d: .*)",?$', proc.stdout, re.M)
    assert len(lines) == 3, proc.stdout[-3000:]
    assert lines[0].startswith("node1: failed: 7 of 8 expected GPUs present; xid 79 (GPU has fallen off the bus)")
    assert lines[1] == "node2: healthy"
    assert lines[2] == "node3: degraded: gpu 3: PCIe link Gen3 x8 (max Gen5 x16)"
    # nothing but the textfiles was written: no deployment, no release
    assert not (tmp_path / "sglang").exists()
    node1 = (tmp_path / "node1/gpufleet_gpu_health.prom").read_text(encoding="utf-8")
    assert "\ngpufleet_node_health 2\n" in node1
    assert "\ngpufleet_gpu_count 7\n" in node1
    assert "\ngpufleet_node_health 0\n" in (tmp_path / "node2/gpufleet_gpu_health.prom").read_text(encoding="utf-8")
    # the first run creates each node's textfile directory and writes its textfile: one change, gpu_health's
    assert re.findall(r"^node\d\s+: ok=\d+\s+changed=(\d+)", proc.stdout, re.M) == ["1", "1", "1"]
    assert oct((tmp_path / "node1").stat().st_mode & 0o777) == "0o755"
    # the same verdicts again: the textfiles are rewritten but nothing is reported changed
    again = playbook(tmp_path, ["node1", "node2", "node3"], "site.yml", "--tags", "health").expect(0)
    assert re.findall(r"^node\d\s+: ok=\d+\s+changed=(\d+)", again.stdout, re.M) == ["0", "0", "0"]


def test_rollout_stops_at_a_failed_gpu_before_anything_changes(tmp_path):
    # in check mode, so that a rollout that did not stop (the code before the check) changes nothing here;
    # the stop does not depend on check mode (extensions/molecule/fleet drill H runs it for real)
    proc = playbook(tmp_path, ["node1"], "playbooks/sglang.yml", check=True).expect(2)
    message = re.search(r'"msg": "(node1: GPU health failed: [^"]*)"', proc.stdout)
    assert message, proc.stdout[-4000:]
    text = message.group(1)
    assert "7 of 8 expected GPUs present; xid 79 (GPU has fallen off the bus) on 0000:81:00" in text
    assert "Nothing was deployed or restarted on the node." in text
    assert "No gateway routes to it yet" in text
    assert "The rollout stops here; no later batch is started." in text
    # the plan before the rollout reads the node (role sglang's entry point plan, read-only) and changes nothing;
    # the rollout itself runs nothing of the release or the gate
    plan, rollout = proc.stdout.split("PLAY [SGLang - release", 1)
    assert "PLAY [SGLang - plan" in plan
    assert not re.search(r"^changed: ", plan, re.M), plan[-3000:]
    ran = tasks_run(rollout)
    assert "Stop the rollout at a node with a failed GPU" in ran
    assert not [t for t in ran if t.startswith(("gpufleet.sglang.sglang :", "gpufleet.sglang.throughput_gate"))], ran
    assert "Deploy and gate" not in proc.stdout
    assert not (tmp_path / "sglang").exists()


def xid79(bus: str) -> str:
    line = f"NVRM: Xid (PCI:{bus}): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    return f"2026-12-01T10:00:00+0000 pve kernel: {line}\n"


def test_containers_read_the_xid_lines_on_their_host_and_judge_only_their_own_gpus(tmp_path):
    # node2's profile lists eight GPUs, gpu 4 on 0000:81:00; the host's log is read on "pve" (delegated).
    # Three containers with node2's profile in one run, each shown another state of the host's log:
    # node2 another guest's Xid only, node4 that and its own gpu 4's, node5 a log that cannot be read.
    other, own, gone = tmp_path / "pve-kernel.log", tmp_path / "pve-kernel-own.log", tmp_path / "pve-gone.log"
    other.write_text(xid79("0000:f1:00"), encoding="utf-8")  # another guest's GPU
    own.write_text(xid79("0000:f1:00") + xid79("0000:81:00"), encoding="utf-8")  # and node4's gpu 4
    logs = {"node2": other, "node4": own, "node5": gone}
    proc = playbook(tmp_path, list(logs), "site.yml", "--tags", "health", host_logs=logs).expect(0)
    assert re.findall(r'^\s+"(node2: .*)",?$', proc.stdout, re.M) == ["node2: healthy"], proc.stdout[-3000:]
    # one read per node, whatever the source: no skipped alternatives
    assert proc.stdout.count("TASK [gpufleet.sglang.sglang_server : Read the host's kernel log (file)] *") == 1
    assert "skipping: [node" not in proc.stdout.split("Read the host's kernel log (file)] *")[1].split("TASK [")[0]
    line = re.findall(r'^\s+"(node4: .*)",?$', proc.stdout, re.M)
    assert line == ["node4: failed: gpu 4: xid 79 (GPU has fallen off the bus)"], proc.stdout[-3000:]
    # a host log that cannot be read names the host, and is not a clean log
    line = re.findall(r'^\s+"(node5: .*)",?$', proc.stdout, re.M)
    assert line, proc.stdout[-3000:]
    assert line[0].startswith("node5: degraded: kernel log not read: pve: file:"), line
    # and says why: the command's own error, not only its exit status
    assert "No such file or directory" in line[0], line
