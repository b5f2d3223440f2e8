# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""lxc_running: which of a Proxmox (or LXC) host's containers run, from one `pct list` or `lxc-ls`.

Role proxmox_lxc_gpu decides from it which containers to start and which to restart, so a listing it
cannot read must stop the run naming the line, never read as "stopped" (a start) or "running" (a
restart). Named cases in pct's own format (PVE::CLI::pct prints "%-10s %-10s %-12s %-20s"), the
refusals, and properties over any fleet and any text."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpufleet.sglang.plugins.filter.lxc_running import lxc_running
from ansible_collections.gpufleet.sglang.plugins.module_utils.nvidia.lxc_pending import (
    PendingRecordError,
    running_vmids,
)

ROW = "%-10s %-10s %-12s %-20s"
FLEET = [{"vmid": 101, "hostname": "sglang1"}, {"vmid": 102, "hostname": "sglang2"}, {"vmid": 103, "hostname": "gw"}]


def pct_list(rows) -> str:
    return "\n".join([ROW % ("VMID", "Status", "Lock", "Name")] + [ROW % row for row in rows]) + "\n"


def test_pct_list_with_a_lock_and_a_blank_lock_column():
    rows = [
        ("101", "running", "", "sglang1"),
        ("102", "stopped", "backup", "sglang2"),
        ("103", "running", "mounted", "gw"),
    ]
    text = pct_list(rows)
    assert running_vmids(text, "proxmox", FLEET) == [101, 103]


def test_a_container_the_host_does_not_list_is_not_running_and_others_are_ignored():
    text = pct_list([("101", "running", "", "sglang1"), ("999", "running", "", "someone-elses")])
    assert running_vmids(text, "proxmox", FLEET) == [101]
    # pct prints nothing at all on a host without containers
    assert running_vmids("", "proxmox", FLEET) == []


def test_lxc_ls_names_the_running_containers_one_per_line():
    assert running_vmids("sglang2\ngw\nother\n", "lxc", FLEET) == [102, 103]
    assert running_vmids("", "lxc", FLEET) == []


@pytest.mark.parametrize(
    ("text", "platform", "fault"),
    [
        ("VMID Status\n101 running\n", "proxmox", "pct list line 1: 'VMID Status'"),
        (pct_list([]) + "101\n", "proxmox", "pct list line 2: '101'"),
        (pct_list([]) + "CT 101 running\n", "proxmox", "pct list line 2"),
        (pct_list([]) + "101 running;reboot x\n", "proxmox", "pct list line 2"),
        ("sglang1 gw\n", "lxc", "lxc-ls line 1: 'sglang1 gw' is not a container name"),
        ("../x\n", "lxc", "lxc-ls line 1"),
        ("101 running\n", "pve", "platform 'pve' is not one of"),
    ],
    ids=["short-header", "vmid-alone", "extra-column-first", "semicolon", "two-names", "path", "platform"],
)
def test_a_listing_of_another_format_is_refused_naming_the_line(text, platform, fault):
    with pytest.raises(PendingRecordError, match=fault.replace("(", r"\(").replace("[", r"\[")):
        running_vmids(text, platform, FLEET)
    with pytest.raises(AnsibleFilterError, match="lxc_running: "):
        lxc_running(text, platform, FLEET)


HOSTNAME = st.from_regex(r"[A-Za-z0-9]([A-Za-z0-9-]{0,10}[A-Za-z0-9])?", fullmatch=True)
STATUS = st.sampled_from(["running", "stopped", "paused", "unknown"])
LOCK = st.sampled_from(["", "backup", "mounted", "migrate", "snapshot-delete"])


@given(
    fleet=st.dictionaries(st.integers(100, 999_999_999), st.tuples(HOSTNAME, STATUS, LOCK, st.booleans()), max_size=8)
)
def test_property_pct_list_gives_exactly_the_listed_running_containers(fleet):
    containers = [{"vmid": vmid, "hostname": name} for vmid, (name, _s, _l, _listed) in fleet.items()]
    rows = [(str(v), s, lock, n) for v, (n, s, lock, listed) in fleet.items() if listed]
    want = [v for v, (_n, s, _l, listed) in fleet.items() if listed and s == "running"]
    assert running_vmids(pct_list(rows) if rows else "", "proxmox", containers) == want


@given(names=st.lists(HOSTNAME, unique=True, max_size=8), up=st.data())
def test_property_lxc_ls_gives_exactly_the_named_containers(names, up):
    containers = [{"vmid": 100 + i, "hostname": n} for i, n in enumerate(names)]
    running = up.draw(st.lists(st.sampled_from(names), unique=True) if names else st.just([]))
    want = [100 + i for i, n in enumerate(names) if n in running]
    assert running_vmids("\n".join(running), "lxc", containers) == want


@given(text=st.text(max_size=200), platform=st.sampled_from(["proxmox", "lxc"]))
def test_property_any_text_is_a_list_of_the_fleets_vmids_or_a_clear_error(text, platform):
    try:
        out = running_vmids(text, platform, FLEET)
    except PendingRecordError as exc:
        where = str(exc)
        assert "line " in where
    else:
        assert set(out) <= {101, 102, 103}
        assert out == sorted(out)  # FLEET's order


def test_a_vmid_given_as_a_string_comes_back_as_given():
    fleet = [{"vmid": "101", "hostname": "a"}, {"vmid": 102, "hostname": "b"}]
    text = pct_list([("101", "running", "", "a"), ("102", "running", "", "b")])
    assert running_vmids(text, "proxmox", fleet) == ["101", 102]
