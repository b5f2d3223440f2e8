# Copyright (c) gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""STAND-IN for a network that breaks mid-rollout (molecule/fleet drills only; not part of the collection).

What it stands in for: the SSH connection to a node dropping (a switch port down, a host that
froze) in the middle of a rolling upgrade. Ansible's SSH connection then raises
AnsibleConnectionFailure and the host is UNREACHABLE; this connection does exactly that.

How: the containers.podman.podman connection, unchanged until the file ``cut_when`` exists
inside the container; from then on every use of the connection raises AnsibleConnectionFailure.
The drill points ``cut_when`` at the node's out-of-rotation mark on the gateway host, so the
connection breaks right after the node was taken out of the gateway and drained (the gateway
calls are delegated to the gateway host and do not use this connection).
"""

from __future__ import annotations

DOCUMENTATION = """
    name: flaky_podman
    short_description: podman connection that breaks once a file exists in the container (test stand-in)
    description:
        - The containers.podman.podman connection; once O(cut_when) exists inside the container,
          every call raises AnsibleConnectionFailure (the host becomes UNREACHABLE).
    options:
      remote_addr:
        description: The container.
        default: inventory_hostname
        vars:
          - name: ansible_host
          - name: inventory_hostname
          - name: ansible_podman_host
      remote_user:
        description: User in the container.
        vars:
          - name: ansible_user
      podman_extra_args:
        description: Extra podman arguments.
        default: ''
        vars:
          - name: ansible_podman_extra_args
      podman_executable:
        description: The podman executable.
        default: podman
        vars:
          - name: ansible_podman_executable
      cut_when:
        description: Path inside the container; once it exists the connection is broken.
        default: ''
        vars:
          - name: flaky_podman_cut_when
"""

from ansible.errors import AnsibleConnectionFailure
from ansible_collections.containers.podman.plugins.connection.podman import Connection as PodmanConnection


class Connection(PodmanConnection):
    transport = "flaky_podman"

    def _check_cut(self) -> None:
        path = self.get_option("cut_when")
        if not path:
            return
        rc, _out, _err = self._podman("exec", ["test", "-e", path])
        if rc == 0:
            raise AnsibleConnectionFailure(
                f"flaky_podman (test stand-in for a broken network): connection to {self.get_option('remote_addr')}"
                f" cut ({path} exists): no route to host"
            )

    def exec_command(self, cmd, in_data=None, sudoable=False):
        self._check_cut()
        return super().exec_command(cmd, in_data=in_data, sudoable=sudoable)

    def put_file(self, in_path, out_path):
        self._check_cut()
        return super().put_file(in_path, out_path)

    def fetch_file(self, in_path, out_path):
        self._check_cut()
        return super().fetch_file(in_path, out_path)
