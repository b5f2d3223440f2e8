# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""tests/gpu/sandbox.py, the unit's sandbox rebuilt without systemd: the allow list expands as systemd
expands it, and the seccomp filters it installs refuse what the unit refuses (run here, no GPU needed)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests/gpu"))

import gen_syscall_sets
import sandbox

SETS = sandbox.load_sets()

PROBE = """
import ctypes, errno, socket
libc = ctypes.CDLL(None, use_errno=True)
def call(nr, *args):
    return "ok" if libc.syscall(nr, *args) >= 0 else errno.errorcode[ctypes.get_errno()]
print("pidfd_getfd", call(438, -1, 0, 0))
print("unshare", call(272, 0x20000))
print("ptrace", call(101, 0, 0, 0, 0))
try:
    socket.socket(socket.AF_PACKET, socket.SOCK_RAW).close()
    print("af_packet ok")
except OSError as exc:
    print("af_packet", errno.errorcode[exc.errno])
socket.socket(socket.AF_UNIX).close()
print("done ok")
"""


def run_probe(*filters: str) -> dict[str, str]:
    # stay this uid (a root test run would otherwise switch to nobody, who may not reach this python)
    args = ["--uid", str(os.getuid()), "--gid", str(os.getgid())]
    args += [arg for entry in filters for arg in ("--filter", entry)]
    out = subprocess.run(
        [sys.executable, str(REPO / "tests/gpu/sandbox.py"), "--no-mounts", *args, "--", sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return dict(line.split(" ", 1) for line in out.stdout.splitlines())


def test_the_unit_default_expands_to_system_service_plus_pidfd_getfd() -> None:
    old = sandbox.expand(["@system-service"], SETS["groups"])
    new = sandbox.expand(["@system-service", "pidfd_getfd"], SETS["groups"])
    assert new - old == {"pidfd_getfd"}
    assert {"ioctl", "mmap", "memfd_create", "mbind", "clone3", "execve"} <= old  # what CUDA and NCCL use
    assert "pidfd_getfd" in sandbox.expand(["@debug"], SETS["groups"])
    assert "execve" in sandbox.expand([], SETS["groups"])  # @default is always there, as in systemd


def test_deny_lists_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="only allow lists"):
        sandbox.expand(["~@mount"], SETS["groups"])
    with pytest.raises(ValueError, match="@nosuch: no such group"):
        sandbox.expand(["@nosuch"], SETS["groups"])


def test_filters_fit_the_kernels_limit() -> None:
    numbers = sandbox.allowed_numbers(["@known"], SETS)
    assert len(sandbox.allow_list_filter(numbers, sandbox.errno_ret(1))) // 8 < 4096


@pytest.mark.skipif(sys.platform != "linux", reason="seccomp is Linux's")
def test_installed_filters_refuse_what_the_unit_refuses() -> None:
    """pidfd_getfd: EPERM under @system-service, reaches the kernel (EBADF) with it allowed; ptrace and
    namespaces EPERM, AF_PACKET EAFNOSUPPORT, AF_UNIX allowed."""
    old = run_probe("@system-service")
    assert old["pidfd_getfd"] == "EPERM"
    assert old["unshare"] == "EPERM"
    assert old["ptrace"] == "EPERM"
    assert old["af_packet"] == "EAFNOSUPPORT"
    assert "done" in old
    new = run_probe("@system-service", "pidfd_getfd")
    assert new["pidfd_getfd"] == "EBADF"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze (the table's source)")
def test_shipped_table_matches_this_hosts_systemd_of_the_same_version() -> None:
    version = subprocess.run(["systemd-analyze", "--version"], capture_output=True, text=True, check=True)
    if version.stdout.splitlines()[0] != SETS["systemd_version"]:
        pytest.skip(f"this host has {version.stdout.splitlines()[0]}, the table {SETS['systemd_version']}")
    listing = subprocess.run(["systemd-analyze", "syscall-filter"], capture_output=True, text=True, check=True)
    assert gen_syscall_sets.parse_groups(listing.stdout) == SETS["groups"]


@given(st.text(max_size=400))
def test_parse_groups_takes_any_text(text: str) -> None:
    """Whatever systemd-analyze prints: groups of member names, members only under an @group line."""
    groups = gen_syscall_sets.parse_groups(text)
    assert all(name.startswith("@") for name in groups)
    assert all(
        isinstance(member, str) and member and not member.startswith("#") for m in groups.values() for member in m
    )
