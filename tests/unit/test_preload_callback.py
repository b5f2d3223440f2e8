# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The callback gpufleet.sglang.preload (plugins/callback/preload.py): with it, real ansible-playbook parses the
container connection's configuration once in its main process instead of once in every task's worker, and executes
a collection's filter, test and lookup files once there instead of once in every task's worker that uses
them; names that are not connection plugins or collections, and plugin files that fail, are warnings that name
them, and the run goes on."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from lib.playbook import REPO, run_playbook

from ansible_collections.gpufleet.sglang.plugins.callback.preload import (
    COLLECTION_NAME,
    PLUGIN_NAME,
    preload_collection_problems,
    preload_problems,
)

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


# A collection of the test's own (tmp_path/ansible_collections/probe/counted) with one plugin of each kind the
# callback loads (ansible-core loads action plugins in the main process itself); each file appends "<kind> <pid>"
# to $PROBE_COUNT when Python executes it, i.e. once per process that imports it. A worker forked after the main
# process imported it inherits it and executes nothing.
PROBE_PLUGINS = {
    "filter/doubled.py": "class FilterModule:\n    def filters(self):\n        return {'doubled': lambda v: v * 2}\n",
    "test/even.py": "class TestModule:\n    def tests(self):\n        return {'even': lambda v: v % 2 == 0}\n",
    "lookup/three.py": (
        "from ansible.plugins.lookup import LookupBase\n\n\n"
        "class LookupModule(LookupBase):\n    def run(self, terms, variables=None, **kwargs):\n        return [3]\n"
    ),
}
COUNT = "import os\nwith open(os.environ['PROBE_COUNT'], 'a') as f:\n    f.write('{kind} %d\\n' % os.getpid())\n"
PROBE_TASK = """
    - name: Use every plugin {i}
      ansible.builtin.assert:
        that:
          - (2 | probe.counted.doubled) == 4
          - 4 is probe.counted.even
          - query('probe.counted.three') == [3]
"""
PROBE_PLAY = """
- name: The probe collection's plugins in several tasks
  hosts: localhost
  gather_facts: false
  tasks:
""" + "".join(PROBE_TASK.format(i=i) for i in range(TASKS))


def probe_collection(root: Path, broken: str = "") -> Path:
    """The probe collection under ``root``; ``broken`` names a plugin file (one of PROBE_PLUGINS, or a file of its
    own) that raises when it is executed, after counting (as the kind ``broken``)."""
    base = root / "ansible_collections" / "probe" / "counted"
    (base / "meta").mkdir(parents=True)
    (base / "meta" / "runtime.yml").write_text("requires_ansible: '>=2.16'\n")
    for rel, body in ({broken: "", **PROBE_PLUGINS} if broken else PROBE_PLUGINS).items():
        path = base / "plugins" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        fail = "raise RuntimeError('this plugin file is broken on purpose')\n" if rel == broken else ""
        path.write_text(COUNT.format(kind="broken" if rel == broken else rel.split("/", maxsplit=1)[0]) + fail + body)
    return root


def run_probe(tmp_path: Path, callbacks: str, broken: str = "", **env: str):
    """The probe play through real ansible-playbook; what executed each plugin file, as {kind: [pid, ...]}."""
    root = probe_collection(tmp_path / "probe", broken)
    counts = tmp_path / f"counts-{callbacks}.txt"
    (tmp_path / "play.yml").write_text(PROBE_PLAY)
    result = run_playbook(
        tmp_path / "play.yml",
        inventory="localhost,",
        env={
            "ANSIBLE_CALLBACKS_ENABLED": callbacks,
            "ANSIBLE_COLLECTIONS_PATH": f"{root}:{REPO / 'collections'}",
            "GPUFLEET_PRELOAD_COLLECTIONS": "probe.counted",
            "PROBE_COUNT": str(counts),
            **env,
        },
        timeout=120,
    )
    executed: dict[str, list[int]] = {}
    for line in counts.read_text().splitlines() if counts.exists() else []:
        kind, pid = line.split()
        executed.setdefault(kind, []).append(int(pid))
    return result, executed


def test_a_collections_plugin_files_run_once_in_the_main_process_with_it_and_once_per_task_without(tmp_path: Path):
    without_result, without = run_probe(tmp_path / "without", "ansible.posix.profile_tasks")
    with_result, with_it = run_probe(tmp_path / "with", "gpufleet.sglang.preload")
    for result in (without_result, with_result):
        result.expect(0)
        assert "ok=3 " in result.stdout, result.tail()
        assert "failed=0" in result.stdout, result.tail()
    assert "gpufleet.sglang.preload:" not in with_result.output
    for kind in ("filter", "test", "lookup"):
        # without it: each task's worker executes the file again (a different process each time)
        assert len(without[kind]) == TASKS, (kind, without)
        assert len(set(without[kind])) == TASKS, (kind, without)
        # with it: once, in the one process that then forked every worker
        assert len(with_it[kind]) == 1, (kind, with_it)
    assert len({pids[0] for pids in with_it.values()}) == 1, with_it


def test_a_plugin_file_that_fails_is_a_warning_naming_it_and_the_others_are_loaded(tmp_path: Path):
    result, executed = run_probe(tmp_path, "gpufleet.sglang.preload", broken="lookup/three.py")
    # the play uses the broken lookup: each task fails on it, as it would without the callback
    assert result.rc == 2, result.tail()
    assert "gpufleet.sglang.preload: probe.counted.three (lookup) could not be loaded: " in result.output, result.tail()
    assert "this plugin file is broken on purpose" in result.output
    for kind in ("filter", "test"):
        assert len(executed[kind]) == 1, (kind, executed)


def test_a_filter_file_that_fails_is_a_warning_naming_it_and_the_other_filters_are_loaded(tmp_path: Path):
    # a filter file the play does not use, but that every lookup of a filter of the collection imports
    result, executed = run_probe(tmp_path, "gpufleet.sglang.preload", broken="filter/broken.py")
    result.expect(0)
    assert (
        "gpufleet.sglang.preload: probe.counted.broken (filter file) could not be loaded: RuntimeError: this plugin"
        in (result.output)
    ), result.tail()
    for kind in ("filter", "test", "lookup"):
        assert len(executed[kind]) == 1, (kind, executed)
    # the broken file was tried in the main process and again where the workers look filters up
    assert len(executed["broken"]) > 1, executed


def test_names_that_are_no_installed_collection_are_warnings_and_the_run_goes_on(tmp_path: Path):
    result, executed = run_probe(
        tmp_path,
        "gpufleet.sglang.preload",
        GPUFLEET_PRELOAD_COLLECTIONS="probe.counted,probe.absent,../../etc",
    )
    result.expect(0)
    assert "gpufleet.sglang.preload: probe.absent: no installed collection of that name" in result.output
    assert "gpufleet.sglang.preload: '../../etc' is not a collection name (namespace.name)" in result.output
    assert all(len(pids) == 1 for pids in executed.values()), executed


class Loader:
    """A plugin loader's two members the callback uses, recording what it was asked for."""

    def __init__(self, kind: str):
        self.type = kind
        self.asked: list[str] = []

    def get(self, name: str, class_only: bool = False):
        self.asked.append(name)
        return object()


NAMES = st.one_of(st.text(max_size=30), st.integers(), st.none(), st.sampled_from(["a.b", "x.y_1", "A.b", "a.b.c"]))


@given(st.lists(NAMES, max_size=6))
def test_every_collection_name_is_loaded_or_named_in_a_problem(names):
    loaders = [Loader(kind) for kind in ("filter", "test", "lookup")]
    problems = preload_collection_problems(names, loaders)
    # no such collection is installed here: every name is a problem, each named, and no loader was asked anything
    assert len(problems) == len(names)
    assert all(loader.asked == [] for loader in loaders)
    for name, problem in zip(names, problems, strict=True):
        if isinstance(name, str) and COLLECTION_NAME.match(name):
            assert problem == f"{name}: no installed collection of that name"
        else:
            assert problem.startswith(f"{name!r} is not a collection name")


def test_this_collections_plugins_load_through_the_loaders():
    loaders = [Loader(kind) for kind in ("filter", "test", "lookup")]
    assert preload_collection_problems(["gpufleet.sglang"], loaders) == []
    filters, tests, lookups = (loader.asked for loader in loaders)
    assert "gpufleet.sglang.rollout_serial" in filters
    assert "gpufleet.sglang.sglang_server_args" in filters
    assert tests == []
    assert lookups == ["gpufleet.sglang.gate_last_run", "gpufleet.sglang.sglang_tuned_profile"]
