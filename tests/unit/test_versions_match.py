# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The rule "a container's NVIDIA userspace is at exactly its host's kernel module version" (role
nvidia_driver, entry point versions_match), applied by role proxmox_lxc_gpu to all of a host's containers in
one task (nvidia_driver_versions_each) instead of one include per container (docs/connection.md, "Lever I").

One ``ansible-playbook`` run: a play per case, each recording its outcome (a run costs about a second of CPU
before its first task). The containers' versions come from their inventory hosts, as in a real inventory.
"""

from __future__ import annotations

import json
import sys

import pytest
import yaml
from lib.playbook import REPO, recorded_case, run_playbook

HOST_MODULE = "580.159.04"
# container inventory host -> its declared userspace (None: declares none, so it is not checked)
CONTAINERS = {"c1": HOST_MODULE, "c2": None, "c3": "580.95.05", "c4": "580.82.07"}
ALL = [{"vmid": 200 + i, "hostname": f"guest{i}", "inventory_host": h} for i, h in enumerate(CONTAINERS, 1)]

# name -> (vars of the include, the messages expected; [] = passes)
CASES: dict[str, tuple[dict, list[str]]] = {
    "one-subject-equal": ({"nvidia_driver_version": HOST_MODULE}, []),
    "one-subject-differs": (
        {"nvidia_driver_version": "580.95.05", "nvidia_driver_versions_subject": "container mode"},
        [
            f"container mode needs the userspace at exactly the host kernel module's version: "
            f"nvidia_driver_version=580.95.05 but nvidia_driver_host_module_version={HOST_MODULE}"
        ],
    ),
    "containers-equal": ({"__containers": [ALL[0], ALL[1]]}, []),
    # every container that differs is named, in one run; the one that agrees and the one without a version are not
    "containers-two-differ": (
        {"__containers": ALL},
        [
            "container guest3 (c3) needs the userspace",
            "nvidia_driver_version=580.95.05",
            "container guest4 (c4) needs the userspace",
            "nvidia_driver_version=580.82.07",
        ],
    ),
    "unset-host-module": (
        {"nvidia_driver_version": HOST_MODULE, "nvidia_driver_host_module_version": ""},
        ["nvidia_driver_host_module_version=(unset)"],
    ),
    "each-not-a-list-of-dicts": (
        {"nvidia_driver_versions_each": ["580.95.05"]},
        ["nvidia_driver_versions_each"],
    ),
}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    tmp = tmp_path_factory.mktemp("versions")
    plays = []
    for name, (case_vars, _expected) in CASES.items():
        out = str(tmp / f"{name}.json")
        given = dict(case_vars)
        containers = given.pop("__containers", None)
        check_vars = {"nvidia_driver_host_module_version": HOST_MODULE, **given}
        pre = []
        if containers is not None:
            # the role's own expression (its vars/main.yml), over this case's containers
            pre = [
                {
                    "name": "Load proxmox_lxc_gpu's vars",
                    "ansible.builtin.include_vars": {"file": str(REPO / "roles/proxmox_lxc_gpu/vars/main.yml")},
                },
                {
                    "name": "Record the userspaces",
                    "ansible.builtin.copy": {
                        "content": "{{ __proxmox_lxc_gpu_userspaces | to_json }}",
                        "dest": f"{out}.each",
                        "mode": "0644",
                    },
                },
            ]
            check_vars["nvidia_driver_versions_each"] = "{{ __proxmox_lxc_gpu_userspaces }}"
        plays.append(
            {
                "name": name,
                "hosts": "pve",
                "gather_facts": False,
                "vars": {"proxmox_lxc_gpu_containers": containers or []},
                "tasks": [
                    recorded_case(
                        name,
                        [
                            *pre,
                            {
                                "name": "Check",
                                "ansible.builtin.include_role": {
                                    "name": "gpufleet.sglang.nvidia_driver",
                                    "tasks_from": "versions_match",
                                },
                                "vars": check_vars,
                            },
                        ],
                        out,
                    )
                ],
            }
        )
    (tmp / "play.yml").write_text(yaml.safe_dump(plays, sort_keys=False), encoding="utf-8")
    hosts = {h: ({"nvidia_driver_version": v} if v else {}) for h, v in CONTAINERS.items()}
    hosts["pve"] = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    (tmp / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": hosts}}), encoding="utf-8")
    run = run_playbook(tmp / "play.yml", inventory=tmp / "hosts.yml", timeout=300).expect(0)
    got = {name: json.loads((tmp / f"{name}.json").read_text(encoding="utf-8")) for name in CASES}
    got["__each"] = json.loads((tmp / "containers-two-differ.json.each").read_text(encoding="utf-8"))
    got["__stdout"] = run.stdout
    return got


@pytest.mark.parametrize("name", list(CASES))
def test_each_case_passes_or_names_every_userspace_that_differs(outcomes, name):
    expected = CASES[name][1]
    got = outcomes[name]
    if not expected:
        assert got == {"failed": False}, got
        return
    assert got["failed"], got
    text = "\n".join(got["msgs"])
    for fragment in expected:
        assert fragment in text, (fragment, text)
    # the container that agrees is never named
    assert "guest1" not in text, text


def test_the_role_lists_each_declared_userspace_once_and_leaves_out_the_undeclared(outcomes):
    assert outcomes["__each"] == [
        {"subject": "container guest1 (c1)", "version": HOST_MODULE},
        {"subject": "container guest3 (c3)", "version": "580.95.05"},
        {"subject": "container guest4 (c4)", "version": "580.82.07"},
    ]


def test_all_containers_are_checked_by_one_task(outcomes):
    """One assert for the host's containers (an item each), not one include and two tasks per container."""
    out = outcomes["__stdout"]
    play = out.split("PLAY [containers-two-differ]")[1].split("PLAY [")[0]
    assert play.count("TASK [gpufleet.sglang.nvidia_driver : Check that the userspace version equals") == 1, play
    assert play.count("included: gpufleet.sglang.nvidia_driver") <= 1, play
