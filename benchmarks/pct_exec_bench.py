# Copyright (c) gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`pct exec` calls and seconds per task, per connection and kind of task (issue 27, part 3).

Runs real ansible-playbook against tests/standins/pct_sshd.py (an SSH server in this process that runs
`/usr/sbin/pct exec <vmid> -- <command>` on this machine, recording every exec) with
community.proxmox.proxmox_pct_remote and gpufleet.sglang.pct_pipelined, for tasks that change nothing:

  module      ansible.builtin.stat (any module: command, systemd_service, the collection's own)
  copy        ansible.builtin.copy with content, the file already so (a template is the same action)
  template    ansible.builtin.template, the file already so

each with Ansible's default remote_tmp (`~/.ansible/tmp`: one `echo ~root` to expand it whenever a
temporary directory is made) and with an absolute one (`ansible_remote_tmp: /root/.ansible/tmp`).

    .venv/bin/python benchmarks/pct_exec_bench.py [--tasks 5] [--exec-s 0.2]

`--exec-s` is what the stand-in adds to each exec, standing in for pct's own start on a Proxmox host;
the seconds are the slope between a play of N and one of 2N such tasks (Ansible's start-up cancels
out): a lab's per-task cost at that exec cost, plus this controller's own work per task, which the
`--exec-s 0` run shows.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from lib.playbook import run_playbook
from standins.pct_sshd import PctSshd

CONNECTIONS = ("community.proxmox.proxmox_pct_remote", "gpufleet.sglang.pct_pipelined")
TASKS = {
    "module": "ansible.builtin.stat:\n        path: /etc/hostname",
    "copy": 'ansible.builtin.copy:\n        content: "same\\n"\n        dest: "{{ root }}/copy-{{ n }}"\n'
    '        mode: "0644"',
    "template": 'ansible.builtin.template:\n        src: "{{ root }}/t.j2"\n        dest: "{{ root }}/tpl-{{ n }}"\n'
    '        mode: "0644"',
}


def playbook(kind: str, count: int, tasks_by_kind: dict[str, str] | None = None) -> str:
    """A play of ``count`` tasks of ``kind`` (its text in ``tasks_by_kind``, default TASKS), each numbered ``n``."""
    text = (tasks_by_kind or TASKS)[kind]
    tasks = "".join(f"    - name: {kind} {n}\n      vars:\n        n: {n}\n      {text}\n" for n in range(count))
    return f"- name: {kind}\n  hosts: all\n  gather_facts: false\n  tasks:\n{tasks}"


def measure(sshd: PctSshd, root: Path, key: Path, *, connection: str, kind: str, count: int, remote_tmp: str | None):
    host = {
        "ansible_connection": connection,
        "ansible_host": "127.0.0.1",
        "ansible_port": sshd.port,
        "ansible_user": "root",
        "proxmox_vmid": 101,
        "ansible_ssh_private_key_file": str(key),
        "ansible_python_interpreter": sys.executable,
        "root": str(root / "ct"),
    }
    if remote_tmp:
        host["ansible_remote_tmp"] = remote_tmp
    (root / "inventory.json").write_text(json.dumps({"all": {"hosts": {"ct101": host}}}))
    env = {"HOME": str(root / "home"), "ANSIBLE_PARAMIKO_LOOK_FOR_KEYS": "False"}
    walls, execs, logins = [], [], []
    for tasks in (count, 2 * count):  # the slope between the two is the cost of a task, without start-up
        (root / "play.yml").write_text(playbook(kind, tasks))
        run_playbook(root / "play.yml", inventory=root / "inventory.json", env=env).expect(0)  # the files exist now
        sshd.execs.clear()
        sshd.sessions = 0
        start = time.monotonic()
        result = run_playbook(root / "play.yml", inventory=root / "inventory.json", env=env).expect(0)
        walls.append(time.monotonic() - start)
        execs.append(len(sshd.execs))
        logins.append(sshd.sessions)
        if "changed=0" not in result.stdout:
            raise SystemExit(f"{connection} {kind}: not a no-op\n{result.stdout[-2000:]}")
    return (execs[1] - execs[0]) / count, (logins[1] - logins[0]) / count, (walls[1] - walls[0]) / count


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", type=int, default=5, help="identical tasks per play (the figures are per task)")
    p.add_argument("--exec-s", type=float, default=0.2, help="seconds the stand-in adds to every pct exec")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "ct").mkdir()
        (root / "ct" / "t.j2").write_text("same\n")
        (root / "home" / ".ssh").mkdir(parents=True)
        sshd = PctSshd(home=root / "ct", exec_delay_s=args.exec_s)
        (root / "home" / ".ssh" / "known_hosts").write_text(sshd.known_hosts_line())
        key = root / "key"
        key.write_text(sshd.client_key_text)
        key.chmod(0o600)
        print(f"per task, no-op: pct exec calls, SSH logins, seconds ({args.exec_s:g} s added to each pct exec)")
        names = " ".join(f"{c.rsplit('.', maxsplit=1)[-1]:>30}" for c in CONNECTIONS)
        print(f"{'task':<9} {'remote_tmp':<20} " + names)
        for kind in TASKS:
            for remote_tmp in (None, "/root/.ansible/tmp"):
                cells = []
                for connection in CONNECTIONS:
                    execs, logins, secs = measure(
                        sshd, root, key, connection=connection, kind=kind, count=args.tasks, remote_tmp=remote_tmp
                    )
                    cells.append(f"{execs:4.1f} exec {logins:3.1f} login {secs:5.2f} s")
                print(f"{kind:<9} {remote_tmp or '~/.ansible/tmp':<20} " + " ".join(f"{c:>30}" for c in cells))
        sshd.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
