"""sglang_server on a systemd host running the SGLang stand-in: unit argv, user, env, modes, /server_info."""

from __future__ import annotations

import base64
import json
import os

import pytest
import testinfra.utils.ansible_runner

# through testinfra's podman backend (one `podman exec` per command), not one Ansible run per command
testinfra_hosts = [
    f"podman://{name}"
    for name in testinfra.utils.ansible_runner.AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"]).get_hosts("all")
]

UNIT = "/etc/systemd/system/sglang-server.service"
CONFIG = "/etc/sglang/sglang-server.yaml"
REDACTOR = "/usr/local/lib/gpufleet-sglang/sglang_log_redact.py"


@pytest.fixture
def journal(host):
    return host.run("journalctl -u sglang-server -n 50 --no-pager").stdout


def test_service_running(host, journal):
    service = host.service("sglang-server")
    assert service.is_running, journal
    assert service.is_enabled


def main_pid(host) -> str:
    pid = host.run("systemctl show -p MainPID --value sglang-server").stdout.strip()
    assert int(pid) > 0
    return pid


def test_argv_is_launcher_and_config_only(host):
    """Issue 10: /proc/<pid>/cmdline (what any local user reads) holds no option and no key."""
    cmdline = host.file(f"/proc/{main_pid(host)}/cmdline").content_string.split("\0")
    assert [word for word in cmdline if word] == [
        "/usr/bin/python3",
        "/srv/gpufleet-standins/sglang_api.py",
        "--config",
        CONFIG,
    ]
    assert "molecule-secret-key" not in host.file(f"/proc/{main_pid(host)}/cmdline").content_string
    assert "molecule-secret-key" not in host.file(UNIT).content_string
    assert "molecule-secret-key" not in host.run("ps -eo args").stdout


def test_journal_holds_the_argument_dump_without_the_key(host):
    """Issue 22: the stand-in logs SGLang 0.5.23's start-up line server_args={... 'api_key': ...} as
    SGLang does; the unit's redactor blanks the key before it reaches the journal."""
    journal = host.run("journalctl -u sglang-server --no-pager -o cat").stdout
    dumps = [line for line in journal.splitlines() if "server_args={" in line]
    assert dumps, journal[-2000:]
    assert all("'api_key': '********'" in line for line in dumps), dumps[-1]
    assert "molecule-secret-key" not in journal
    assert "molecule-secret-key" not in host.run("journalctl --no-pager -o cat").stdout


def test_redactor_keeps_the_main_pid_and_leaves_the_server_tree(host):
    """The server is the unit's main PID (signals from systemd reach it directly); the redactor is
    no descendant of it (SGLang kills its own process tree at shutdown) and runs as the service user."""
    pid = main_pid(host)
    # anchored at the start of the command line: `sh -c 'pgrep -f NAME'` would match its own shell
    redactors = host.run(f"pgrep -f '^/usr/bin/python3 {REDACTOR} '").stdout.split()
    assert len(redactors) == 1, redactors
    stat = host.file(f"/proc/{redactors[0]}/stat").content_string
    assert stat.rsplit(")", 1)[1].split()[1] != pid
    assert host.run(f"stat -c %U /proc/{redactors[0]}").stdout.strip() == "sglang"
    cgroup = host.file(f"/proc/{redactors[0]}/cgroup").content_string
    assert "sglang-server.service" in cgroup


def test_unit_is_ordered_after_the_nvidia_units(host):
    """Issue 22: /dev/nvidia-uvm exists before the server starts. The units are absent in this
    container, and the server runs all the same: Wants=, not Requires=."""
    props = host.run("systemctl show -p After,Wants,Requires sglang-server").stdout
    got = dict(line.split("=", 1) for line in props.splitlines() if "=" in line)
    assert "nvidia-uvm-init.service" in got["After"].split()
    assert "nvidia-persistenced.service" in got["After"].split()
    assert "nvidia-uvm-init.service" in got["Wants"].split()
    assert "nvidia" not in got["Requires"]


def test_syscall_filter_allows_pidfd_getfd(host):
    """Issue 22: CUDA IPC with expandable segments takes the exporter's fd with pidfd_getfd (@debug)."""
    allowed = host.run("systemctl show -p SystemCallFilter --value sglang-server").stdout.split()
    assert "pidfd_getfd" in allowed
    assert "ioctl" in allowed


def test_options_file(host):
    config = host.file(CONFIG)
    assert config.mode == 0o600
    assert config.user == "sglang"
    options = json.loads(config.content_string)
    assert options == {
        "model-path": "/models/GLM-5-NVFP4",
        "host": "127.0.0.1",
        "port": "30000",
        "tp-size": "8",
        "quantization": "modelopt_fp4",
        "moe-runner-backend": "flashinfer_cutlass",
        "attention-backend": "flashinfer",
        "kv-cache-dtype": "bf16",
        "max-running-requests": "64",
        "disable-shared-experts-fusion": True,
        "reasoning-parser": "glm45",
        "tool-call-parser": "glm47",
        # the profile's fast_load on 0.5.23 (docs/sglang-versions-and-flags.md, "Loading the checkpoint")
        "model-loader-extra-config": '{"enable_multithread_load":true}',
        "enable-metrics": True,
        "api-key": "molecule-secret-key",
    }


def test_process_user_and_env(host):
    pid = host.run("systemctl show -p MainPID --value sglang-server").stdout.strip()
    assert host.run(f"stat -c %U /proc/{pid}").stdout.strip() == "sglang"
    files = host.run("systemctl show -p EnvironmentFiles --value sglang-server").stdout
    assert "/etc/sglang/sglang-server.env" in files
    assert "/etc/sglang/sglang-server.secrets.env" in files
    # what the process got, read back from the kernel: quoting in the env files is exact
    environ = host.file(f"/proc/{pid}/environ").content_string.split("\0")
    env = dict(item.split("=", 1) for item in environ if "=" in item)
    assert env["SGLANG_CACHE_DIR"] == "/var/cache/sglang"
    # the JIT caches at fixed paths under it, the same on every node (docs/warm-start.md)
    assert env["TRITON_CACHE_DIR"] == "/var/cache/sglang/triton"
    assert env["TORCHINDUCTOR_CACHE_DIR"] == "/var/cache/sglang/inductor"
    assert env["FLASHINFER_WORKSPACE_BASE"] == "/var/cache/sglang"
    assert env["HOME"] == "/var/lib/sglang"
    assert env["NCCL_P2P_LEVEL"] == "SYS"
    assert env["NCCL_IB_DISABLE"] == "1"
    assert env["STANDIN_STARTUP_DELAY_S"] == "3"
    assert env["GPUFLEET_QUOTING_PROBE"] == 'a "b" $HOME `id` \\ #c'
    assert "SGLANG_SERVER_API_KEY" not in env
    assert "video" in host.user("sglang").groups


def test_file_modes(host):
    secrets = host.file("/etc/sglang/sglang-server.secrets.env")
    assert secrets.mode == 0o600
    assert secrets.user == "root"
    assert 'GPUFLEET_QUOTING_PROBE="a \\"b\\" \\$HOME \\`id\\` \\\\ #c"' in secrets.content_string
    env = host.file("/etc/sglang/sglang-server.env")
    assert env.mode == 0o644
    assert "STANDIN" not in env.content_string
    assert host.file(CONFIG).mode == 0o600
    cache = host.file("/var/cache/sglang")
    assert cache.is_directory
    assert cache.user == "sglang"
    assert cache.mode == 0o750
    assert host.file(UNIT).mode == 0o644


def get(host, path: str, key: str | None = None):
    header = f", headers={{'Authorization': 'Bearer {key}'}}" if key else ""
    script = f"import urllib.request as u; print(u.urlopen(u.Request('http://127.0.0.1:30000{path}'{header})).read().decode())"
    return host.run(f'python3 -c "{script}"')


def test_server_info_reflects_flags(host):
    result = get(host, "/server_info", "molecule-secret-key")
    assert result.rc == 0, result.stderr
    info = json.loads(result.stdout)
    assert info["tp_size"] in (8, "8")
    assert info["attention_backend"] == "flashinfer"
    assert info["moe_runner_backend"] == "flashinfer_cutlass"
    assert info["kv_cache_dtype"] == "bf16"
    assert info.get("cuda_graph_backend_decode") != "disabled"  # the GLM-5 run keeps CUDA graphs
    assert info["version"] == "0.5.23"


def test_api_key_enforced(host):
    assert get(host, "/server_info").rc != 0
    assert get(host, "/health_generate").rc == 0


SANDBOX = {
    "NoNewPrivileges": "yes",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "ProtectKernelTunables": "yes",
    "ProtectKernelModules": "yes",
    "ProtectKernelLogs": "yes",
    "ProtectControlGroups": "yes",
    "RestrictSUIDSGID": "yes",
    "LockPersonality": "yes",
    "RestrictNamespaces": "yes",
    "DevicePolicy": "closed",
}
# Directive names stripped from the deployed unit to get the unit as it was before the sandbox.
SANDBOX_KEYS = [
    "NoNewPrivileges",
    "CapabilityBoundingSet",
    "AmbientCapabilities",
    "ProtectSystem",
    "ReadWritePaths",
    "ProtectHome",
    "PrivateTmp",
    "ProtectKernelTunables",
    "ProtectKernelModules",
    "ProtectKernelLogs",
    "ProtectControlGroups",
    "ProtectClock",
    "ProtectHostname",
    "ProtectProc",
    "RestrictSUIDSGID",
    "RestrictRealtime",
    "LockPersonality",
    "RestrictNamespaces",
    "KeyringMode",
    "UMask",
    "SystemCallArchitectures",
    "SystemCallFilter",
    "SystemCallErrorNumber",
    "RestrictAddressFamilies",
    "DevicePolicy",
    "DeviceAllow",
]


def test_sandbox_properties(host):
    props = host.run(f"systemctl show -p {','.join(SANDBOX)} sglang-server").stdout
    got = dict(line.split("=", 1) for line in props.splitlines() if "=" in line)
    assert got == SANDBOX
    allow = host.run("systemctl show -p DeviceAllow --value sglang-server").stdout
    for device in ("char-nvidia rw", "char-nvidiactl rw", "char-nvidia-uvm rw", "char-nvidia-caps r"):
        assert device in allow
    paths = host.run("systemctl show -p ReadWritePaths --value sglang-server").stdout.split()
    assert sorted(paths) == ["/var/cache/sglang", "/var/lib/sglang"]


def test_sandbox_is_enforced(host):
    """The service's own mounts (/proc/<pid>/mountinfo): / read-only, /home hidden, a private /tmp,
    cache and home writable. (nsenter into the namespace needs CAP_SYS_PTRACE, which the test host lacks.)"""
    mounts = {}
    for line in host.file(f"/proc/{main_pid(host)}/mountinfo").content_string.splitlines():
        fields = line.split()
        mounts[fields[4]] = {"root": fields[3], "options": fields[5].split(",")}  # the last mount wins
    assert "ro" in mounts["/"]["options"]
    assert "inaccessible" in mounts["/home"]["root"]
    assert "systemd-private-" in mounts["/tmp"]["root"]
    assert "sglang-server.service" in mounts["/tmp"]["root"]
    for path in ("/var/cache/sglang", "/var/lib/sglang"):
        assert "rw" in mounts[path]["options"], path
    # writable: only the API file systems, the private /tmp and /var/tmp, and ReadWritePaths
    allowed = ("/dev", "/proc", "/sys", "/run", "/tmp", "/var/tmp", "/var/cache/sglang", "/var/lib/sglang")
    writable = [m for m, v in mounts.items() if "rw" in v["options"]]
    assert [m for m in writable if not m.startswith(allowed)] == []


def exposure(host, unit_path: str) -> float:
    out = host.run(f"systemd-analyze security --offline=yes --no-pager {unit_path}")
    assert out.rc in (0, 1), out.stderr
    line = next(line for line in out.stdout.splitlines() if "Overall exposure level" in line)
    return float(line.split(":")[1].split()[0])


def test_exposure_score_before_and_after(host):
    """systemd-analyze security of the unit with and without the sandbox (printed for the report)."""
    unit = host.file(UNIT).content_string
    before_unit = "\n".join(line for line in unit.splitlines() if line.split("=", 1)[0] not in SANDBOX_KEYS)
    tmp = host.run("mktemp -d").stdout.strip()
    try:
        # base64: the unit's text (quotes, apostrophes) passes through Ansible's argument splitting
        encoded = base64.b64encode((before_unit + "\n").encode()).decode()
        host.run(f"echo {encoded} | base64 -d > {tmp}/sglang-server.service")
        before = exposure(host, f"{tmp}/sglang-server.service")
        after = exposure(host, UNIT)
    finally:
        host.run(f"rm -rf {tmp}")
    print(f"\nsystemd-analyze security sglang-server.service: exposure {before} before the sandbox, {after} after")
    assert before >= 9.0
    assert after < 5.0
