# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The callback gpufleet.sglang.preload (plugins/callback/preload.py): with it, real ansible-playbook parses the
container connection's configuration once in its main process instead of once in every task's worker; names that
are not connection plugins are warnings that name them, and the run goes on."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from lib.playbook import REPO, run_playbook

from ansible_collections.gpufleet.sglang.plugins.callback.preload import PLUGIN_NAME, preload_problems

# Ansible's debug line for a plugin whose options it reads into its configuration (ANSIBLE_DEBUG=1); a worker
# forked from ansible-playbook prints it again for a plugin the main process never loaded
LOADED = "Loaded config def from plugin (connection/ansible_collections.gpufleet.sglang.plugins.connection.pct_ssh)"

# a container reached through pct_ssh whose Proxmox host answers on no port: each task loads the plugin (and its
# options) in its worker before the connection fails; ignore_unreachable lets the next task run all the same
INVENTORY = """
all:
  hosts:
    ct101:
      ansible_connection: gpufleet.sglang.pct_ssh
      ansible_host: 127.0.0.1
      ansible_port: 9
      ansible_ssh_timeout: 2
      proxmox_vmid: 101
"""
TASKS = 3
PING = "    - name: Ping {}\n      ansible.builtin.ping:\n"
PLAY = """
- name: Tasks on a container
  hosts: ct101
  gather_facts: false
  ignore_unreachable: true
  tasks:
""" + "".join(PING.format(i) for i in range(TASKS))


def run(tmp_path: Path, callbacks: str, **env: str):
    (tmp_path / "inventory.yml").write_text(INVENTORY)
    (tmp_path / "play.yml").write_text(PLAY)
    return run_playbook(
        tmp_path / "play.yml",
        inventory=tmp_path / "inventory.yml",
        env={"ANSIBLE_DEBUG": "1", "ANSIBLE_CALLBACKS_ENABLED": callbacks, **env},
        timeout=120,
    ).expect(0)


def test_the_repositorys_ansible_cfg_enables_it():
    cfg = (REPO / "ansible.cfg").read_text(encoding="utf-8")
    assert re.search(r"^callbacks_enabled\s*=.*\bgpufleet\.sglang\.preload\b", cfg, re.M)


def test_with_it_the_connections_options_are_read_once_and_without_it_once_per_task(tmp_path: Path):
    without = run(tmp_path, "ansible.posix.profile_tasks")
    with_it = run(tmp_path, "gpufleet.sglang.preload")
    for result in (without, with_it):
        assert result.stdout.count("ignored=") == 1, result.tail()
        assert f"ignored={TASKS}" in result.stdout, result.tail()
    assert without.output.count(LOADED) == TASKS, without.tail()
    assert with_it.output.count(LOADED) == 1, with_it.tail()
    assert "gpufleet.sglang.preload:" not in with_it.output


def test_a_name_that_is_no_connection_plugin_is_a_warning_and_the_run_goes_on(tmp_path: Path):
    result = run(
        tmp_path,
        "gpufleet.sglang.preload",
        GPUFLEET_PRELOAD_CONNECTIONS="gpufleet.sglang.pct_ssh,gpufleet.sglang.no_such_thing,../../etc/passwd",
    )
    assert "gpufleet.sglang.preload: gpufleet.sglang.no_such_thing: no connection plugin of that name" in result.output
    assert "gpufleet.sglang.preload: '../../etc/passwd' is not a connection plugin name" in result.output
    assert result.output.count(LOADED) == 1, result.tail()


def test_a_plugin_that_fails_to_load_is_named_with_its_error():
    def load(name: str):
        raise ImportError(f"paramiko is not installed ({name})")

    assert preload_problems(["gpufleet.sglang.pct_pipelined"], load) == [
        "gpufleet.sglang.pct_pipelined could not be loaded: ImportError: paramiko is not installed "
        "(gpufleet.sglang.pct_pipelined)"
    ]


@given(st.lists(st.one_of(st.text(max_size=40), st.integers(), st.none()), max_size=6))
def test_every_name_is_loaded_or_named_in_a_problem_and_nothing_else_is_loaded(names):
    loaded: list[str] = []

    def load(name: str):
        loaded.append(name)
        return object() if name.endswith("_ok") else None

    problems = preload_problems(names, load)
    valid = [n for n in names if isinstance(n, str) and PLUGIN_NAME.match(n)]
    assert loaded == valid
    assert len(problems) == len(names) - sum(1 for n in valid if n.endswith("_ok"))
    for name in names:
        if not (isinstance(name, str) and PLUGIN_NAME.match(name)):
            assert any(repr(name) in p for p in problems)
