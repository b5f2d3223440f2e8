# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Connection plugin: ansible.builtin.ssh to the Proxmox host, every command through `pct exec <vmid>`."""

from __future__ import annotations

DOCUMENTATION = r"""
name: pct_ssh
short_description: Run tasks in Proxmox LXC containers through pct exec over OpenSSH (ControlPersist, pipelining)
version_added: "0.1.0"
author:
  - gpufleet.sglang contributors (!UNKNOWN)
extends_documentation_fragment:
  - connection_pipelining
  - gpufleet.sglang.pct_container
description:
  - The connection C(ansible.builtin.ssh) to the Proxmox host, with every command run in the container by
    C(pct exec <vmid> -- <command>) on that host, as C(community.proxmox.proxmox_pct_remote) and
    C(gpufleet.sglang.pct_pipelined) run it. The container needs no SSH server, no address and no key.
  - What OpenSSH brings over the paramiko login of those two connections is its connection sharing
    (C(ControlMaster)/C(ControlPersist), on by default in Ansible), so every task of every container on one
    Proxmox host runs as a new session on one open connection, where the paramiko connections log in to
    the host anew for each task. Pipelining (on by default here, as in the collection's C(ansible.cfg))
    feeds a module on the standard input of its one C(pct exec).
  - Files go through C(pct exec) too (C(cat) in the container, on its standard input or output), never
    through SFTP or SCP to the host.
  - Every option is C(ansible.builtin.ssh)'s (a unit test checks they stay equal) plus O(vmid) and
    O(proxmox_become_method), which are C(proxmox_pct_remote)'s. Host key checking, C(ProxyJump) and the
    rest of OpenSSH's configuration apply to the login to the Proxmox host as for any SSH host.
  - OpenSSH returns 255 for its own failures, and C(pct) exits 255 when it refuses (a stopped container,
    an unknown id); such a task is UNREACHABLE with pct's message, as a host that cannot be reached.
  - The sessions of all the containers of one host share one connection, and C(sshd) allows 10 sessions on
    one connection by default (C(MaxSessions)); with more than 10 forks on one Proxmox host, raise
    C(MaxSessions) there.
  - See docs/connection.md of this collection for what each task costs on each connection.
options:
  host:
      description: Hostname/IP to connect to.
      default: inventory_hostname
      type: string
      vars:
           - name: inventory_hostname
           - name: ansible_host
           - name: ansible_ssh_host
           - name: delegated_vars['ansible_host']
           - name: delegated_vars['ansible_ssh_host']
  host_key_checking:
      description: Determines if SSH should reject or not a connection after checking host keys.
      default: True
      type: boolean
      ini:
          - section: defaults
            key: 'host_key_checking'
          - section: ssh_connection
            key: 'host_key_checking'
      env:
          - name: ANSIBLE_HOST_KEY_CHECKING
          - name: ANSIBLE_SSH_HOST_KEY_CHECKING
      vars:
          - name: ansible_host_key_checking
          - name: ansible_ssh_host_key_checking
  password:
      description: Authentication password for the O(remote_user). Can be supplied as CLI option.
      type: string
      vars:
          - name: ansible_password
          - name: ansible_ssh_pass
          - name: ansible_ssh_password
  password_mechanism:
      description: Mechanism to use for handling ssh password prompt
      type: string
      default: ssh_askpass
      choices:
          - ssh_askpass
          - sshpass
          - disable
      env:
          - name: ANSIBLE_SSH_PASSWORD_MECHANISM
      ini:
          - {key: password_mechanism, section: ssh_connection}
      vars:
          - name: ansible_ssh_password_mechanism
  sshpass_prompt:
      description:
          - Password prompt that C(sshpass)/C(SSH_ASKPASS) should search for.
          - Supported by sshpass 1.06 and up when O(password_mechanism) set to V(sshpass).
          - Defaults to C(Enter PIN for) when pkcs11_provider is set.
          - Defaults to C(assword) when O(password_mechanism) set to V(ssh_askpass).
      default: ''
      type: string
      ini:
          - section: 'ssh_connection'
            key: 'sshpass_prompt'
      env:
          - name: ANSIBLE_SSHPASS_PROMPT
      vars:
          - name: ansible_sshpass_prompt
  ssh_args:
      description: Arguments to pass to all SSH CLI tools.
      default: '-C -o ControlMaster=auto -o ControlPersist=60s'
      type: string
      ini:
          - section: 'ssh_connection'
            key: 'ssh_args'
      env:
          - name: ANSIBLE_SSH_ARGS
      vars:
          - name: ansible_ssh_args
  ssh_common_args:
      description: Common extra args for all SSH CLI tools.
      type: string
      ini:
          - section: 'ssh_connection'
            key: 'ssh_common_args'
      env:
          - name: ANSIBLE_SSH_COMMON_ARGS
      vars:
          - name: ansible_ssh_common_args
      cli:
          - name: ssh_common_args
      default: ''
  ssh_executable:
      default: ssh
      description:
        - This defines the location of the SSH binary. It defaults to V(ssh) which will use the first SSH binary
          available in $PATH.
        - This option is usually not required, it might be useful when access to system SSH is restricted,
          or when using SSH wrappers to connect to remote hosts.
      type: string
      env: [{name: ANSIBLE_SSH_EXECUTABLE}]
      ini:
      - {key: ssh_executable, section: ssh_connection}
      #const: ANSIBLE_SSH_EXECUTABLE
      vars:
          - name: ansible_ssh_executable
  sftp_executable:
      default: sftp
      description:
        - This defines the location of the sftp binary. It defaults to V(sftp) which will use the first binary
          available in $PATH.
      type: string
      env: [{name: ANSIBLE_SFTP_EXECUTABLE}]
      ini:
      - {key: sftp_executable, section: ssh_connection}
      vars:
          - name: ansible_sftp_executable
  scp_executable:
      default: scp
      description:
        - This defines the location of the scp binary. It defaults to V(scp) which will use the first binary available
          in $PATH.
      type: string
      env: [{name: ANSIBLE_SCP_EXECUTABLE}]
      ini:
      - {key: scp_executable, section: ssh_connection}
      vars:
          - name: ansible_scp_executable
  scp_extra_args:
      description: Extra exclusive to the C(scp) CLI
      type: string
      vars:
          - name: ansible_scp_extra_args
      env:
        - name: ANSIBLE_SCP_EXTRA_ARGS
      ini:
        - key: scp_extra_args
          section: ssh_connection
      cli:
        - name: scp_extra_args
      default: ''
  sftp_extra_args:
      description: Extra exclusive to the C(sftp) CLI
      type: string
      vars:
          - name: ansible_sftp_extra_args
      env:
        - name: ANSIBLE_SFTP_EXTRA_ARGS
      ini:
        - key: sftp_extra_args
          section: ssh_connection
      cli:
        - name: sftp_extra_args
      default: ''
  ssh_extra_args:
      description: Extra exclusive to the SSH CLI.
      type: string
      vars:
          - name: ansible_ssh_extra_args
      env:
        - name: ANSIBLE_SSH_EXTRA_ARGS
      ini:
        - key: ssh_extra_args
          section: ssh_connection
      cli:
        - name: ssh_extra_args
      default: ''
  reconnection_retries:
      description:
        - Number of attempts to connect.
        - Ansible retries connections only if it gets an SSH error with a return code of 255.
        - Any errors with return codes other than 255 indicate an issue with program execution.
      default: 0
      type: integer
      env:
        - name: ANSIBLE_SSH_RETRIES
      ini:
        - section: connection
          key: retries
        - section: ssh_connection
          key: retries
      vars:
        - name: ansible_ssh_retries
  port:
      description: Remote port to connect to.
      type: int
      ini:
        - section: defaults
          key: remote_port
      env:
        - name: ANSIBLE_REMOTE_PORT
      vars:
        - name: ansible_port
        - name: ansible_ssh_port
      keyword:
        - name: port
  remote_user:
      description:
          - User name with which to login to the remote server, normally set by the remote_user keyword.
          - If no user is supplied, Ansible will let the SSH client binary choose the user as it normally.
      type: string
      ini:
        - section: defaults
          key: remote_user
      env:
        - name: ANSIBLE_REMOTE_USER
      vars:
        - name: ansible_user
        - name: ansible_ssh_user
      cli:
        - name: user
      keyword:
        - name: remote_user
  pipelining:
      env:
        - name: ANSIBLE_PIPELINING
        - name: ANSIBLE_SSH_PIPELINING
      ini:
        - section: defaults
          key: pipelining
        - section: connection
          key: pipelining
        - section: ssh_connection
          key: pipelining
      vars:
        - name: ansible_pipelining
        - name: ansible_ssh_pipelining
  private_key_file:
      description:
          - Path to private key file to use for authentication.
      type: string
      ini:
        - section: defaults
          key: private_key_file
      env:
        - name: ANSIBLE_PRIVATE_KEY_FILE
      vars:
        - name: ansible_private_key_file
        - name: ansible_ssh_private_key_file
      cli:
        - name: private_key_file
          option: '--private-key'
  private_key:
      description:
        - Private key contents in PEM format. Requires the C(SSH_AGENT) configuration to be enabled.
      type: string
      env:
        - name: ANSIBLE_PRIVATE_KEY
      vars:
        - name: ansible_private_key
        - name: ansible_ssh_private_key
  private_key_passphrase:
      description:
        - Private key passphrase, dependent on O(private_key).
        - This does NOT have any effect when used with O(private_key_file).
      type: string
      env:
        - name: ANSIBLE_PRIVATE_KEY_PASSPHRASE
      vars:
        - name: ansible_private_key_passphrase
        - name: ansible_ssh_private_key_passphrase
  control_path:
    description:
      - This is the location to save SSH's ControlPath sockets, it uses SSH's variable substitution.
      - Since 2.3, if null (default), ansible will generate a unique hash. Use ``%(directory)s`` to indicate where to
        use the control dir path setting.
      - Before 2.3 it defaulted to ``control_path=%(directory)s/ansible-ssh-%%h-%%p-%%r``.
      - Be aware that this setting is ignored if C(-o ControlPath) is set in ssh args.
    type: string
    env:
      - name: ANSIBLE_SSH_CONTROL_PATH
    ini:
      - key: control_path
        section: ssh_connection
    vars:
      - name: ansible_control_path
  control_path_dir:
    default: ~/.ansible/cp
    description:
      - This sets the directory to use for ssh control path if the control path setting is null.
      - Also, provides the ``%(directory)s`` variable for the control path setting.
    type: string
    env:
      - name: ANSIBLE_SSH_CONTROL_PATH_DIR
    ini:
      - section: ssh_connection
        key: control_path_dir
    vars:
      - name: ansible_control_path_dir
  sftp_batch_mode:
    default: true
    description:
      - When set to C(True), sftp will be run in batch mode, allowing detection of transfer errors.
      - When set to C(False), sftp will not be run in batch mode, preventing detection of transfer errors.
    env: [{name: ANSIBLE_SFTP_BATCH_MODE}]
    ini:
    - {key: sftp_batch_mode, section: ssh_connection}
    type: bool
    vars:
      - name: ansible_sftp_batch_mode
  ssh_transfer_method:
    description: Preferred method to use when transferring files over ssh
    choices:
          sftp: This is the most reliable way to copy things with SSH.
          scp: Deprecated in OpenSSH. For OpenSSH >=9.0 you must add an additional option to enable scp
            C(scp_extra_args="-O").
          piped: Creates an SSH pipe with C(dd) on either side to copy the data.
          smart: Tries each method in order (sftp > scp > piped), until one succeeds or they all fail.
    default: smart
    type: string
    env: [{name: ANSIBLE_SSH_TRANSFER_METHOD}]
    ini:
        - {key: transfer_method, section: ssh_connection}
    vars:
        - name: ansible_ssh_transfer_method
  use_tty:
    default: false
    description:
      - add -tt to ssh commands to force tty allocation.
      - V(false) by default here (C(ansible.builtin.ssh) has V(true)), as C(pct_pipelined) runs its modules; with a
        PTY, C(pct)'s own message (for example C(container '202' not running!)) would come on the standard output
        and the UNREACHABLE message would not show it. A container whose sudoers says C(requiretty) takes V(true).
    env: [{name: ANSIBLE_SSH_USETTY}]
    ini:
    - {key: usetty, section: ssh_connection}
    type: bool
    vars:
      - name: ansible_ssh_use_tty
  timeout:
    default: 10
    description:
        - This is the default amount of time we will wait while establishing an SSH connection.
        - It also controls how long we can wait to access reading the connection once established (select on the
          socket).
    env:
        - name: ANSIBLE_TIMEOUT
        - name: ANSIBLE_SSH_TIMEOUT
    ini:
        - key: timeout
          section: defaults
        - key: timeout
          section: ssh_connection
    vars:
      - name: ansible_ssh_timeout
    cli:
      - name: timeout
    type: integer
  pkcs11_provider:
    default: ""
    type: string
    description:
      - "PKCS11 SmartCard provider such as opensc, example: /usr/local/lib/opensc-pkcs11.so"
    env: [{name: ANSIBLE_PKCS11_PROVIDER}]
    ini:
      - {key: pkcs11_provider, section: ssh_connection}
    vars:
      - name: ansible_ssh_pkcs11_provider
  verbosity:
    default: 0
    type: int
    description:
      - Requested verbosity level for the SSH CLI.
    env: [{name: ANSIBLE_SSH_VERBOSITY}]
    ini:
      - {key: verbosity, section: ssh_connection}
    vars:
      - name: ansible_ssh_verbosity
"""

EXAMPLES = r"""
# inventory group_vars of the containers: the Proxmox host's address, port and user, and the container's id
ansible_connection: gpufleet.sglang.pct_ssh
ansible_host: "{{ hostvars[proxmox_host].ansible_host }}"
ansible_port: "{{ hostvars[proxmox_host].ansible_port | default(22) }}"
ansible_user: root
proxmox_vmid: 101
"""

from ansible.errors import AnsibleError
from ansible.plugins.connection.ssh import Connection as SshConnection
from ansible.utils.display import Display

from ansible_collections.gpufleet.sglang.plugins.plugin_utils.pct import pct_exec_line

display = Display()
# what a host shell says when it has no pct (sh: "pct: not found", bash: "No such file or directory")
PCT_MISSING_RC = 127


class Connection(SshConnection):
    """ansible.builtin.ssh whose every command runs in the container through ``pct exec`` on the host."""

    transport = "gpufleet.sglang.pct_ssh"

    def _pct_line(self, cmd: str) -> str:
        host = self.get_option("host") or self._play_context.remote_addr
        return pct_exec_line(
            cmd,
            self.get_option("vmid"),
            self.get_option("remote_user"),
            self.get_option("proxmox_become_method"),
            host,
        )

    def exec_command(self, cmd: str, in_data: bytes | None = None, sudoable: bool = True) -> tuple[int, bytes, bytes]:
        """Run ``cmd`` in the container: ssh's own run (control master, pipelined input, become prompts) of
        ``pct exec <vmid> -- <cmd>`` on the Proxmox host."""
        line = self._pct_line(cmd)
        display.vvv(f"PCT EXEC {line}", host=self.get_option("host"))
        returncode, stdout, stderr = super().exec_command(line, in_data=in_data, sudoable=sudoable)
        if returncode == PCT_MISSING_RC and b"pct" in stderr and (b"not found" in stderr or b"No such file" in stderr):
            raise AnsibleError(f"pct not found on the Proxmox host {self.get_option('host')}: is it a Proxmox VE host?")
        return returncode, stdout, stderr

    def _in_container(self, script: str, in_data: bytes | None, what: str) -> bytes:
        """Run ``script`` with the container's shell, no PTY (binary-safe streams); its stdout, else AnsibleError."""
        cmd = f"{self._shell.executable} -c {self._shell.quote(script)}"
        returncode, stdout, stderr = self.exec_command(cmd, in_data=in_data, sudoable=False)
        if returncode != 0:
            detail = stderr.decode("utf-8", "replace").strip() or f"exit status {returncode}"
            raise AnsibleError(f"{what} in container {self.get_option('vmid')} failed: {detail}")
        return stdout

    def put_file(self, in_path: str, out_path: str) -> None:  # type: ignore[override]
        """Copy ``in_path`` here to ``out_path`` in the container (``cat`` there, fed on its standard input)."""
        display.vvv(f"PUT {in_path} TO {out_path}", host=self.get_option("host"))
        with open(in_path, "rb") as fh:
            data = fh.read()
        self._in_container(f"cat > {self._shell.quote(out_path)}", data, f"writing {out_path}")

    def fetch_file(self, in_path: str, out_path: str) -> None:  # type: ignore[override]
        """Copy ``in_path`` in the container to ``out_path`` here (``cat`` there, read from its standard output)."""
        display.vvv(f"FETCH {in_path} TO {out_path}", host=self.get_option("host"))
        data = self._in_container(f"cat {self._shell.quote(in_path)}", None, f"reading {in_path}")
        with open(out_path, "wb") as fh:
            fh.write(data)
