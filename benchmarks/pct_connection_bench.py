# Copyright (c) gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Seconds and CPU per task through each `pct exec` connection, against a real sshd and a real LXC guest
(issue 27, part 3).

Starts the Proxmox host stand-in of the lab (tests/harness/pve-standin.sh: a Podman systemd container with
OpenSSH's sshd, real LXC and the pct stand-in) with one running Debian guest, CT 201, then runs real
ansible-playbook plays of N and of 2N tasks that change nothing, with each connection:

  community.proxmox.proxmox_pct_remote   paramiko, a login per task, six pct exec per module
  gpufleet.sglang.pct_pipelined          paramiko, a login per task, one pct exec per module
  gpufleet.sglang.pct_ssh                OpenSSH with ControlPersist (one login for the run), one pct exec

and prints, per task (the slope between the two plays, so Ansible's start-up cancels out): wall seconds, the
controller's CPU seconds (ansible-playbook and its workers) and the Proxmox host's (the stand-in container's
cgroup: sshd, pct, the guest's Python). Kinds of task: a module (`stat`) and a `template` that is already so.
The three connections alternate, `--rounds` times; every figure is printed, then the medians.

    .venv/bin/python benchmarks/pct_connection_bench.py [--tasks 10] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from integration.test_pct_connection import must, start_standin, stop_standin
from lib.playbook import run_playbook
from pct_exec_bench import playbook

NAME, PORT = "pct-bench-pve", 2224
CONNECTIONS = (
    "community.proxmox.proxmox_pct_remote",
    "gpufleet.sglang.pct_pipelined",
    "gpufleet.sglang.pct_ssh",
)
TASKS = {
    "module": "ansible.builtin.stat:\n        path: /etc/hostname",
    "template": 'ansible.builtin.template:\n        src: "{{ playbook_dir }}/t.j2"\n        dest: /root/tpl-{{ n }}\n'
    '        mode: "0644"',
}


def host_cpu_s() -> float:
    """CPU seconds of the stand-in container so far (its cgroup, v1 or v2)."""
    cid = must("podman", "inspect", "-f", "{{.Id}}", NAME).strip()
    for path, scale in (
        (f"/sys/fs/cgroup/cpuacct/libpod_parent/libpod-{cid}/cpuacct.usage", 1e9),
        (f"/sys/fs/cgroup/libpod_parent/libpod-{cid}/cpu.stat", 1e6),
        (f"/sys/fs/cgroup/machine.slice/libpod-{cid}.scope/cpu.stat", 1e6),
    ):
        if os.path.exists(path):
            text = Path(path).read_text(encoding="utf-8")
            value = text.split()[0] if path.endswith("usage") else text.split("usage_usec")[1].split()[0]
            return int(value) / scale
    raise SystemExit(f"no cgroup CPU account found for {NAME}")


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_play(root: Path, connection: str, kind: str, count: int) -> tuple[float, float, float]:
    (root / "play.yml").write_text(playbook(kind, count, TASKS), encoding="utf-8")
    env = {"HOME": str(root / "home"), "ANSIBLE_SSH_CONTROL_PATH_DIR": str(root / "cp")}
    extra = {"ansible_connection": connection}
    run_playbook(root / "play.yml", inventory=root / "hosts.yml", extra_vars=extra, env=env).expect(0)  # files made
    wall, ctl, host = time.monotonic(), children_cpu_s(), host_cpu_s()
    result = run_playbook(root / "play.yml", inventory=root / "hosts.yml", extra_vars=extra, env=env).expect(0)
    if "changed=0" not in result.stdout:
        raise SystemExit(f"{connection} {kind}: not a no-op\n{result.stdout[-2000:]}")
    return time.monotonic() - wall, children_cpu_s() - ctl, host_cpu_s() - host


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", type=int, default=10, help="identical tasks in the smaller play")
    p.add_argument("--rounds", type=int, default=2, help="times each connection is measured, alternating")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "home" / ".ssh").mkdir(parents=True)
        (root / "cp").mkdir()
        (root / "t.j2").write_text("same\n", encoding="utf-8")
        state, known_hosts = root / "ssh", root / "home" / ".ssh" / "known_hosts"
        try:
            start_standin(NAME, PORT, state, known_hosts)
            host = {
                "proxmox_vmid": 201,
                "ansible_host": "127.0.0.1",
                "ansible_port": PORT,
                "ansible_user": "root",
                "ansible_ssh_private_key_file": str(state / "id_ed25519"),
                "ansible_remote_tmp": "/root/.ansible/tmp",
                # OpenSSH reads the passwd entry's ~/.ssh, not $HOME's (paramiko reads $HOME's)
                "ansible_ssh_common_args": f"-o UserKnownHostsFile={known_hosts}",
            }
            (root / "hosts.yml").write_text(json.dumps({"all": {"hosts": {"ct201": host}}}), encoding="utf-8")
            figures: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
            print(f"per task, no-op (slope between plays of {args.tasks} and {2 * args.tasks} tasks):")
            print(f"{'round':<6}{'task':<10}{'connection':<38}{'wall s':>8}{'controller CPU s':>18}{'host CPU s':>12}")
            for rnd in range(1, args.rounds + 1):
                for kind in TASKS:
                    for connection in CONNECTIONS:
                        small = one_play(root, connection, kind, args.tasks)
                        large = one_play(root, connection, kind, 2 * args.tasks)
                        per = tuple((b - a) / args.tasks for a, b in zip(small, large, strict=True))
                        figures.setdefault((kind, connection), []).append(per)  # type: ignore[arg-type]
                        row = f"{rnd:<6}{kind:<10}{connection:<38}{per[0]:8.3f}{per[1]:18.3f}{per[2]:12.3f}"
                        print(row, flush=True)
            print("medians:")
            for (kind, connection), rows in figures.items():
                med = [statistics.median(col) for col in zip(*rows, strict=True)]
                print(f"{'':<6}{kind:<10}{connection:<38}{med[0]:8.3f}{med[1]:18.3f}{med[2]:12.3f}")
        finally:
            stop_standin(NAME, PORT, known_hosts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
