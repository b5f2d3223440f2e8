# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""playbooks/connection.yml: each container's address, port and vmid, rendered once from its Proxmox host by the
inventories' own group_vars/proxmox_containers.yml, are the values every later play reads (a change of the host's
variables later in the run no longer reaches them), under any tags and in check mode; extra vars still win; a
container whose values cannot be rendered fails there, with the error its first task met before. site.yml and
playbooks/sglang.yml run it first. Real ansible-playbook; nothing connects (set_fact and debug run on the
controller)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from lib.playbook import REPO, run_playbook

CONNECTION_PLAY = REPO / "playbooks" / "connection.yml"

# the lab's shape (inventories/local/hosts.yml): one Proxmox host, its containers in proxmox_containers through
# gpu_nodes and sglang_gateway; a GPU container's vmid from the host's proxmox_lxc_gpu_containers, the gateway's
# from its own host_vars
INVENTORY = """
all:
  children:
    proxmox_hosts:
      hosts:
        pve1:
          ansible_host: 192.0.2.10
          ansible_port: 2222
          proxmox_lxc_gpu_containers:
            - {vmid: 101, inventory_host: node1}
            - {vmid: 102, inventory_host: node2}
    proxmox_containers:
      children:
        gpu_nodes:
        sglang_gateway:
    gpu_nodes:
      hosts:
        node1: {proxmox_host: pve1}
        node2: {proxmox_host: pve1}
    sglang_gateway:
      hosts:
        gateway1: {proxmox_host: pve1, proxmox_vmid: 100}
"""

# after the pin: the Proxmox host's address and port change in the run (a fact on pve1); a container whose
# values were pinned still says the ones read before, one that was not would follow the host
PROBE = [
    {
        "name": "Change the Proxmox host's variables after the pin",
        "hosts": "proxmox_hosts",
        "gather_facts": False,
        "tasks": [
            {
                "name": "Move the host",
                "ansible.builtin.set_fact": {"ansible_host": "198.51.100.99", "ansible_port": 2999},
                "tags": ["always"],
            }
        ],
    },
    {
        "name": "Read the containers' connection",
        "hosts": "proxmox_containers",
        "gather_facts": False,
        "tasks": [
            {
                "name": "Say it",
                "ansible.builtin.debug": {
                    "msg": "CONN {{ inventory_hostname }} {{ ansible_host }}:{{ ansible_port }} vmid={{ proxmox_vmid }}"
                },
                "tags": ["always"],
            }
        ],
    },
]


def write_case(tmp_path: Path, inventory: str, *, pin: bool = True) -> tuple[Path, Path]:
    """An inventory directory with ``inventory`` as hosts.yml and the real group_vars/proxmox_containers.yml of
    inventories/local, and a playbook: the connection play (unless ``pin`` is false), then PROBE."""
    inv = tmp_path / "inventory"
    (inv / "group_vars").mkdir(parents=True)
    (inv / "hosts.yml").write_text(inventory)
    shutil.copy(REPO / "inventories" / "local" / "group_vars" / "proxmox_containers.yml", inv / "group_vars")
    plays = ([{"ansible.builtin.import_playbook": str(CONNECTION_PLAY)}] if pin else []) + PROBE
    playbook = tmp_path / "site.yml"
    playbook.write_text(yaml.safe_dump(plays, sort_keys=False))
    return inv, playbook


def said(stdout: str) -> dict[str, str]:
    """host -> "address:port vmid=N" from the probe's lines (ansible.cfg's result format, YAML: ``msg: CONN ...``)."""
    lines = [line.split("msg: CONN ", 1)[1].strip() for line in stdout.splitlines() if "msg: CONN " in line]
    return {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in lines}


PINNED = {
    "node1": "192.0.2.10:2222 vmid=101",
    "node2": "192.0.2.10:2222 vmid=102",
    "gateway1": "192.0.2.10:2222 vmid=100",
}


@pytest.mark.parametrize(
    "args",
    [(), ("--tags", "bench"), ("--skip-tags", "bench"), ("--tags", "health"), ("--check",)],
    ids=["plain", "tags-bench", "skip-tags-bench", "tags-health", "check"],
)
def test_each_container_keeps_what_its_host_said_when_the_run_read_it(tmp_path: Path, args: tuple[str, ...]):
    inv, playbook = write_case(tmp_path, INVENTORY)
    result = run_playbook(playbook, inventory=inv, args=args).expect(0)
    assert said(result.stdout) == PINNED, result.tail()


def test_without_the_pin_the_containers_follow_the_host_so_the_probe_can_tell(tmp_path: Path):
    """The probe's own check: unpinned, the same inventory reads the host's variables as they are at each task."""
    inv, playbook = write_case(tmp_path, INVENTORY, pin=False)
    result = run_playbook(playbook, inventory=inv).expect(0)
    assert said(result.stdout) == {
        "node1": "198.51.100.99:2999 vmid=101",
        "node2": "198.51.100.99:2999 vmid=102",
        "gateway1": "198.51.100.99:2999 vmid=100",
    }, result.tail()


def test_extra_vars_still_win(tmp_path: Path):
    inv, playbook = write_case(tmp_path, INVENTORY)
    result = run_playbook(playbook, inventory=inv, extra_vars={"ansible_port": 2022}).expect(0)
    assert said(result.stdout) == {h: v.replace(":2222 ", ":2022 ") for h, v in PINNED.items()}, result.tail()


def test_a_container_that_cannot_be_rendered_fails_at_once_naming_what_is_missing(tmp_path: Path):
    """node3 names no Proxmox host and node4 a host the inventory lacks: Ansible renders a task's connection
    keywords (port) for every task, so they fail in the connection play with the error their first task met
    before it, naming what is missing, and run nothing after; the other containers are pinned and go on."""
    inventory = INVENTORY.replace(
        "        node2: {proxmox_host: pve1}\n",
        "        node2: {proxmox_host: pve1}\n        node3: {}\n        node4: {proxmox_host: pve9}\n",
    )
    inv, playbook = write_case(tmp_path, inventory)
    result = run_playbook(playbook, inventory=inv).expect(2)
    pin_task = result.stdout.split("TASK [Keep each container's address, port and vmid as rendered now]", 1)[1]
    pin_task = pin_task.split("PLAY [", 1)[0]
    for host in ("node1", "node2", "gateway1"):
        assert f"ok: [{host}]" in pin_task, result.tail()
    assert "'proxmox_host' is undefined" in pin_task, result.tail()
    assert "hostvars['pve9']" in pin_task, result.tail()
    assert said(result.stdout) == PINNED, result.tail()
    recap = result.stdout.split("PLAY RECAP", 1)[1]
    for host in ("node3", "node4"):
        assert f"[{host}]" not in result.stdout.split("TASK [Say it]", 1)[1].split("PLAY RECAP", 1)[0], result.tail()
        assert host in recap, result.tail()
        assert "failed=1" in recap.split(host, 1)[1].split("\n", 1)[0], result.tail()


@pytest.mark.parametrize("playbook", ["site.yml", "playbooks/sglang.yml"])
def test_the_entry_playbooks_run_it_first(playbook: str):
    plays = yaml.safe_load((REPO / playbook).read_text(encoding="utf-8"))
    first = plays[0]["ansible.builtin.import_playbook"]
    assert (REPO / playbook).parent.joinpath(first).resolve() == CONNECTION_PLAY, first
