# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The connection gpufleet.sglang.pct_pipelined (plugins/connection/pct_pipelined.py).

Two levels:
- a fake paramiko transport and channel (record what is sent, feed stdout, stderr and the exit status):
  one session per piped command, no PTY, the standard input delivered whole, exit codes and both
  streams passed through, a channel that closes early or without an exit status, become;
- real ansible-playbook runs against tests/standins/pct_sshd.py (an SSH server that runs
  `/usr/sbin/pct exec <vmid> -- <command>` here), beside community.proxmox.proxmox_pct_remote: the
  `pct exec` calls of each task counted, a drifted file found and fixed, a stopped container, a
  changed host key.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from dataclasses import dataclass, field

import pytest
import yaml
from ansible import constants as C
from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.playbook.play_context import PlayContext
from ansible.plugins.loader import become_loader
from ansible_collections.community.proxmox.plugins.connection import proxmox_pct_remote
from ansible_collections.community.proxmox.plugins.connection.proxmox_pct_remote import paramiko
from hypothesis import given, settings
from hypothesis import strategies as st
from lib.fuzz import examples
from lib.module import documented_options
from lib.playbook import REPO, run_playbook
from standins.pct_sshd import PctSshd

from ansible_collections.gpufleet.sglang.plugins.connection import pct_pipelined

PIPELINED = "gpufleet.sglang.pct_pipelined"
PARENT = "community.proxmox.proxmox_pct_remote"
PYTHON_CMD = "/bin/sh -c '/usr/bin/python3 && sleep 0'"


CLASSES = {PIPELINED: pct_pipelined.Connection, PARENT: proxmox_pct_remote.Connection}
# the options as the loader has them: ours with their doc fragments merged in (the parent names none)
OPTIONS = {
    PIPELINED: documented_options(pct_pipelined.DOCUMENTATION),
    PARENT: yaml.safe_load(proxmox_pct_remote.DOCUMENTATION)["options"],
}


def load(name: str):
    """Connection plugin ``name`` as Ansible's loader makes it, without the loader (whose collection finder
    would stay installed for every later test of the session): its options registered from its
    DOCUMENTATION and doc fragments under its name, the object named so."""
    C.config.initialize_plugin_configuration_definitions("connection", name, OPTIONS[name])
    conn = CLASSES[name](PlayContext(), None)
    conn._load_name = name
    return conn


# --- a fake paramiko session ---------------------------------------------------------------


@dataclass
class FakeChannel:
    """One SSH channel: what the plugin asks of it, and what the 'host' answers."""

    stdout: bytes = b""
    stderr: bytes = b""
    status: int = 0
    closed_after: int | None = None  # bytes of stdin taken before send raises "Socket is closed"
    command: bytes | None = None
    pty: bool = False
    stdin: bytes = b""
    shut: bool = False
    reads: dict[str, int] = field(default_factory=lambda: {"out": 0, "err": 0})

    def get_pty(self, **_kwargs: object) -> None:
        self.pty = True

    def exec_command(self, command: bytes) -> None:
        self.command = command

    def sendall(self, data: bytes) -> None:
        if self.closed_after is not None and len(self.stdin) + len(data) > self.closed_after:
            raise OSError("Socket is closed")
        self.stdin += data

    send = sendall

    def shutdown_write(self) -> None:
        self.shut = True

    def _read(self, which: str, data: bytes, size: int) -> bytes:
        at = self.reads[which]
        self.reads[which] = at + min(size, 1000)  # short reads, as a real channel gives
        return data[at : at + min(size, 1000)]

    def recv(self, size: int) -> bytes:
        return self._read("out", self.stdout, size)

    def recv_stderr(self, size: int) -> bytes:
        return self._read("err", self.stderr, size)

    def makefile(self, _mode: str, _size: int) -> list[bytes]:
        return [self.stdout]

    def makefile_stderr(self, _mode: str, _size: int) -> list[bytes]:
        return [self.stderr]

    def recv_exit_status(self) -> int:
        return self.status


@dataclass
class FakeTransport:
    channels: list[FakeChannel]
    opened: list[FakeChannel] = field(default_factory=list)
    refuse: bool = False

    def set_keepalive(self, _seconds: int) -> None:
        pass

    def open_session(self) -> FakeChannel:
        if self.refuse:
            raise EOFError("transport closed")
        chan = self.channels[len(self.opened)]
        self.opened.append(chan)
        return chan


@dataclass
class FakeSSH:
    transport: FakeTransport

    def get_transport(self) -> FakeTransport:
        return self.transport

    def close(self) -> None:
        pass


def connection(*channels: FakeChannel, name: str = PIPELINED, refuse: bool = False, **var_options: object):
    conn = load(name)
    conn.set_options(
        var_options={"proxmox_vmid": 101, "ansible_host": "192.0.2.10", "ansible_user": "root", **var_options}
    )
    transport = FakeTransport(list(channels), refuse=refuse)
    conn.ssh = FakeSSH(transport)
    conn._connected = True
    return conn, transport


def test_a_piped_command_is_one_pct_exec_without_pty_its_stdin_delivered_whole():
    chan = FakeChannel(stdout=b'{"ok": true}\n', stderr=b"warning\n", status=0)
    conn, transport = connection(chan)
    module = b"#!/usr/bin/python3\n" + b"x = 1\n" * 3000  # longer than a PTY's 4095-byte line and one send
    assert conn.exec_command(PYTHON_CMD, in_data=module) == (0, b'{"ok": true}\n', b"warning\n")
    assert transport.opened == [chan]
    assert chan.command == f"/usr/sbin/pct exec 101 -- {PYTHON_CMD}".encode()
    assert chan.stdin == module
    assert chan.shut
    assert not chan.pty


def test_the_parent_gives_a_piped_command_a_pty():
    """What the override is for: proxmox_pct_remote asks a PTY for every sudoable command, stdin or not."""
    chan = FakeChannel()
    conn, _transport = connection(chan, name=PARENT)
    conn.exec_command(PYTHON_CMD, in_data=b"print(1)\n")
    assert chan.pty


def test_a_command_without_stdin_runs_as_the_parent_runs_it():
    chan = FakeChannel(stdout=b"/root\n")
    conn, _transport = connection(chan)
    assert conn.exec_command("/bin/sh -c 'echo ~root && sleep 0'") == (0, b"/root\n", b"")
    assert chan.pty  # the parent's PTY (pty option, sudoable), unchanged
    assert not chan.shut


@given(
    in_data=st.binary(min_size=0, max_size=3 * 4096 + 7),
    stdout=st.binary(max_size=5000),
    stderr=st.binary(max_size=5000),
    status=st.integers(min_value=0, max_value=255),
)
def test_any_stdin_is_delivered_and_any_answer_passed_through(in_data, stdout, stderr, status):
    """Outside data both ways: the module's bytes whatever they are, the command's output whatever it is
    (not UTF-8 either: nothing is decoded), every exit status; a stderr that happens to hold the
    'pct: not found' text is the one named error."""
    chan = FakeChannel(stdout=stdout, stderr=stderr, status=status)
    conn, transport = connection(chan)
    if b"pct: not found" in stderr:
        with pytest.raises(AnsibleError, match=r"pct not found in path of host: 192\.0\.2\.10"):
            conn.exec_command(PYTHON_CMD, in_data=in_data)
        return
    assert conn.exec_command(PYTHON_CMD, in_data=in_data) == (status, stdout, stderr)
    assert chan.stdin == in_data
    assert len(transport.opened) == 1
    assert not chan.pty


def test_a_stopped_container_gets_pcts_own_message_and_status():
    """pct exec exits before it reads the module: the send fails, and what pct said comes back."""
    chan = FakeChannel(stderr=b"container '101' not running!\n", status=255, closed_after=0)
    conn, _transport = connection(chan)
    assert conn.exec_command(PYTHON_CMD, in_data=b"print(1)\n" * 1000) == (
        255,
        b"",
        b"container '101' not running!\n",
    )


def test_a_channel_closed_without_exit_status_is_a_clear_connection_error():
    chan = FakeChannel(status=pct_pipelined.NO_EXIT_STATUS, closed_after=10)
    conn, _transport = connection(chan)
    with pytest.raises(AnsibleConnectionFailure) as error:
        conn.exec_command(PYTHON_CMD, in_data=b"print(1)\n" * 100)
    text = str(error.value)
    assert "pct exec 101 on 192.0.2.10" in text
    assert "Socket is closed" in text
    assert "pct status 101" in text


def test_a_session_that_cannot_open_is_a_connection_error():
    conn, _transport = connection(refuse=True)
    with pytest.raises(AnsibleConnectionFailure, match=r"Failed to open session to 192\.0\.2\.10: transport closed"):
        conn.exec_command(PYTHON_CMD, in_data=b"print(1)\n")


def test_put_file_is_one_piped_exec(tmp_path):
    source = tmp_path / "f"
    source.write_bytes(b"\x00binary\xff" * 2000)
    chan = FakeChannel()
    conn, transport = connection(chan)
    conn.put_file(str(source), "/root/.ansible/tmp/x/f")
    assert transport.opened == [chan]
    assert chan.stdin == source.read_bytes()
    assert chan.command == b"/usr/sbin/pct exec 101 -- /bin/sh -c 'cat > /root/.ansible/tmp/x/f'"
    assert not chan.pty


def test_a_login_other_than_root_runs_pct_with_the_parents_become_method():
    chan = FakeChannel()
    conn, _transport = connection(chan, ansible_user="ansible")
    conn.exec_command(PYTHON_CMD, in_data=b"print(1)\n")
    assert chan.command == f"sudo /usr/sbin/pct exec 101 -- {PYTHON_CMD}".encode()


def become(password: str | None):
    plugin = become_loader.get("sudo")
    plugin.set_options(direct={"become_pass": password} if password else {})
    return plugin


@pytest.mark.parametrize(
    ("name", "var_options", "password", "pipelined"),
    [
        (PIPELINED, {}, None, True),  # pipelining is this plugin's default
        (PIPELINED, {"ansible_pipelining": False}, None, False),  # turned off per host
        (PIPELINED, {}, "secret", False),  # become with a password: the parent's three steps
        (PARENT, {"ansible_pipelining": True}, None, False),  # the parent cannot
    ],
)
def test_when_modules_are_pipelined(name, var_options, password, pipelined):
    conn, _transport = connection(name=name, **var_options)
    conn.set_become_plugin(become(password) if password or name == PIPELINED else None)
    assert conn.is_pipelining_enabled() is pipelined


def test_the_options_are_the_parents_plus_pipelining():
    """The options are copied from proxmox_pct_remote (Ansible reads DOCUMENTATION without importing):
    a community.proxmox that changes its options makes this fail, and the copy is made again."""
    ours = documented_options(pct_pipelined.DOCUMENTATION)
    parents = yaml.safe_load(proxmox_pct_remote.DOCUMENTATION)["options"]
    assert set(ours) == {*parents, "pipelining"}
    assert {k: v for k, v in ours.items() if k != "pipelining"} == parents


# --- real ansible-playbook runs against the pct stand-in ---------------------------------------


PLAY = """
- name: Three modules and a file
  hosts: all
  gather_facts: false
  tasks:
    - name: Ping
      ansible.builtin.ping:
    - name: Stat
      ansible.builtin.stat:
        path: /etc/hostname
    - name: Command
      ansible.builtin.command: cat /etc/hostname
      changed_when: false
"""
DRIFT_PLAY = """
- name: A managed file
  hosts: all
  gather_facts: false
  tasks:
    - name: File
      ansible.builtin.copy:
        content: "managed\\n"
        dest: "{{ managed_file }}"
        mode: "0644"
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("pct")
    (root / "ct").mkdir()
    (root / "home" / ".ssh").mkdir(parents=True)
    sshd = PctSshd(home=root / "ct", running=frozenset({101}))
    known_hosts = root / "home" / ".ssh" / "known_hosts"
    known_hosts.write_text(sshd.known_hosts_line())
    key = root / "key"
    key.write_text(sshd.client_key_text)
    key.chmod(0o600)
    (root / "play.yml").write_text(PLAY)
    (root / "drift.yml").write_text(DRIFT_PLAY)
    yield root, sshd, key, known_hosts
    sshd.stop()


def play(lab, connection_name: str, playbook: str = "play.yml", vmid: int = 101, **more: object):
    root, sshd, key, _known_hosts = lab
    host = more | {
        "ansible_connection": connection_name,
        "ansible_host": "127.0.0.1",
        "ansible_port": sshd.port,
        "ansible_user": "root",
        "proxmox_vmid": vmid,
        "ansible_ssh_private_key_file": str(key),
        "ansible_python_interpreter": sys.executable,
        "managed_file": str(root / "ct" / "managed"),
    }
    inventory = root / "inventory.json"
    inventory.write_text(json.dumps({"all": {"hosts": {f"ct{vmid}": host}}}))
    sshd.execs.clear()
    env = {"HOME": str(root / "home"), "ANSIBLE_PARAMIKO_LOOK_FOR_KEYS": "False", "ANSIBLE_PARAMIKO_PTY": "True"}
    return run_playbook(root / playbook, inventory=inventory, env=env), list(sshd.execs)


def test_one_pct_exec_per_module_against_the_parents_several(lab):
    result, execs = play(lab, PIPELINED)
    result.expect(0)
    assert len(execs) == 3, [e.command for e in execs]
    assert all(e.command.startswith("/usr/sbin/pct exec 101 -- ") for e in execs)
    assert all(not e.pty and len(e.stdin) > 10_000 for e in execs)  # the module came on stdin
    parent, parent_execs = play(lab, PARENT)
    parent.expect(0)
    assert len(parent_execs) >= 3 * 3, [e.command for e in parent_execs]


@pytest.fixture(scope="module")
def drift_runs(lab):
    """The drift play's runs that two tests read, run once: a first run (the file written), an unchanged
    run with the default remote_tmp and one with the inventories' (group_vars/proxmox_containers.yml),
    a hand edit fixed with the default remote_tmp and another with the inventories'. Each run's result,
    its pct execs and the managed file's text after it."""
    managed = lab[0] / "ct" / "managed"
    remote_tmp = {
        yaml.safe_load((REPO / "inventories" / inv / "group_vars" / "proxmox_containers.yml").read_text())[
            "ansible_remote_tmp"
        ]
        for inv in ("lab", "local")
    }
    runs = {"remote_tmp": remote_tmp}

    def run(name: str, **more: object) -> None:
        result, execs = play(lab, PIPELINED, "drift.yml", **more)
        runs[name] = (result, execs, managed.read_text())

    written = {"ansible_remote_tmp": next(iter(remote_tmp))} if len(remote_tmp) == 1 else {}
    run("first")
    run("again")  # unchanged, the default remote_tmp
    run("written", **written)  # unchanged, the inventories' remote_tmp
    managed.write_text("edited by hand\n")
    run("fixed")
    managed.write_text("drifted\n")
    run("fixed_written", **written)
    return runs


def test_a_drifted_file_is_found_and_fixed_through_the_pipelined_connection(drift_runs):
    first, _execs, text = drift_runs["first"]
    first.expect(0)
    assert text == "managed\n"
    again, _execs, _text = drift_runs["again"]
    again.expect(0)
    assert "changed=0" in again.stdout
    # after the hand edit
    fixed, _execs, text = drift_runs["fixed"]
    fixed.expect(0)
    assert "changed=1" in fixed.stdout
    assert text == "managed\n"


def test_a_stopped_container_fails_the_task_with_pcts_message(lab):
    result, execs = play(lab, PIPELINED, vmid=102)
    assert result.rc != 0
    assert "container '102' not running!" in result.stdout
    assert len(execs) == 1


def test_a_changed_host_key_is_refused(lab):
    _root, sshd, _key, known_hosts = lab
    good = known_hosts.read_text()
    other = PctSshd(home=lab[0] / "ct")
    other.stop()
    known_hosts.write_text(good.replace(sshd.host_key.get_base64(), other.host_key.get_base64()))
    try:
        result, execs = play(lab, PIPELINED)
    finally:
        known_hosts.write_text(good)
    assert result.rc != 0
    assert "host key mismatch" in result.stdout
    assert execs == []
    assert os.environ.get("ANSIBLE_HOST_KEY_CHECKING", "true").lower() not in ("0", "false", "no")


def test_the_inventories_remote_tmp_saves_the_echo_of_home(drift_runs):
    """Lever B: group_vars/proxmox_containers.yml writes remote_tmp out; an unchanged copy is then four
    pct exec instead of five (no `echo ~root`), and still compared with the file (drift found)."""
    values = drift_runs["remote_tmp"]
    assert len(values) == 1
    drift_runs["first"][0].expect(0)
    default, default_execs, _text = drift_runs["again"]
    written, written_execs, _text = drift_runs["written"]
    for result in (default, written):
        result.expect(0)
        assert "changed=0" in result.stdout
    assert any("echo ~" in e.command for e in default_execs)
    assert not any("echo ~" in e.command for e in written_execs)
    assert len(written_execs) == len(default_execs) - 1
    # after a drift
    fixed, _execs, text = drift_runs["fixed_written"]
    fixed.expect(0)
    assert "changed=1" in fixed.stdout
    assert text == "managed\n"


# --- inventory values that reach the host's shell ---------------------------------------------


def refused_naming(conn, transport: FakeTransport, option: str) -> bool:
    """Run a module through ``conn``: True when it was refused naming ``option`` before any session opened,
    False when it ran."""
    try:
        conn.exec_command(PYTHON_CMD, in_data=b"print(1)\n")
    except AnsibleConnectionFailure as error:
        message = str(error)
        assert option in message
        assert transport.opened == []
        return True
    return False


@pytest.mark.parametrize("vmid", [-1, 0, 99, 1_000_000_000, True])
def test_a_vmid_that_is_not_a_container_id_is_refused_before_any_session(vmid):
    chan = FakeChannel()
    conn, transport = connection(chan, proxmox_vmid=vmid)
    for in_data in (b"print(1)\n", None):
        # Ansible's int conversion makes True 1 before the plugin sees it
        with pytest.raises(AnsibleConnectionFailure, match=rf"proxmox_vmid {int(vmid)!r} of 192\.0\.2\.10"):
            conn.exec_command(PYTHON_CMD, in_data=in_data)
    assert transport.opened == []


def test_a_missing_vmid_is_named():
    chan = FakeChannel()
    conn, transport = connection(chan)
    conn.set_options(var_options={"ansible_host": "192.0.2.10", "ansible_user": "root"})
    with pytest.raises(AnsibleConnectionFailure, match="proxmox_vmid None"):
        conn.exec_command(PYTHON_CMD, in_data=b"print(1)\n")
    assert transport.opened == []


@settings(max_examples=examples(40))  # each example loads the plugin's options
@given(st.one_of(st.integers(), st.text(alphabet="0123456789 -+_;$`x", min_size=1, max_size=12)))
def test_any_vmid_reaches_the_command_as_digits_of_a_container_id_or_is_refused(vmid):
    chan = FakeChannel()
    try:
        conn, transport = connection(chan, proxmox_vmid=vmid)
    except AnsibleError:
        return  # Ansible's own int conversion refused it: nothing can run
    if refused_naming(conn, transport, "proxmox_vmid"):
        return
    token = chan.command.split()[2]
    assert token.isdigit()
    assert 100 <= int(token) <= 999_999_999


@pytest.mark.parametrize(
    "method",
    ["sudo; touch /tmp/pwned", "sudo $(id)", "sudo `id`", "sudo\nid", "sudo | sh", "sudo && id", "'sudo'", ""],
)
def test_a_become_method_with_shell_syntax_is_refused_before_any_session(method):
    chan = FakeChannel()
    conn, transport = connection(chan, ansible_user="ansible", proxmox_become_method=method)
    for in_data in (b"print(1)\n", None):
        with pytest.raises(AnsibleConnectionFailure, match="proxmox_become_method"):
            conn.exec_command(PYTHON_CMD, in_data=in_data)
    assert transport.opened == []


@pytest.mark.parametrize("method", ["sudo", "/usr/bin/sudo", "doas", "sudo -n", "sudo --preserve-env=HOME"])
def test_a_plain_become_method_is_used_as_given(method):
    chan = FakeChannel()
    conn, _transport = connection(chan, ansible_user="ansible", proxmox_become_method=method)
    conn.exec_command(PYTHON_CMD, in_data=b"print(1)\n")
    assert chan.command == f"{method} /usr/sbin/pct exec 101 -- {PYTHON_CMD}".encode()


@settings(max_examples=examples(40))
@given(st.text(max_size=24))
def test_any_become_method_is_plain_words_or_refused(method):
    chan = FakeChannel()
    conn, transport = connection(chan, ansible_user="ansible", proxmox_become_method=method)
    if refused_naming(conn, transport, "proxmox_become_method"):
        return
    prefix = chan.command.decode()[: -len(f" /usr/sbin/pct exec 101 -- {PYTHON_CMD}")]
    assert prefix == method
    assert all(c.isascii() and (c.isalnum() or c in "_./=- ") for c in prefix)


# --- a login that fails -----------------------------------------------------------------------------


def closed_port() -> int:
    """A local TCP port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_refused_login_is_a_connection_failure_naming_the_port():
    """The whole login of the installed community.proxmox (1.x inline, 2.0.0 through the helper it lacks):
    a refused connection is AnsibleConnectionFailure (the host UNREACHABLE), never an AttributeError."""
    port = closed_port()
    conn = load(PIPELINED)
    conn.set_options(
        var_options={
            "proxmox_vmid": 101,
            "ansible_host": "127.0.0.1",
            "ansible_port": port,
            "ansible_user": "root",
            "ansible_paramiko_look_for_keys": False,
        }
    )
    with pytest.raises(AnsibleConnectionFailure, match=rf"Unable to connect to port {port} on 127\.0\.0\.1"):
        conn._connect()


@pytest.mark.parametrize(
    ("error", "kind", "message"),
    [
        (ConnectionRefusedError(111, "Connection refused"), AnsibleConnectionFailure, "[Errno 111] Connection refused"),
        (TimeoutError(), AnsibleConnectionFailure, "TimeoutError"),
        (
            paramiko.ssh_exception.SSHException("Private key file is encrypted"),
            AnsibleConnectionFailure,
            "ssh root@192.0.2.10:22 : Private key file is encrypted\nTo connect as a different user, use -u <username>",
        ),
        (paramiko.ssh_exception.SSHException("PID check failed"), AnsibleError, "paramiko version issue"),
    ],
    ids=["refused", "timeout", "encrypted-key", "old-paramiko"],
)
def test_a_failed_login_becomes_the_parents_1x_error(error, kind, message):
    conn = load(PIPELINED)
    conn.set_options(var_options={"proxmox_vmid": 101, "ansible_host": "192.0.2.10", "ansible_user": "root"})
    with pytest.raises(kind) as raised:
        conn._raise_paramiko_connect_exception(error, 22)
    assert isinstance(raised.value, AnsibleConnectionFailure) == (kind is AnsibleConnectionFailure)
    assert str(raised.value).startswith(message)
    assert raised.value.__cause__ is error
