"""The .run installer path: userspace everywhere, the kernel module only on the host, no packages."""

from __future__ import annotations

import os

import pytest
import testinfra
import testinfra.utils.ansible_runner

RUNNER = testinfra.utils.ansible_runner.AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"])
WANTED = "580.159.04"


def podman(name: str):
    return testinfra.get_host(f"podman://{name}")


@pytest.mark.parametrize("name", RUNNER.get_hosts("gpu_hosts") + RUNNER.get_hosts("gpu_containers"))
def test_userspace_from_runfile_not_packages(name):
    node = podman(name)
    out = node.check_output("nvidia-smi --query-gpu=driver_version,compute_cap --format=csv,noheader,nounits")
    assert set(out.splitlines()) == {f"{WANTED}, 12.0"}
    assert not node.package("nvidia-driver-cuda").is_installed
    # downloaded and kept where the role put it, after the checksum matched
    assert node.file(f"/var/cache/gpufleet/NVIDIA-Linux-x86_64-{WANTED}.run").exists


@pytest.mark.parametrize("name", RUNNER.get_hosts("gpu_hosts"))
def test_host_runs_persistenced_and_open_module(name):
    node = podman(name)
    unit = node.file("/etc/systemd/system/nvidia-persistenced.service")
    assert unit.contains("^Type=forking$")
    active = node.run("systemctl is-active nvidia-persistenced.service").stdout.strip()
    assert active == "active", node.run("journalctl -u nvidia-persistenced --no-pager -n 30").stdout
    assert "Open Kernel Module" in node.file("/var/lib/gpufleet-standin/proc/driver/nvidia/version").content_string
    # persistenced opened every GPU: all 8 nodes exist
    assert node.check_output("ls /dev | grep -c '^nvidia[0-9]'") == "8"


@pytest.mark.parametrize("name", RUNNER.get_hosts("gpu_containers"))
def test_container_installed_no_kernel_module(name):
    node = podman(name)
    assert not node.file("/etc/systemd/system/nvidia-persistenced.service").exists
    assert not node.file("/etc/systemd/system/nvidia-uvm-init.service").exists
