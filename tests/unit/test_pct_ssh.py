# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The connection gpufleet.sglang.pct_ssh (plugins/connection/pct_ssh.py) and the pct line it shares with
pct_pipelined (plugins/plugin_utils/pct.py).

ansible.builtin.ssh's own run is replaced by a recorder here (what it would send to the Proxmox host, and
what the host answers); the real OpenSSH path, against a real sshd and a real LXC guest, is
tests/integration/test_pct_connection.py. The file copies are checked by running the line the host's
shell would run, here, with pct's part cut off: any file name lands where it says, byte for byte.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest
from ansible import constants as C
from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.playbook.play_context import PlayContext
from ansible.plugins.connection import ssh
from hypothesis import given, settings
from hypothesis import strategies as st
from lib.fuzz import examples
from lib.module import documented_options

from ansible_collections.gpufleet.sglang.plugins.connection import pct_ssh
from ansible_collections.gpufleet.sglang.plugins.plugin_utils.pct import PCT, pct_exec_line

NAME = "gpufleet.sglang.pct_ssh"
PYTHON_CMD = "/bin/sh -c '/usr/bin/python3 && sleep 0'"
HOST = "192.0.2.10"


class Recorder:
    """Stands in for ansible.builtin.ssh's exec_command: records each line and answers from a script."""

    def __init__(self, answers: list[tuple[int, bytes, bytes]] | None = None) -> None:
        self.calls: list[tuple[str, bytes | None, bool]] = []
        self.answers = answers or []

    def __call__(self, conn, cmd, in_data=None, sudoable=True):
        self.calls.append((cmd, in_data, sudoable))
        return self.answers.pop(0) if self.answers else (0, b"", b"")

    @property
    def method(self):
        """A function, which a class attribute binds as a method (an instance would not be)."""

        def exec_command(conn, *args, **kwargs):
            return self(conn, *args, **kwargs)

        return exec_command


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    rec = Recorder()
    monkeypatch.setattr(ssh.Connection, "exec_command", rec.method)
    return rec


def connection(**var_options: object) -> pct_ssh.Connection:
    """The plugin as Ansible's loader makes it: its options registered from its DOCUMENTATION and doc fragments."""
    C.config.initialize_plugin_configuration_definitions("connection", NAME, documented_options(pct_ssh.DOCUMENTATION))
    conn = pct_ssh.Connection(PlayContext(), None)
    conn._load_name = NAME
    conn.set_options(var_options={"proxmox_vmid": 101, "ansible_host": HOST, "ansible_user": "root", **var_options})
    return conn


def without_version_added(doc: object) -> object:
    """``doc`` without its ``version_added`` keys (ansible-core's versions, which are not this collection's)."""
    if isinstance(doc, dict):
        return {k: without_version_added(v) for k, v in doc.items() if k != "version_added"}
    if isinstance(doc, list):
        return [without_version_added(v) for v in doc]
    return doc


def test_the_options_are_sshs_plus_the_container():
    """Copied from ansible.builtin.ssh (Ansible reads DOCUMENTATION without importing): an ansible-core that
    adds, drops or changes an option makes this fail, and the copy is made again. Ours differs in use_tty's
    default only, and has none of ansible-core's version_added; its variable lists may name more sources
    than a newer ansible-core's."""
    ours = without_version_added(documented_options(pct_ssh.DOCUMENTATION))
    theirs = without_version_added(documented_options(ssh.DOCUMENTATION))
    assert "version_added" not in pct_ssh.DOCUMENTATION.split("options:", 1)[1]
    assert set(ours) == {*theirs, "vmid", "proxmox_become_method"}
    assert (ours["use_tty"]["default"], theirs["use_tty"]["default"]) == (False, True)
    for name, option in theirs.items():
        for key in ("type", "default", "env", "ini", "cli", "keyword"):
            if (name, key) != ("use_tty", "default"):
                assert ours[name].get(key) == option.get(key), (name, key)
        names = {v["name"] for v in ours[name].get("vars", [])}
        assert names >= {v["name"] for v in option.get("vars", [])}, name


def test_a_command_runs_through_pct_exec_on_the_host(recorder):
    conn = connection()
    assert conn.exec_command(PYTHON_CMD, in_data=b"print(1)\n") == (0, b"", b"")
    assert recorder.calls == [(f"{PCT} exec 101 -- {PYTHON_CMD}", b"print(1)\n", True)]


def test_a_login_that_is_not_root_runs_pct_behind_the_become_method(recorder):
    connection(ansible_user="ansible", proxmox_become_method="sudo -n").exec_command("true", sudoable=False)
    assert recorder.calls == [(f"sudo -n {PCT} exec 101 -- true", None, False)]


@pytest.mark.parametrize("method", ["sudo; id", "sudo $(id)", "sudo `id`", "sudo\nid", "sudo | sh", "'sudo'", ""])
def test_a_become_method_with_shell_syntax_is_refused_before_anything_runs(recorder, method):
    conn = connection(ansible_user="ansible", proxmox_become_method=method)
    with pytest.raises(AnsibleConnectionFailure, match="proxmox_become_method"):
        conn.exec_command("true")
    assert recorder.calls == []


@settings(max_examples=examples(40))  # each example loads the plugin's options
@given(st.one_of(st.integers(), st.booleans(), st.text(alphabet="0123456789 -+_;$`x", min_size=1, max_size=12)))
def test_any_vmid_reaches_the_host_as_a_container_id_or_is_refused(vmid):
    rec = Recorder()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ssh.Connection, "exec_command", rec.method)
        try:
            conn = connection(proxmox_vmid=vmid)
        except AnsibleError:
            return  # Ansible's own int conversion refused it: nothing can run
        try:
            conn.exec_command("true")
        except AnsibleConnectionFailure as error:
            message = str(error)
            assert "proxmox_vmid" in message
            assert rec.calls == []
            return
    token = rec.calls[0][0].split()[2]
    assert token.isdigit()
    assert 100 <= int(token) <= 999_999_999


def test_a_host_without_pct_is_named(recorder):
    recorder.answers.append((127, b"", b"sh: 1: /usr/sbin/pct: not found\n"))
    with pytest.raises(AnsibleError, match=f"pct not found on the Proxmox host {HOST}"):
        connection().exec_command("true")


def test_a_failing_command_in_the_container_is_passed_through(recorder):
    recorder.answers.append((127, b"", b"sh: 1: frob: not found\n"))
    assert connection().exec_command("frob") == (127, b"", b"sh: 1: frob: not found\n")


def in_container(line: str, cwd: Path, stdin: bytes | None) -> subprocess.CompletedProcess[bytes]:
    """What the Proxmox host's shell and then pct do with ``line``: the host's shell splits it into words,
    pct exec runs the words after ``--`` in the container (here: in ``cwd``)."""
    words = shlex.split(line)
    assert words[:4] == [PCT, "exec", "101", "--"], words
    return subprocess.run(words[4:], cwd=cwd, input=stdin, capture_output=True, check=False)


NAMES = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="/\x00"), min_size=1, max_size=40
).filter(lambda n: n not in (".", "..") and len(n.encode()) <= 200)


@settings(max_examples=examples(30))  # two processes per example
@given(name=NAMES, data=st.binary(max_size=2048))
def test_any_file_name_is_written_and_read_back_where_it_says(tmp_path_factory, name, data):
    """put_file and fetch_file quote the path for the container's shell: a name with spaces, quotes, $(...),
    newlines or a leading dash lands at exactly that name and nowhere else, and comes back byte for byte."""
    here = tmp_path_factory.mktemp("ct")
    src = here.parent / f"{here.name}-src"
    src.write_bytes(data)
    seen: list[subprocess.CompletedProcess[bytes]] = []

    def run(conn, cmd, in_data=None, sudoable=True):
        done = in_container(cmd, here, in_data)
        seen.append(done)
        return done.returncode, done.stdout, done.stderr

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ssh.Connection, "exec_command", run)
        conn = connection()
        conn.put_file(str(src), str(here / name))
        assert [p.name for p in here.iterdir()] == [name]
        assert (here / name).read_bytes() == data
        back = here.parent / f"{here.name}-back"
        conn.fetch_file(str(here / name), str(back))
    assert back.read_bytes() == data
    assert len(seen) == 2  # each copy is one pct exec


def test_a_copy_that_fails_in_the_container_names_the_path(recorder, tmp_path):
    src = tmp_path / "f"
    src.write_bytes(b"x")
    recorder.answers.append((1, b"", b"sh: 1: cannot create /ro/f: Read-only file system\n"))
    with pytest.raises(AnsibleError, match=r"writing /ro/f in container 101 failed: .*Read-only file system"):
        connection().put_file(str(src), "/ro/f")
    recorder.answers.append((1, b"", b""))
    with pytest.raises(AnsibleError, match=r"reading /nope in container 101 failed: exit status 1"):
        connection().fetch_file("/nope", str(tmp_path / "back"))
    assert not (tmp_path / "back").exists()


@settings(max_examples=examples(60))
@given(cmd=st.text(min_size=1, max_size=60), user=st.sampled_from(["root", "ansible"]))
def test_the_pct_line_is_pcts_and_the_command_after_it(cmd, user):
    line = pct_exec_line(cmd, 4242, user, "sudo", "pve1")
    prefix = "" if user == "root" else "sudo "
    assert line == f"{prefix}{PCT} exec 4242 -- {cmd}"
