# Copyright (c) gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""benchmarks/noop_bench.py reads each play's share of a run from profile_tasks' stamps and the
changed counts from the recap: both on text shaped like ansible-playbook's own output."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import noop_bench

# profile_tasks stamps every task (at its start: the previous task's duration, then the time since
# the run began), never a play; the last stamp follows the recap
OUTPUT = """
PLAY [Proxmox hosts - NVIDIA driver] *******************************************

TASK [Gathering Facts] *********************************************************
Monday 30 November 2026  20:11:20 +0000 (0:00:00.050)       0:00:00.050 *******
ok: [lab-pve1]

TASK [gpufleet.sglang.nvidia_driver : Read the driver] *************************
Monday 30 November 2026  20:11:22 +0000 (0:00:02.000)       0:00:02.050 *******
ok: [lab-pve1]

PLAY [GPU nodes - NVIDIA userspace] ********************************************

TASK [Gathering Facts] *********************************************************
Monday 30 November 2026  20:11:30 +0000 (0:00:08.000)       0:00:10.050 *******
ok: [lab-sglang1]

PLAY [Proxmox hosts - NVIDIA driver] *******************************************

TASK [A second play of the same name] ******************************************
Monday 30 November 2026  20:11:40 +0000 (0:00:10.000)       0:00:20.050 *******
ok: [lab-pve1]

PLAY RECAP *********************************************************************
lab-pve1                   : ok=3    changed=0    unreachable=0    failed=0    skipped=0    rescued=0    ignored=0
lab-sglang1                : ok=1    changed=2    unreachable=0    failed=0    skipped=1    rescued=0    ignored=0

Monday 30 November 2026  20:11:45 +0000 (0:00:05.000)       0:00:25.050 *******
"""


def test_play_times_start_at_each_play_s_first_task_and_add_up_plays_of_one_name():
    times = noop_bench.play_times(OUTPUT)
    assert times == pytest.approx({"Proxmox hosts - NVIDIA driver": 10.0 + 5.0, "GPU nodes - NVIDIA userspace": 10.0})


def test_play_times_of_a_run_without_stamps_is_empty():
    assert noop_bench.play_times("PLAY [x] ***\nTASK [y] ***\nok: [h]\n") == {}


def test_recap_reads_ok_changed_unreachable_failed_per_host():
    assert noop_bench.recap(OUTPUT) == {"lab-pve1": (3, 0, 0, 0), "lab-sglang1": (1, 2, 0, 0)}


def test_the_containers_connection_source_wins_over_group_vars(tmp_path):
    """--containers-connection: the host variables of the extra source beat group_vars/proxmox_containers.yml
    (which sets proxmox_pct_remote), for every container and no other host."""
    hosts = noop_bench.containers("inventories/local")
    assert hosts == ["lab-gateway1", "lab-sglang1", "lab-sglang2", "lab-sglang3"]
    source = tmp_path / "containers.json"
    source.write_text(
        json.dumps({"all": {"hosts": {h: {"ansible_connection": "gpufleet.sglang.pct_pipelined"} for h in hosts}}})
    )
    out = subprocess.run(
        [
            str(Path(noop_bench.ANSIBLE_PLAYBOOK).parent / "ansible-inventory"),
            "-i",
            "inventories/local",
            "-i",
            str(source),
            "--list",
        ],
        cwd=noop_bench.REPO,
        env={**os.environ, "ANSIBLE_CONFIG": str(noop_bench.REPO / "ansible.cfg")},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    hostvars = json.loads(out.stdout)["_meta"]["hostvars"]
    connections = {h: v.get("ansible_connection") for h, v in hostvars.items()}
    assert {h: connections[h] for h in hosts} == dict.fromkeys(hosts, "gpufleet.sglang.pct_pipelined")
    assert all(c != "gpufleet.sglang.pct_pipelined" for h, c in connections.items() if h not in hosts)


def test_a_profiled_run_keeps_the_callbacks_ansible_cfg_enables(tmp_path: Path):
    cfg = tmp_path / "ansible.cfg"
    cfg.write_text("[defaults]\ncallbacks_enabled = gpufleet.sglang.preload , ansible.posix.timer\nforks = 5\n")
    assert noop_bench.configured_callbacks(cfg) == ["gpufleet.sglang.preload", "ansible.posix.timer"]
    cfg.write_text("[defaults]\nforks = 5\n")
    assert noop_bench.configured_callbacks(cfg) == []
    assert "gpufleet.sglang.preload" in noop_bench.configured_callbacks()


def test_the_runs_go_round_by_round_so_a_drift_falls_on_both_sides(monkeypatch, capsys):
    logs: list[str] = []

    def fake_run(argv: list[str], profile: bool = False, log: str = "") -> tuple[float, str, int, float]:
        logs.append(log)
        # the controller's CPU: 3.0 s for every run but site.yml's second, 5.0 s
        cpu = 5.0 if log == "site.yml-2" else 3.0
        return 1.0, OUTPUT.replace("changed=2", "changed=0"), 0, cpu

    monkeypatch.setattr(noop_bench, "run", fake_run)
    args = argparse.Namespace(inventory="inventories/local", repeat=2, podman_host="lab-pve1")
    assert noop_bench.bench_all(args, [], "pct") == []
    names = ["site.yml", "bare all", "bare ssh", "bare pct", "proxmox_hosts.yml (podman)", "bare podman"]
    assert logs == [f"{name}-{n}" for n in (1, 2) for name in names]
    out = capsys.readouterr().out
    assert "all hosts: site.yml --skip-tags bench" in out
    # the median of each run's controller CPU, by run: site.yml's of 3.0 and 5.0 is 4.0
    assert "controller CPU s (user + system), median: site.yml 4.0, bare all 3.0," in out


def test_a_run_reports_the_controllers_cpu_of_the_process_and_its_children(monkeypatch, tmp_path):
    """run() counts ansible-playbook's CPU with that of the processes it waited for (its workers): a stand-in
    ansible-playbook that burns about 0.3 s itself and 0.3 s in a child reports at least 0.5 s."""
    fake = tmp_path / "ansible-playbook"
    fake.write_text(
        "#!" + sys.executable + "\n"
        "import os, time\n"
        "def burn(s):\n"
        "    end = time.process_time() + s\n"
        "    while time.process_time() < end: pass\n"
        "burn(0.3)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    burn(0.3); os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
        "print('PLAY RECAP')\n"
    )
    fake.chmod(0o755)
    monkeypatch.setattr(noop_bench, "ANSIBLE_PLAYBOOK", str(fake))
    took, text, rc, cpu = noop_bench.run(["site.yml"])
    assert rc == 0, text
    assert "PLAY RECAP" in text
    assert cpu >= 0.5, cpu
    assert took >= cpu / 2, (took, cpu)
