# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""STAND-IN for a Proxmox VE host as the container connections see it (community.proxmox.proxmox_pct_remote
and gpufleet.sglang.pct_pipelined): an SSH server (paramiko, in a thread of the test) that accepts one
public key and runs what a real host runs for them, `/usr/sbin/pct exec <vmid> -- <command>`.

There is no container: `<command>` runs with /bin/sh on this machine, with its own HOME (the
"container's" root home), as pct exec would run its words inside the CT. A vmid not in ``running``
gets what pve-container prints for a stopped CT (`container '<vmid>' not running!` on stderr, exit
status 255) without its standard input being read. Any other command is refused with exit status 127.

Every exec is recorded (:class:`Exec`: the command, whether the client asked for a PTY, the bytes it
sent on standard input), so tests count the `pct exec` calls of a task. ``exec_delay_s`` adds a fixed
cost to each, standing in for pct's own start (a Perl program loading PVE's modules).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import paramiko
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from lib.tcp import serve_in_thread

PCT_EXEC = re.compile(r"^(?:sudo )?/usr/sbin/pct exec (\d+) -- (.*)$", re.DOTALL)
BUFSIZE = 32768


def new_key() -> tuple[paramiko.PKey, str]:
    """A new Ed25519 key: paramiko's object and its private key in OpenSSH's file format."""
    text = (
        Ed25519PrivateKey.generate()
        .private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption())
        .decode()
    )
    return paramiko.Ed25519Key.from_private_key(io.StringIO(text)), text


@dataclass
class Exec:
    command: str
    pty: bool
    stdin: bytes = b""


@dataclass
class PctSshd:
    """Serve on 127.0.0.1:<port> until :meth:`stop`; ``execs`` lists every exec request in order."""

    home: Path
    running: frozenset[int] = frozenset({101})
    exec_delay_s: float = 0.0
    host_key: paramiko.PKey = field(default_factory=lambda: new_key()[0])
    client_key: paramiko.PKey = field(init=False)
    client_key_text: str = field(init=False)
    execs: list[Exec] = field(default_factory=list)
    sessions: int = 0  # SSH logins (paramiko transports) accepted
    port: int = 0

    def __post_init__(self) -> None:
        self.client_key, self.client_key_text = new_key()
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self._stop = threading.Event()
        self._lock = threading.Lock()
        serve_in_thread(self._sock, self._session, self._stop)

    def known_hosts_line(self) -> str:
        return f"[127.0.0.1]:{self.port} {self.host_key.get_name()} {self.host_key.get_base64()}\n"

    def stop(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._sock.close()

    def _session(self, conn: socket.socket) -> None:
        transport = paramiko.Transport(conn)
        transport.add_server_key(self.host_key)
        server = _Server(self)
        try:
            transport.start_server(server=server)
        except (paramiko.SSHException, EOFError, OSError):
            return
        with self._lock:
            self.sessions += 1
        while transport.is_active() and not self._stop.is_set():
            chan = transport.accept(timeout=1)
            if chan is not None:
                threading.Thread(target=server.wait_and_run, args=(chan,), daemon=True).start()

    def run(self, chan: paramiko.Channel, record: Exec) -> None:
        with self._lock:
            self.execs.append(record)
        if self.exec_delay_s:
            time.sleep(self.exec_delay_s)
        found = PCT_EXEC.match(record.command)
        if found is None:
            chan.sendall_stderr(f"sh: 1: {record.command.split(' ', 1)[0]}: not found\n".encode())
            self._end(chan, 127)
            return
        vmid, words = int(found.group(1)), found.group(2)
        if vmid not in self.running:
            chan.sendall_stderr(f"container '{vmid}' not running!\n".encode())
            self._end(chan, 255)
            return
        proc = subprocess.Popen(
            ["/bin/sh", "-c", words],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home), "LANG": "C.UTF-8"},
            cwd=self.home,
        )
        pumps = [
            threading.Thread(target=_to_process, args=(chan, proc, record), daemon=True),
            threading.Thread(target=_from_process, args=(proc.stdout, chan.sendall), daemon=True),
            threading.Thread(target=_from_process, args=(proc.stderr, chan.sendall_stderr), daemon=True),
        ]
        for pump in pumps:
            pump.start()
        pumps[1].join()
        pumps[2].join()
        self._end(chan, proc.wait())

    @staticmethod
    def _end(chan: paramiko.Channel, status: int) -> None:
        with contextlib.suppress(OSError, EOFError):
            chan.send_exit_status(status)
            chan.shutdown_write()
            chan.close()


def _to_process(chan: paramiko.Channel, proc: subprocess.Popen, record: Exec) -> None:
    assert proc.stdin is not None
    with contextlib.suppress(OSError, EOFError):
        while chunk := chan.recv(BUFSIZE):
            record.stdin += chunk
            proc.stdin.write(chunk)
            proc.stdin.flush()
    with contextlib.suppress(OSError):
        proc.stdin.close()


def _from_process(stream, send) -> None:
    with contextlib.suppress(OSError, EOFError):
        while chunk := stream.read1(BUFSIZE):
            send(chunk)


class _Server(paramiko.ServerInterface):
    def __init__(self, sshd: PctSshd) -> None:
        self.sshd = sshd
        self.pty: set[int] = set()
        self.commands: dict[int, str] = {}
        self.ready: dict[int, threading.Event] = {}

    def _event(self, chanid: int) -> threading.Event:
        return self.ready.setdefault(chanid, threading.Event())

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        ok = key.get_base64() == self.sshd.client_key.get_base64()
        return paramiko.AUTH_SUCCESSFUL if ok else paramiko.AUTH_FAILED

    def check_channel_request(self, kind: str, chanid: int) -> int:
        return paramiko.OPEN_SUCCEEDED if kind == "session" else paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

    def check_channel_pty_request(self, channel, *_terminal) -> bool:
        self.pty.add(channel.get_id())
        return True

    def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
        self.commands[channel.get_id()] = command.decode("utf-8", "surrogateescape")
        self._event(channel.get_id()).set()
        return True

    def wait_and_run(self, chan: paramiko.Channel) -> None:
        if not self._event(chan.get_id()).wait(30):
            chan.close()
            return
        cid = chan.get_id()
        self.sshd.run(chan, Exec(self.commands[cid], cid in self.pty))
