# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The throughput gate's module and role run through ansible-runner against localhost, shared by the
integration tests of the gate (test_throughput_gate, test_gate_faults, test_gate_baseline_role): the
small load shape, the stand-in's rate, the two plays, the role's variables and the runner with its
result."""

from __future__ import annotations

import sys
from pathlib import Path

import ansible_runner
from lib.playbook import REPO, ansible_settings, runner_data_dir

PROFILE = REPO / "tests" / "standins" / "nvidia" / "profiles" / "rtxpro6000-8gpu.json"

# small and fast: 8 streams, 16 requests of 32 tokens per trial
SHAPE = {
    "concurrency": 8,
    "requests_per_trial": 16,
    "input_len": 32,
    "output_len": 32,
    "warmup_requests": 8,
    "trials": 5,
    "ready_timeout": 20,
    "request_timeout": 10,
}
RATE = 2000.0
# the GPU model of the stand-in profile, as nvidia_driver_facts name it (part of a baseline's key)
GPU = "NVIDIA RTX PRO 6000 Blackwell Server Edition"

MODULE_PLAY = """
- name: Gate
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Run the throughput gate
      gpufleet.sglang.throughput_gate: "{{ gate_args }}"
      register: gate
"""

ROLE_PLAY = """
- name: Gate with the role
  hosts: localhost
  gather_facts: false
  roles:
    - role: gpufleet.sglang.throughput_gate
"""


def role_vars(tmp_path: Path, url: str, *, version: str = "0.5.23", profile: str = "glm5-tp8", **more) -> dict:
    """ROLE_PLAY's variables: SHAPE against ``url``, baselines under ``tmp_path``, the facts of the
    sglang, sglang_server and nvidia_driver roles the gate's key reads; ``more`` on top."""
    v = {f"throughput_gate_{k}": val for k, val in SHAPE.items()}
    v.update(
        throughput_gate_url=url,
        throughput_gate_baseline_dir=str(tmp_path / "baselines"),
        throughput_gate_telemetry=False,
        throughput_gate_served_model_name="test/model",
        sglang_server_profile=profile,
        sglang_facts={"version": version},
        nvidia_driver_facts={"gpus": [{"name": GPU}]},
    )
    v.update(more)
    return v


class Result:
    def __init__(self, runner: ansible_runner.Runner, task: str) -> None:
        self.rc = runner.rc
        self.output = runner.stdout.read()
        self.events = list(runner.events)
        self.res: dict = {}
        self.duration: float | None = None  # the task's own run time as ansible reports it
        for ev in self.events:
            data = ev.get("event_data", {})
            if data.get("task") == task and ev.get("event") in ("runner_on_ok", "runner_on_failed"):
                self.res = data.get("res", {})
                self.duration = data.get("duration")
        self.debug_msgs = [
            ev["event_data"]["res"].get("msg")
            for ev in runner.events
            if ev.get("event") == "runner_on_ok"
            and ev.get("event_data", {}).get("task_action") == "ansible.builtin.debug"
        ]


def run_play(
    tmp_path: Path, text: str, extravars: dict, task: str, *, check: bool = False, env=None, timeout: int | None = None
) -> Result:
    pdd = runner_data_dir(tmp_path, text)
    envvars = {**ansible_settings(), "STANDIN_NVIDIA_SMI_PROFILE": str(PROFILE)}
    envvars.update(env or {})
    runner = ansible_runner.run(
        private_data_dir=str(pdd),
        playbook="play.yml",
        inventory=f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}",
        extravars=extravars,
        cmdline="--check" if check else None,
        envvars=envvars,
        quiet=True,
        timeout=timeout,
    )
    return Result(runner, task)
