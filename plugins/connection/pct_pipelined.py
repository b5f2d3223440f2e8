# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Connection plugin: community.proxmox.proxmox_pct_remote with Ansible pipelining (one `pct exec` per module)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: pct_pipelined
short_description: Run tasks in Proxmox LXC containers through pct exec over SSH, one pct exec per module
version_added: "0.1.0"
author:
  - gpufleet.sglang contributors (!UNKNOWN)
extends_documentation_fragment:
  - gpufleet.sglang.pct_container
requirements:
  - paramiko
  - community.proxmox (its proxmox_pct_remote connection, 1.4 or later)
description:
  - The connection C(community.proxmox.proxmox_pct_remote) with Ansible pipelining; a module is fed on the
    standard input of one C(pct exec <vmid> -- <python>) on the Proxmox host, over the task's SSH session
    to that host, instead of six C(pct exec) calls with ansible-core 2.19 (expand C(~), create a temporary
    directory, write the module into it, make it executable, run it and remove the directory).
  - Login, host key checking, file copies and every option are those of C(proxmox_pct_remote); the options
    below are its options (a unit test checks they stay equal) plus O(pipelining).
  - A pipelined command gets no PTY (a PTY would echo the module back, cut its lines at 4095 bytes and
    never pass on the end of input). C(become) runs without a PTY then, which C(sudo) allows unless the
    container's sudoers says C(requiretty). C(become) with a password is not pipelined (C(sudo -S) would
    prompt on standard error, which the parent reads only at the end); such tasks take the six
    C(pct exec) calls of C(proxmox_pct_remote).
  - See docs/connection.md of this collection for what each task costs on each connection.
options:
  pipelining:
    description:
      - Feed each module on the standard input of one C(pct exec) (V(true)), or send it as
        C(proxmox_pct_remote) does, six C(pct exec) per module (V(false)).
    type: boolean
    default: true
    env:
      - name: ANSIBLE_PIPELINING
    ini:
      - section: defaults
        key: pipelining
      - section: connection
        key: pipelining
    vars:
      - name: ansible_pipelining
  remote_addr:
    description:
    - Address of the remote target.
    default: inventory_hostname
    type: string
    vars:
    - name: inventory_hostname
    - name: ansible_host
    - name: ansible_ssh_host
    - name: ansible_paramiko_host
  port:
    description: Remote port to connect to.
    type: int
    default: 22
    ini:
    - section: defaults
      key: remote_port
    - section: paramiko_connection
      key: remote_port
    env:
    - name: ANSIBLE_REMOTE_PORT
    - name: ANSIBLE_REMOTE_PARAMIKO_PORT
    vars:
    - name: ansible_port
    - name: ansible_ssh_port
    - name: ansible_paramiko_port
    keyword:
    - name: port
  remote_user:
    description:
    - User to login/authenticate as.
    - Can be set from the CLI via the C(--user) or C(-u) options.
    type: string
    vars:
    - name: ansible_user
    - name: ansible_ssh_user
    - name: ansible_paramiko_user
    env:
    - name: ANSIBLE_REMOTE_USER
    - name: ANSIBLE_PARAMIKO_REMOTE_USER
    ini:
    - section: defaults
      key: remote_user
    - section: paramiko_connection
      key: remote_user
    keyword:
    - name: remote_user
  password:
    description:
    - Secret used to either login the SSH server or as a passphrase for SSH keys that require it.
    - Can be set from the CLI via the C(--ask-pass) option.
    type: string
    vars:
    - name: ansible_password
    - name: ansible_ssh_pass
    - name: ansible_ssh_password
    - name: ansible_paramiko_pass
    - name: ansible_paramiko_password
  use_rsa_sha2_algorithms:
    description:
    - Whether or not to enable RSA SHA2 algorithms for pubkeys and hostkeys.
    - On paramiko versions older than 2.9, this only affects hostkeys.
    - For behavior matching paramiko<2.9 set this to V(false).
    vars:
    - name: ansible_paramiko_use_rsa_sha2_algorithms
    ini:
    - key: use_rsa_sha2_algorithms
      section: paramiko_connection
    env:
    - name: ANSIBLE_PARAMIKO_USE_RSA_SHA2_ALGORITHMS
    default: true
    type: boolean
  host_key_auto_add:
    description: Automatically add host keys to C(~/.ssh/known_hosts).
    env:
    - name: ANSIBLE_PARAMIKO_HOST_KEY_AUTO_ADD
    ini:
    - key: host_key_auto_add
      section: paramiko_connection
    type: boolean
  look_for_keys:
    default: true
    description: Set to V(false) to disable searching for private key files in C(~/.ssh/).
    env:
    - name: ANSIBLE_PARAMIKO_LOOK_FOR_KEYS
    ini:
    - key: look_for_keys
      section: paramiko_connection
    type: boolean
  proxy_command:
    default: ''
    description:
    - Proxy information for running the connection via a jumphost.
    type: string
    env:
    - name: ANSIBLE_PARAMIKO_PROXY_COMMAND
    ini:
    - key: proxy_command
      section: paramiko_connection
    vars:
    - name: ansible_paramiko_proxy_command
  pty:
    default: true
    description: C(sudo) usually requires a PTY, V(true) to give a PTY and V(false) to not give a PTY.
    env:
    - name: ANSIBLE_PARAMIKO_PTY
    ini:
    - section: paramiko_connection
      key: pty
    type: boolean
  record_host_keys:
    default: true
    description: Save the host keys to a file.
    env:
    - name: ANSIBLE_PARAMIKO_RECORD_HOST_KEYS
    ini:
    - section: paramiko_connection
      key: record_host_keys
    type: boolean
  host_key_checking:
    description: Set this to V(false) if you want to avoid host key checking by the underlying tools Ansible uses
      to connect to the host.
    type: boolean
    default: true
    env:
    - name: ANSIBLE_HOST_KEY_CHECKING
    - name: ANSIBLE_SSH_HOST_KEY_CHECKING
    - name: ANSIBLE_PARAMIKO_HOST_KEY_CHECKING
    ini:
    - section: defaults
      key: host_key_checking
    - section: paramiko_connection
      key: host_key_checking
    vars:
    - name: ansible_host_key_checking
    - name: ansible_ssh_host_key_checking
    - name: ansible_paramiko_host_key_checking
  use_persistent_connections:
    description: Toggles the use of persistence for connections.
    type: boolean
    default: false
    env:
    - name: ANSIBLE_USE_PERSISTENT_CONNECTIONS
    ini:
    - section: defaults
      key: use_persistent_connections
  forward_agent:
    description: Enable SSH agent forwarding.
    type: boolean
    default: false
    env:
    - name: ANSIBLE_PARAMIKO_FORWARD_AGENT
    ini:
    - section: paramiko_connection
      key: forward_agent
  banner_timeout:
    type: float
    default: 30
    description:
    - Configures, in seconds, the amount of time to wait for the SSH banner to be presented. This option is supported
      by paramiko version 1.15.0 or newer.
    ini:
    - section: paramiko_connection
      key: banner_timeout
    env:
    - name: ANSIBLE_PARAMIKO_BANNER_TIMEOUT
  timeout:
    type: int
    default: 10
    description: Number of seconds until the plugin gives up on failing to establish a TCP connection.
    ini:
    - section: defaults
      key: timeout
    - section: ssh_connection
      key: timeout
    - section: paramiko_connection
      key: timeout
    env:
    - name: ANSIBLE_TIMEOUT
    - name: ANSIBLE_SSH_TIMEOUT
    - name: ANSIBLE_PARAMIKO_TIMEOUT
    vars:
    - name: ansible_ssh_timeout
    - name: ansible_paramiko_timeout
    cli:
    - name: timeout
  lock_file_timeout:
    type: int
    default: 60
    description: Number of seconds until the plugin gives up on trying to write a lock file when writing SSH known
      host keys.
    vars:
    - name: ansible_lock_file_timeout
    env:
    - name: ANSIBLE_LOCK_FILE_TIMEOUT
  private_key_file:
    description:
    - Path to private key file to use for authentication.
    type: string
    ini:
    - section: defaults
      key: private_key_file
    - section: paramiko_connection
      key: private_key_file
    env:
    - name: ANSIBLE_PRIVATE_KEY_FILE
    - name: ANSIBLE_PARAMIKO_PRIVATE_KEY_FILE
    vars:
    - name: ansible_private_key_file
    - name: ansible_ssh_private_key_file
    - name: ansible_paramiko_private_key_file
    cli:
    - name: private_key_file
      option: --private-key
"""

EXAMPLES = r"""
# inventory group_vars of the containers (the rest as for community.proxmox.proxmox_pct_remote)
ansible_connection: gpufleet.sglang.pct_pipelined
ansible_host: "{{ hostvars[proxmox_host].ansible_host }}"
proxmox_vmid: 101
# turn pipelining off for one host (six pct exec per module again)
ansible_pipelining: false
"""

import threading

from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.module_utils.common.text.converters import to_bytes
from ansible.plugins.connection import ensure_connect
from ansible.utils.display import Display
from ansible_collections.community.proxmox.plugins.connection.proxmox_pct_remote import (
    Connection as PctRemoteConnection,
)
from ansible_collections.community.proxmox.plugins.connection.proxmox_pct_remote import (
    paramiko,
)

from ansible_collections.gpufleet.sglang.plugins.plugin_utils.pct import checked_become_method, checked_vmid

display = Display()
# paramiko's read and send size in proxmox_pct_remote
BUFSIZE = 4096
# what a channel closed without an exit status reports (paramiko's recv_exit_status)
NO_EXIT_STATUS = -1


def closed_message(vmid: object, host: object, error: BaseException | None) -> str:
    """What a channel that closed without an exit status means, and what to do."""
    why = f" ({error or type(error).__name__})" if error is not None else ""
    return (
        f"pct exec {vmid} on {host}: the SSH channel closed before the command's exit status came{why}. "
        f"The SSH session to {host} dropped or sshd ended the command: check `pct status {vmid}` "
        f"and the journal on {host}, then run again"
    )


def read_to_end(recv, bufsize: int = BUFSIZE) -> bytes:
    """Everything a channel's stream gives until its end (paramiko's recv/recv_stderr return b"" then)."""
    return b"".join(iter(lambda: recv(bufsize), b""))


def become_password(become) -> bool:
    """Whether the become plugin has a password to give (every become plugin with a prompt has this option)."""
    try:
        return bool(become.get_option("become_pass"))
    except KeyError:
        return False


def connect_failure(error: BaseException, user: object, host: object, port: object) -> AnsibleError:
    """What a failed login to the Proxmox host raises, as proxmox_pct_remote 1.x translated it: a connection
    failure (the host UNREACHABLE) with paramiko's reason. community.proxmox 2.0.0 (in ansible 14.5.0) calls
    ``self._raise_paramiko_connect_exception`` for this but defines it nowhere, so a refused or timed-out
    login or an unknown host key became an AttributeError and a FAILED host (upstream: community.proxmox
    issue 477, fixed by its pull request 492 after 2.0.0)."""
    msg = str(error) or type(error).__name__
    if "PID check failed" in msg:
        return AnsibleError("paramiko version issue, please upgrade paramiko on the machine running ansible")
    if "Private key file is encrypted" in msg:
        msg = f"ssh {user}@{host}:{port} : {msg}\nTo connect as a different user, use -u <username>."
    return AnsibleConnectionFailure(msg)


class Connection(PctRemoteConnection):
    """proxmox_pct_remote with pipelining: a module's source goes to the standard input of its one pct exec."""

    transport = "gpufleet.sglang.pct_pipelined"
    has_pipelining = True

    def is_pipelining_enabled(self, wrap_async: bool = False) -> bool:
        # become with a password would prompt (sudo -S: on stderr) before the module is read, on a channel
        # without a PTY: such a task takes the parent's way, with its PTY and prompt handling. Asked before the
        # become command is built, so from the password itself (expect_prompt() is true only after it)
        if self.become is not None and become_password(self.become):
            return False
        return super().is_pipelining_enabled(wrap_async)

    def _raise_paramiko_connect_exception(self, error: Exception, port: int) -> None:
        """Called by community.proxmox 2.0's login for any error but a bad host key or a refused login."""
        raise connect_failure(error, self.get_option("remote_user"), self.get_option("remote_addr"), port) from error

    def _build_pct_command(self, cmd: str) -> str:
        """The parent's ``pct exec <vmid> -- <cmd>`` line (run by the host's shell), once the inventory's
        values in it are checked: the vmid a container id, the become method plain words."""
        host = self.get_option("remote_addr")
        checked_vmid(self.get_option("vmid"), host)
        if self.get_option("remote_user") != "root":
            checked_become_method(self.get_option("proxmox_become_method"), host)
        return super()._build_pct_command(cmd)

    def exec_command(self, cmd: str, in_data: bytes | None = None, sudoable: bool = True) -> tuple[int, bytes, bytes]:
        """Run ``cmd`` in the container. Without ``in_data``, as proxmox_pct_remote does (PTY, become prompt).
        With it (a pipelined module, or put_file's stream) in one pct exec whose standard input is a pipe."""
        if in_data is None:
            return super().exec_command(cmd, in_data=None, sudoable=sudoable)
        return self._exec_piped(cmd, in_data)

    @ensure_connect
    def _exec_piped(self, cmd: str, in_data: bytes) -> tuple[int, bytes, bytes]:
        """One channel, no PTY (a PTY would echo the module back, cut its lines at 4095 bytes and never pass
        on the end of input): send ``in_data``, close our side, read stdout and stderr side by side (one
        of them left unread could fill the channel's window and stall the command), then the exit status."""
        command = self._build_pct_command(cmd)
        host = self.get_option("remote_addr")
        display.vvv(f"EXEC (stdin {len(in_data)} bytes) {command}", host=host)
        try:
            transport = self.ssh.get_transport()
            transport.set_keepalive(5)
            chan = transport.open_session()
        except Exception as error:
            raise AnsibleConnectionFailure(f"Failed to open session to {host}: {error}") from error
        if self.get_option("forward_agent"):
            paramiko.agent.AgentRequestHandler(chan)
        send_error: BaseException | None = None
        try:
            chan.exec_command(to_bytes(command, errors="surrogate_or_strict"))
            for start in range(0, len(in_data), BUFSIZE):
                chan.sendall(in_data[start : start + BUFSIZE])
            chan.shutdown_write()
        except (EOFError, OSError) as error:
            # the command ended before it read all of it (pct exec exits at once for a stopped container):
            # its exit status and stderr say why
            send_error = error
        stderr_chunks: list[bytes] = []
        reader = threading.Thread(target=lambda: stderr_chunks.append(read_to_end(chan.recv_stderr)), daemon=True)
        reader.start()
        stdout = read_to_end(chan.recv)
        reader.join()
        stderr = b"".join(stderr_chunks)
        returncode = chan.recv_exit_status()
        if returncode == NO_EXIT_STATUS:
            raise AnsibleConnectionFailure(closed_message(self.get_option("vmid"), host, send_error))
        if b"pct: not found" in stderr:
            raise AnsibleError(f"pct not found in path of host: {host}")
        return returncode, stdout, stderr
