"""The path a real fleet takes into its GPU containers: community.proxmox.proxmox_pct_remote logs in
to the Proxmox host over SSH (paramiko, host key checked) and runs everything through `pct exec`;
gpufleet.sglang.pct_pipelined does the same with Ansible pipelining, and gpufleet.sglang.pct_ssh with
OpenSSH (ansible.builtin.ssh: ControlPersist, pipelining). The connection tests run with all three
(extra var ansible_connection).

A Podman container stands in for the Proxmox host (tests/harness/pve-standin.sh: sshd, real LXC,
the pct stand-in tests/standins/pct/pct); CT 201 is a real LXC guest on it running systemd, CT 202
exists and is stopped. Ansible runs with its own HOME, so ~/.ssh/known_hosts (the only file
paramiko's host key check reads) is this test's; OpenSSH reads the passwd entry's ~/.ssh instead, so
the inventory points it at $HOME's known_hosts, and its control sockets are under $HOME too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from ansible_collections.community.proxmox.plugins.connection import proxmox_pct_remote

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
BIN = Path(shutil.which("ansible") or REPO / ".venv" / "bin" / "ansible").parent
HARNESS = REPO / "tests" / "harness"
# one Proxmox host stand-in per toolchain: make test runs this file on the default toolchain (stage
# integration-other, Python 3.11) and on the newest (stage newest, Python 3.13), maybe at once
NAME, PORT = ("pct-conn-pve", 2223) if sys.version_info < (3, 12) else ("pct-conn-pve-newest", 2225)
ROOTFS = REPO / ".cache" / "lxc" / "debian12-rootfs.tar"

GUEST = r"""
set -eu
make_ct() {  # vmid: an LXC container named by its vmid, as pve-container names them
  mkdir -p /var/lib/lxc/$1/rootfs
  [ -f /var/lib/lxc/$1/rootfs/etc/os-release ] || tar -xpf /srv/lxc/debian12-rootfs.tar -C /var/lib/lxc/$1/rootfs
  echo ct$1 > /var/lib/lxc/$1/rootfs/etc/hostname  # pve-container writes the guest's /etc/hostname too
  printf '%s\n' 'lxc.include = /usr/share/lxc/config/common.conf' 'lxc.arch = linux64' \
    "lxc.uts.name = ct$1" "lxc.rootfs.path = dir:/var/lib/lxc/$1/rootfs" 'lxc.net.0.type = empty' \
    > /var/lib/lxc/$1/config
}
make_ct 201
make_ct 202
[ "$(lxc-info -n 201 -sH)" = RUNNING ] || lxc-start -n 201
lxc-wait -n 201 -s RUNNING -t 30
"""


def run(*args: str | Path, env: dict[str, str] | None = None, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, env=env, cwd=REPO, timeout=timeout, check=False
    )


def must(*args: str | Path, timeout: int = 600) -> str:
    done = run(*args, timeout=timeout)
    assert done.returncode == 0, f"{args}: rc={done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


class Lab:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.state = root / "ssh"
        self.known_hosts = self.home / ".ssh" / "known_hosts"
        self.inventory = root / "hosts.yml"

    def env(self, home: Path | None = None) -> dict[str, str]:
        return {
            **os.environ,
            "HOME": str(home or self.home),
            "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
            "ANSIBLE_FORCE_COLOR": "0",
            "ANSIBLE_TIMEOUT": "10",
        }

    def ansible(self, *args: str, connection: str, home: Path | None = None) -> subprocess.CompletedProcess[str]:
        """``ansible`` with ``connection`` (an extra var, which wins over the inventory's)."""
        return self._run("ansible", connection, *args, home=home)

    def playbook(self, play: Path, connection: str) -> subprocess.CompletedProcess[str]:
        return self._run("ansible-playbook", connection, str(play))

    def _run(
        self, tool: str, connection: str, *args: str, home: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        conn = ["-e", f"ansible_connection={connection}"]
        return run(BIN / tool, "-i", self.inventory, *conn, *args, env=self.env(home), timeout=300)

    def ssh(self, command: str) -> subprocess.CompletedProcess[str]:
        return run(
            "ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
            "-o", f"UserKnownHostsFile={self.known_hosts}", "-i", self.state / "id_ed25519",
            "-p", str(PORT), "root@127.0.0.1", command, timeout=120,
        )  # fmt: skip

    def in_guest(self, *argv: str) -> str:
        return must("podman", "exec", NAME, "lxc-attach", "-n", "201", "--", *argv)


def start_standin(name: str, port: int, state: Path, known_hosts: Path) -> None:
    """The Proxmox host stand-in ``name`` (sshd on 127.0.0.1:``port``, its key in ``state``, its host keys in
    ``known_hosts``) with CT 201 running and CT 202 stopped (GUEST); also benchmarks/pct_connection_bench.py's."""
    must("bash", HARNESS / "build-image.sh", "debian12")
    must("bash", REPO / "extensions" / "molecule" / "proxmox_lxc_gpu" / "files" / "guest-rootfs.sh", REPO)
    must(
        "bash", HARNESS / "pve-standin.sh", "up", name, str(port), state, known_hosts,
        "-v", f"{ROOTFS}:/srv/lxc/debian12-rootfs.tar:ro",
    )  # fmt: skip
    must("podman", "exec", name, "sh", "-c", GUEST, timeout=120)


def stop_standin(name: str, port: int, known_hosts: Path) -> None:
    run("bash", HARNESS / "pve-standin.sh", "down", name, str(port), known_hosts)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    lab = Lab(tmp_path_factory.mktemp("pct"))
    try:
        start_standin(NAME, PORT, lab.state, lab.known_hosts)
        lab.inventory.write_text(
            "all:\n  hosts:\n    ct201:\n      proxmox_vmid: 201\n    ct202:\n      proxmox_vmid: 202\n"
            "  vars:\n    ansible_connection: community.proxmox.proxmox_pct_remote\n"
            f"    ansible_host: 127.0.0.1\n    ansible_port: {PORT}\n    ansible_user: root\n"
            f"    ansible_ssh_private_key_file: {lab.state / 'id_ed25519'}\n"
            # OpenSSH (pct_ssh): the known_hosts of the run's $HOME, as paramiko reads it
            "    ansible_ssh_common_args: -o UserKnownHostsFile={{ lookup('env', 'HOME') }}/.ssh/known_hosts\n",
            encoding="utf-8",
        )
        yield lab
    finally:
        stop_standin(NAME, PORT, lab.known_hosts)


CONNECTIONS = ["community.proxmox.proxmox_pct_remote", "gpufleet.sglang.pct_pipelined", "gpufleet.sglang.pct_ssh"]
by_connection = pytest.mark.parametrize("connection", CONNECTIONS, ids=["pct_remote", "pct_pipelined", "pct_ssh"])


@by_connection
def test_ping_through_pct(lab: Lab, connection: str) -> None:
    done = lab.ansible("ct201", "-m", "ansible.builtin.ping", connection=connection)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "pong" in done.stdout


@by_connection
def test_file_transfer_lands_in_the_guest_and_comes_back(lab: Lab, tmp_path: Path, connection: str) -> None:
    payload = f"line one {connection}\n\u00fcnicode and a 'quote' and $HOME\n" * 200
    src = tmp_path / "payload.txt"
    src.write_text(payload, encoding="utf-8")
    copy = ["-m", "ansible.builtin.copy", "-a", f"src={src} dest=/root/payload.txt mode=0640"]
    copied = lab.ansible("ct201", *copy, connection=connection)
    assert copied.returncode == 0, copied.stdout + copied.stderr
    # in the guest's filesystem, not the Proxmox host's
    assert lab.in_guest("cat", "/root/payload.txt") == payload
    assert lab.in_guest("stat", "-c", "%a %U", "/root/payload.txt").strip() == "640 root"
    assert run("podman", "exec", NAME, "test", "-e", "/root/payload.txt").returncode == 1

    again = lab.ansible("ct201", *copy, connection=connection)
    assert again.returncode == 0
    assert "CHANGED" not in again.stdout, again.stdout

    fetch = ["-m", "ansible.builtin.fetch", "-a", f"src=/root/payload.txt dest={tmp_path}/f/"]
    fetched = lab.ansible("ct201", *fetch, connection=connection)
    assert fetched.returncode == 0, fetched.stdout + fetched.stderr
    assert (tmp_path / "f" / "ct201" / "root" / "payload.txt").read_text(encoding="utf-8") == payload


@by_connection
def test_a_play_with_become_and_systemd_runs_in_the_guest(lab: Lab, tmp_path: Path, connection: str) -> None:
    play = tmp_path / "play.yml"
    play.write_text(
        """
- hosts: ct201
  become: true
  gather_facts: true
  gather_subset: [min]
  tasks:
    - ansible.builtin.copy:
        dest: /etc/systemd/system/gpufleet-probe.service
        content: "[Service]\\nType=oneshot\\nRemainAfterExit=true\\nExecStart=/bin/true\\n"
        mode: "0644"
    - ansible.builtin.systemd_service:
        name: gpufleet-probe.service
        state: started
        daemon_reload: true
    - ansible.builtin.command: systemctl is-active gpufleet-probe.service
      changed_when: false
      register: active
    - ansible.builtin.assert:
        that:
          - ansible_facts.hostname == 'ct201'
          - ansible_facts.service_mgr == 'systemd'
          - active.stdout == 'active'
""",
        encoding="utf-8",
    )
    done = lab.playbook(play, connection)
    assert done.returncode == 0, done.stdout + done.stderr
    assert lab.in_guest("systemctl", "is-active", "gpufleet-probe.service").strip() == "active"


@by_connection
@pytest.mark.parametrize("module", ["ansible.builtin.raw", "ansible.builtin.ping"])
def test_a_stopped_container_fails_with_pcts_message(lab: Lab, connection: str, module: str) -> None:
    # raw shows what the connection returned. ping is a module: pct_pipelined sends it on standard
    # input and reports pct's answer; proxmox_pct_remote fails earlier, making its temporary
    # directory, and says only that (the host is UNREACHABLE, pct's message is not shown). pct exits 255,
    # which OpenSSH also uses for its own failures: through pct_ssh the host is UNREACHABLE with pct's message
    args = ["-a", "true"] if module.endswith("raw") else []
    done = lab.ansible("ct202", "-m", module, *args, connection=connection)
    assert done.returncode != 0
    if module.endswith("ping") and connection.endswith("pct_remote"):
        assert "Failed to create temporary directory" in done.stdout + done.stderr, done.stdout
    else:
        assert "container '202' not running!" in done.stdout + done.stderr, done.stdout
    if connection.endswith("pct_ssh"):
        assert "ct202 | UNREACHABLE!" in done.stdout, done.stdout


# community.proxmox 2.0.0 (in ansible 14.5.0) calls a helper it does not define for any login error but a
# bad host key or a refused login (its issue 477): its own connection then fails the task with an
# AttributeError instead of leaving the host UNREACHABLE. pct_pipelined defines the helper.
PARENT_LACKS_HELPER = hasattr(proxmox_pct_remote.Connection, "_paramiko_connect_ssh") and not hasattr(
    proxmox_pct_remote.Connection, "_raise_paramiko_connect_exception"
)


@by_connection
@pytest.mark.parametrize("mismatch", [False, True], ids=["unknown-host-key", "changed-host-key"])
def test_host_keys_are_checked(lab: Lab, tmp_path: Path, mismatch: bool, connection: str) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    if mismatch:
        must("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", tmp_path / "other")
        key = (tmp_path / "other.pub").read_text(encoding="utf-8").split()[:2]
        (home / ".ssh" / "known_hosts").write_text(f"[127.0.0.1]:{PORT} {' '.join(key)}\n", encoding="utf-8")
    done = lab.ansible("ct201", "-m", "ansible.builtin.ping", home=home, connection=connection)
    out = done.stdout + done.stderr
    assert done.returncode != 0
    assert "pong" not in done.stdout
    if not mismatch and connection.endswith("pct_remote") and PARENT_LACKS_HELPER:
        assert "'Connection' object has no attribute '_raise_paramiko_connect_exception'" in out, out
        return
    if connection.endswith("pct_ssh"):
        assert "Host key verification failed" in out, out
        assert ("REMOTE HOST IDENTIFICATION HAS CHANGED" in out) == mismatch, out
    else:
        assert ("host key mismatch" if mismatch else "stdin is not interactive") in out
    assert "ct201 | UNREACHABLE!" in out, out


def test_pct_subcommands_and_exit_codes(lab: Lab) -> None:
    assert lab.ssh("pct exec 201 -- sh -c 'echo out; echo err >&2; exit 7'").returncode == 7
    assert lab.ssh("pct exec 201 -- hostname").stdout == "ct201\n"
    assert lab.ssh("pct status 201").stdout == "status: running\n"
    assert lab.ssh("pct status 202").stdout == "status: stopped\n"
    listing = lab.ssh("pct list").stdout.splitlines()
    assert listing[0].split() == ["VMID", "Status", "Lock", "Name"]
    assert [line.split() for line in listing[1:]] == [["201", "running", "ct201"], ["202", "stopped", "ct202"]]
    assert "lxc.uts.name: ct201" in lab.ssh("pct config 201").stdout

    for command, message in [
        ("pct exec 999 -- true", f"Configuration file 'nodes/{NAME}/lxc/999.conf' does not exist"),
        ("pct exec 202 -- true", "container '202' not running!"),
        ("pct exec 201", "missing command"),
        ("pct status 12", "vmid: invalid format"),
        ("pct push 202 /etc/hostname /root/h", "can only push files to a running CT"),
        ("pct start 201", "CT 201 already running"),
        ("pct frobnicate 201", "unknown command 'pct frobnicate'"),
    ]:
        done = lab.ssh(command)
        assert (done.returncode, message in done.stderr) == (255, True), f"{command}: {done}"

    pushed = lab.ssh("echo pushed > /tmp/p && pct push 201 /tmp/p /root/pushed --perms 600 --user nobody")
    assert pushed.returncode == 0, pushed.stderr
    assert lab.in_guest("stat", "-c", "%a %U", "/root/pushed").strip() == "600 nobody"
    pulled = lab.ssh("pct pull 201 /root/pushed /tmp/pulled --perms 0640 && stat -c %a /tmp/pulled && cat /tmp/pulled")
    assert pulled.stdout == "640\npushed\n", pulled.stderr


def test_the_reference_inventory_fails_only_for_unreachable_addresses() -> None:
    """`ansible -i inventories/lab all -m ping` as shipped: the documentation addresses (TEST-NET)
    are unreachable; nothing may fail for a missing library or a bad inventory."""
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_TIMEOUT": "3",
        "ANSIBLE_FORCE_COLOR": "0",
    }
    done = run(BIN / "ansible", "-i", REPO / "inventories" / "lab", "all", "-m", "ansible.builtin.ping", env=env)
    out = done.stdout + done.stderr
    assert done.returncode == 4, out  # 4: some hosts unreachable
    assert "pve1 | UNREACHABLE!" in out
    assert "sglang-01 | UNREACHABLE!" in out
    assert "192.0.2.10" in out
    for wrong in ("paramiko is not installed", "FAILED!", "ERROR!", "Could not match supplied host pattern"):
        assert wrong not in out, out
