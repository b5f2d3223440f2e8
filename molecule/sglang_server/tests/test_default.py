"""sglang_server on a systemd host running the SGLang stand-in: unit argv, user, env, modes, /server_info."""

from __future__ import annotations

import json
import os

import pytest
import testinfra.utils.ansible_runner

testinfra_hosts = testinfra.utils.ansible_runner.AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"]).get_hosts("all")

UNIT = "/etc/systemd/system/sglang-server.service"


@pytest.fixture
def journal(host):
    return host.run("journalctl -u sglang-server -n 50 --no-pager").stdout


def test_service_running(host, journal):
    service = host.service("sglang-server")
    assert service.is_running, journal
    assert service.is_enabled


def test_unit_argv(host):
    exec_start = host.run("systemctl show -p ExecStart --value sglang-server").stdout
    for word in [
        "/srv/gpufleet-standins/sglang_api.py",
        "--model-path /models/GLM-5-NVFP4",
        "--tp-size 8",
        "--quantization modelopt_fp4",
        "--moe-runner-backend flashinfer_cutlass",
        "--attention-backend triton",
        "--max-running-requests 2048",
        "--disable-shared-experts-fusion",
        "--cuda-graph-backend-decode disabled",
        "--cuda-graph-backend-prefill disabled",
        "--enable-metrics",
        "--api-key ${SGLANG_SERVER_API_KEY}",
    ]:
        assert word in exec_start
    assert "--disable-cuda-graph" not in exec_start
    assert "molecule-secret-key" not in host.file(UNIT).content_string


def test_process_user_and_env(host):
    pid = host.run("systemctl show -p MainPID --value sglang-server").stdout.strip()
    assert host.run(f"stat -c %U /proc/{pid}").stdout.strip() == "sglang"
    files = host.run("systemctl show -p EnvironmentFiles --value sglang-server").stdout
    assert "/etc/sglang/sglang-server.env" in files
    assert "/etc/sglang/sglang-server.secrets.env" in files
    env = dict(
        line.split("=", 1)
        for line in host.file("/etc/sglang/sglang-server.env").content_string.splitlines()
        if "=" in line and not line.startswith("#")
    )
    assert env["SGLANG_CACHE_DIR"] == "/var/cache/sglang"
    assert env["NCCL_P2P_LEVEL"] == "SYS"
    assert env["NCCL_IB_DISABLE"] == "1"
    assert "video" in host.user("sglang").groups


def test_file_modes(host):
    secrets = host.file("/etc/sglang/sglang-server.secrets.env")
    assert secrets.mode == 0o600
    assert secrets.user == "root"
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
    assert info["attention_backend"] == "triton"
    assert info["moe_runner_backend"] == "flashinfer_cutlass"
    assert info["cuda_graph_backend_decode"] == "disabled"
    assert info["version"] == "0.5.23"


def test_api_key_enforced(host):
    assert get(host, "/server_info").rc != 0
    assert get(host, "/health_generate").rc == 0
