# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A container's pending-restart record (module_utils/nvidia/lxc_pending.py, filter lxc_pending_record):
only the record of the vmid asked for, with a known platform and a container name of the role's shape,
comes out; anything else a file on the host may hold is an error naming the file and the fault.
Then role proxmox_lxc_gpu's entry points pending and restart_pending, run by ansible-playbook on this
machine with stand-in lxc-* commands that log their argv."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from hypothesis import given
from hypothesis import strategies as st
from lib.playbook import run_playbook

from ansible_collections.gpufleet.sglang.plugins.filter.lxc_pending_record import lxc_pending_record
from ansible_collections.gpufleet.sglang.plugins.module_utils.nvidia.lxc_pending import (
    HOSTNAME,
    PendingRecordError,
    parse_pending_record,
)

GOOD = {"vmid": 101, "hostname": "lab-sglang1", "platform": "lxc", "config": "/var/lib/lxc/lab-sglang1/config"}


def test_a_good_record_comes_back_as_it_was_written():
    assert parse_pending_record(json.dumps(GOOD, indent=2) + "\n", 101) == GOOD
    assert parse_pending_record(json.dumps(GOOD), "101") == GOOD


@pytest.mark.parametrize(
    ("text", "vmid", "fault"),
    [
        ("{not json", 101, "not JSON"),
        ("[1, 2]", 101, "expected a JSON object, got list"),
        (json.dumps({**GOOD, "vmid": 102}), 101, "names vmid 102, not 101: it is not this container's record"),
        (json.dumps({**GOOD, "vmid": "101"}), 101, "names vmid '101', not 101"),
        (json.dumps({**GOOD, "vmid": True}), 101, "names vmid True"),
        (json.dumps({**GOOD, "hostname": "x; reboot"}), 101, "hostname 'x; reboot' is not a container name"),
        (json.dumps({**GOOD, "hostname": "-n"}), 101, "hostname '-n' is not a container name"),
        (json.dumps({**GOOD, "platform": "docker"}), 101, "platform 'docker' is not one of ['proxmox', 'lxc']"),
        (json.dumps({**GOOD, "config": "relative/config"}), 101, "config 'relative/config' is not an absolute path"),
        (json.dumps({**GOOD, "extra": 1}), 101, "unknown ['extra']"),
        (
            '{"vmid": 101, "vmid": 102, "hostname": "a", "platform": "lxc", "config": "/c"}',
            101,
            "names ['vmid'] more than once",
        ),
        (
            '{"vmid": 101, "hostname": "a", "platform": "lxc", "config": "/c", "x": {"y": 1, "y": 2}}',
            101,
            "['y'] more than once",
        ),
        (json.dumps({k: v for k, v in GOOD.items() if k != "platform"}), 101, "fields missing ['platform']"),
        (json.dumps(GOOD) + " " * 5000, 101, "over 4096 bytes"),
        (json.dumps(GOOD), 99, "asked for vmid 99, which is not a vmid"),
        (json.dumps(GOOD), "101 --force", "which is not a vmid"),
    ],
)
def test_a_bad_record_is_refused_naming_the_file_and_the_fault(text, vmid, fault):
    with pytest.raises(AnsibleFilterError) as err:
        lxc_pending_record(text, vmid, "/var/lib/gpufleet/lxc-restart-pending/101.json")
    assert str(err.value).startswith("/var/lib/gpufleet/lxc-restart-pending/101.json: ")
    assert fault in str(err.value)


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=12,
)
FIELD_VALUES = st.one_of(
    st.integers(),
    st.text(max_size=70),
    st.sampled_from(["lxc", "proxmox", "lab-sglang1", "/etc/pve/lxc/101.conf", "a" * 63, "a" * 64]),
    JSONISH,
)


@given(
    doc=st.fixed_dictionaries(
        {},
        optional={"vmid": FIELD_VALUES, "hostname": FIELD_VALUES, "platform": FIELD_VALUES, "config": FIELD_VALUES},
    ),
    vmid=st.integers(min_value=100, max_value=999_999_999),
)
def test_whatever_a_record_holds_only_a_record_of_the_vmid_asked_for_comes_out(doc, vmid):
    try:
        record = parse_pending_record(json.dumps(doc), vmid)
    except PendingRecordError as exc:
        message = str(exc)
    else:
        assert record == doc
        assert record["vmid"] == vmid
        assert HOSTNAME.fullmatch(record["hostname"])
        assert record["platform"] in ("lxc", "proxmox")
        return
    assert message.startswith("the record: ")


@given(
    vmid=st.integers(min_value=100, max_value=999_999_999),
    hostname=st.from_regex(HOSTNAME, fullmatch=True),
    platform=st.sampled_from(["lxc", "proxmox"]),
    config=st.text(max_size=40).map(lambda t: "/" + t),
)
def test_every_record_the_role_can_write_reads_back_whole(vmid, hostname, platform, config):
    record = {"vmid": vmid, "hostname": hostname, "platform": platform, "config": config}
    if any(c in config for c in "\x00\n\r"):
        with pytest.raises(PendingRecordError, match="is not an absolute path"):
            parse_pending_record(json.dumps(record), vmid)
    else:
        assert parse_pending_record(json.dumps(record, indent=2), str(vmid)) == record


@given(text=st.text(max_size=300) | JSONISH.map(json.dumps))
def test_any_text_is_a_record_or_a_clear_error(text):
    try:
        parse_pending_record(text, 101)
    except PendingRecordError as exc:
        message = str(exc)
    else:
        return
    assert message.startswith("the record: ")


# --- the entry points, run for real on this machine (the Proxmox host is localhost) ---------------------

STANDIN = """#!/bin/sh
# stands in for LXC's {name}: logs its argv; lxc-info says $LXC_STANDIN_STATE (RUNNING); the command
# named by $LXC_STANDIN_FAIL says why on stderr and exits 1
echo "{name} $*" >> "$LXC_STANDIN_LOG"
if [ "{name}" = "${{LXC_STANDIN_FAIL:-}}" ]; then echo "{name}: $2: failed (stand-in)" >&2; exit 1; fi
[ "{name}" = lxc-info ] && echo "${{LXC_STANDIN_STATE:-RUNNING}}"
exit 0
"""


def entry_point(tmp_path: Path, tasks: list, check: bool = False, **standin_env: str):
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    for name in ("lxc-stop", "lxc-start", "lxc-info"):
        path = bindir / name
        path.write_text(STANDIN.format(name=name), encoding="utf-8")
        path.chmod(0o755)
    play = [{"hosts": "localhost", "connection": "local", "gather_facts": False, "tasks": tasks}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play), encoding="utf-8")
    env = {
        "PATH": f"{bindir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "LXC_STANDIN_LOG": str(tmp_path / "lxc.log"),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default",
        **standin_env,
    }
    extra = {
        "ansible_python_interpreter": sys.executable,
        "proxmox_lxc_gpu_pending_dir": str(tmp_path / "pending"),
        "proxmox_lxc_gpu_start_timeout_s": 2,
    }
    return run_playbook(
        tmp_path / "play.yml", inventory="localhost,", env=env, check=check, extra_vars=extra, timeout=300
    )


def pending_then(then: list) -> list:
    return [
        {
            "ansible.builtin.include_role": {"name": "gpufleet.sglang.proxmox_lxc_gpu", "tasks_from": "pending"},
            "vars": {"proxmox_lxc_gpu_pending_vmid": 101},
        },
        {"ansible.builtin.debug": {"msg": "PENDING={{ proxmox_lxc_gpu_pending | to_json }}"}},
        *then,
    ]


RESTART = [
    {"ansible.builtin.include_role": {"name": "gpufleet.sglang.proxmox_lxc_gpu", "tasks_from": "restart_pending"}}
]


def test_nothing_pending_publishes_an_empty_record_and_restarts_nothing(tmp_path):
    result = entry_point(tmp_path, pending_then(RESTART)).expect(0)
    assert "msg: PENDING={}" in result.stdout, result.tail()
    assert not (tmp_path / "lxc.log").exists()


def test_a_pending_restart_restarts_that_container_once_and_clears_its_record(tmp_path):
    (tmp_path / "pending").mkdir()
    record = tmp_path / "pending" / "101.json"
    record.write_text(json.dumps(GOOD), encoding="utf-8")
    result = entry_point(tmp_path, pending_then(RESTART)).expect(0)
    assert "Restarting container 101 (lab-sglang1)" in result.stdout, result.tail()
    log = (tmp_path / "lxc.log").read_text(encoding="utf-8").splitlines()
    assert log == ["lxc-stop -n lab-sglang1 -t 120", "lxc-start -n lab-sglang1", "lxc-info -n lab-sglang1 -sH"]
    assert not record.exists()


@pytest.mark.parametrize(
    ("standin_env", "said", "ran"),
    [
        (
            {"LXC_STANDIN_FAIL": "lxc-stop"},
            "'Shut the container down (forced after 120 s)': lxc-stop: lab-sglang1: failed (stand-in).",
            ["lxc-stop -n lab-sglang1 -t 120"],
        ),
        (
            {"LXC_STANDIN_FAIL": "lxc-start"},
            "'Start the container': lxc-start: lab-sglang1: failed (stand-in).",
            ["lxc-stop -n lab-sglang1 -t 120", "lxc-start -n lab-sglang1"],
        ),
        (
            {"LXC_STANDIN_STATE": "STOPPED"},
            "'Wait until the container runs': still STOPPED after 2 s (proxmox_lxc_gpu_start_timeout_s).",
            ["lxc-stop -n lab-sglang1 -t 120", "lxc-start -n lab-sglang1", *["lxc-info -n lab-sglang1 -sH"] * 3],
        ),
    ],
    ids=["shutdown-fails", "start-fails", "never-running"],
)
def test_a_failed_restart_names_the_container_and_the_step_and_keeps_the_record(tmp_path, standin_env, said, ran):
    (tmp_path / "pending").mkdir()
    record = tmp_path / "pending" / "101.json"
    record.write_text(json.dumps(GOOD), encoding="utf-8")
    result = entry_point(tmp_path, pending_then(RESTART), **standin_env).expect(2)
    out = " ".join(result.stdout.split())
    assert f"container 101 (lab-sglang1): its restart failed at {said}" in out, result.tail()
    assert f"Its restart stays pending ({tmp_path / 'pending' / '101.json'} is kept)" in out, result.tail()
    assert (tmp_path / "lxc.log").read_text(encoding="utf-8").splitlines() == ran
    assert json.loads(record.read_text(encoding="utf-8")) == GOOD


def test_check_mode_says_what_it_would_restart_and_keeps_the_record(tmp_path):
    (tmp_path / "pending").mkdir()
    record = tmp_path / "pending" / "101.json"
    record.write_text(json.dumps(GOOD), encoding="utf-8")
    result = entry_point(tmp_path, pending_then(RESTART), check=True).expect(0)
    assert "Would restart container 101 (lab-sglang1)" in result.stdout, result.tail()
    assert not (tmp_path / "lxc.log").exists()
    assert record.exists()


@pytest.mark.parametrize(
    ("plant", "message"),
    [
        ("other", "names vmid 102, not 101: it is not this container's record"),
        ("dir", "101.json is not a regular file"),
    ],
)
def test_a_planted_record_fails_naming_it_and_nothing_restarts(tmp_path, plant, message):
    (tmp_path / "pending").mkdir()
    record = tmp_path / "pending" / "101.json"
    if plant == "dir":
        record.mkdir()
    else:
        record.write_text(json.dumps({**GOOD, "vmid": 102}), encoding="utf-8")
    result = entry_point(tmp_path, pending_then(RESTART)).expect(2)
    assert message in " ".join(result.stdout.split()), result.tail()
    assert not (tmp_path / "lxc.log").exists()
