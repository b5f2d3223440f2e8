"""Assertions on the converged hosts: exact pinned versions, holds, services, device nodes.

The hosts are Podman containers, so the checks talk to them through testinfra's podman
backend (one `podman exec` per command) rather than one Ansible run per command.
"""

from __future__ import annotations

import json
import os

import pytest
import testinfra
import testinfra.utils.ansible_runner

RUNNER = testinfra.utils.ansible_runner.AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"])
GPU_HOSTS = RUNNER.get_hosts("gpu_hosts")
GPU_CONTAINERS = RUNNER.get_hosts("gpu_containers")
WANTED = "580.159.04"
HOST_PACKAGES = ("nvidia-kernel-open-dkms", "nvidia-driver-cuda", "libcuda1", "nvidia-persistenced", "nvidia-modprobe")
CONTAINER_PACKAGES = ("nvidia-driver-cuda", "libcuda1")


def podman(name: str):
    return testinfra.get_host(f"podman://{name}")


@pytest.fixture(params=GPU_HOSTS)
def gpu_host(request):
    return podman(request.param)


@pytest.fixture(params=GPU_CONTAINERS)
def gpu_container(request):
    return podman(request.param)


def journal(node, unit: str) -> str:
    return node.run(f"journalctl -u {unit} --no-pager -n 30").stdout


def test_inventory_has_both_modes():
    assert len(GPU_HOSTS) == 2
    assert len(GPU_CONTAINERS) == 1


def status(node, package: str) -> str:
    return node.run(f"dpkg-query -W -f='${{Version}} ${{Status}}' {package}").stdout


def assert_pinned(node, packages) -> None:
    for name in packages:
        assert status(node, name) == f"{WANTED}-1 hold ok installed", name
    # the stand-in repository also carries 590.44.01: only the pin keeps apt on 580
    policy = node.check_output("apt-cache policy nvidia-driver-cuda")
    assert "590.44.01-1" in policy
    assert f"Candidate: {WANTED}-1" in policy, policy


@pytest.mark.parametrize("name", GPU_HOSTS + GPU_CONTAINERS)
def test_nvidia_pinning_package_pins_instead_of_our_file(name):
    node = podman(name)
    # NVIDIA's version-locking package for the exact version, installed before the driver
    assert status(node, f"nvidia-driver-pinning-{WANTED}") == f"{WANTED}-1 install ok installed"
    assert not node.file("/etc/apt/preferences.d/gpufleet-nvidia-driver.pref").exists
    assert "Pin-Priority: 1000" in node.check_output(f"cat /etc/apt/preferences.d/nvidia-driver-pinning-{WANTED}.pref")


@pytest.mark.parametrize("name", GPU_HOSTS + GPU_CONTAINERS)
def test_cuda_keyring_files_are_the_packages_own(name):
    node = podman(name)
    distro = "debian" + node.check_output(". /etc/os-release && echo $VERSION_ID")
    package_list = f"/etc/apt/sources.list.d/cuda-{distro}-x86_64.list"
    # nothing cuda-keyring installed was written over (dpkg checks every file's checksum)
    verify = node.run("dpkg --verify cuda-keyring")
    assert (verify.rc, verify.stdout) == (0, ""), verify.stdout
    # a mirror is in use: the package's list (NVIDIA's URL) is diverted aside, not edited
    assert node.check_output(f"dpkg-divert --truename {package_list}") == f"{package_list}.disabled"
    assert not node.file(package_list).exists
    assert (
        "https://developer.download.nvidia.com/compute/cuda/repos/"
        in node.file(f"{package_list}.disabled").content_string
    )
    sources = node.file("/etc/apt/sources.list.d/gpufleet-cuda.sources").content_string
    assert f"URIs: file:///srv/gpufleet-standin-apt/{distro}/x86_64/" in sources
    assert "Signed-By: /usr/share/keyrings/cuda-archive-keyring.gpg" in sources


def test_each_distro_trusts_its_own_repository_key():
    # the Debian 12 and 13 repositories are signed with different keys; each host installed its
    # distro's cuda-keyring, whose key verified its repository (apt refused nothing above)
    keyrings = {
        name: podman(name).check_output("sha256sum /usr/share/keyrings/cuda-archive-keyring.gpg").split()[0]
        for name in GPU_HOSTS
    }
    assert len(set(keyrings.values())) == 2, keyrings


def test_host_packages_pinned_and_held(gpu_host):
    assert_pinned(gpu_host, HOST_PACKAGES)


def test_container_packages_pinned_and_held(gpu_container):
    assert_pinned(gpu_container, CONTAINER_PACKAGES)


def test_container_has_no_kernel_module_or_host_services(gpu_container):
    for name in ("nvidia-kernel-open-dkms", "nvidia-kernel-dkms", "nvidia-persistenced", "nvidia-modprobe"):
        assert "installed" not in status(gpu_container, name), name
    assert not gpu_container.file("/etc/modprobe.d/gpufleet-blacklist-nouveau.conf").exists
    assert not gpu_container.file("/etc/systemd/system/nvidia-uvm-init.service").exists


def test_host_blacklists_nouveau(gpu_host):
    assert gpu_host.file("/etc/modprobe.d/gpufleet-blacklist-nouveau.conf").contains("^blacklist nouveau$")


def test_host_services(gpu_host):
    persistenced = gpu_host.service("nvidia-persistenced.service")
    assert persistenced.is_enabled, journal(gpu_host, "nvidia-persistenced.service")
    assert persistenced.is_running, journal(gpu_host, "nvidia-persistenced.service")
    assert gpu_host.service("nvidia-uvm-init.service").is_enabled
    active = gpu_host.run("systemctl is-active nvidia-uvm-init.service").stdout.strip()
    assert active == "active", journal(gpu_host, "nvidia-uvm-init.service")


def test_host_uvm_node_has_the_major_from_proc_devices(gpu_host):
    # 238 in the capture; the oneshot reads it from /proc/devices, never a hard-coded number
    kind, major, minor = gpu_host.check_output("stat -c '%F %t %T' /dev/nvidia-uvm").rsplit(" ", 2)
    assert kind == "character special file"
    assert (int(major, 16), int(minor, 16)) == (238, 0)


@pytest.mark.parametrize("name", GPU_HOSTS + GPU_CONTAINERS)
def test_nvidia_smi_reports_sm120_at_pinned_version(name):
    out = podman(name).check_output(
        "nvidia-smi --query-gpu=index,name,driver_version,compute_cap --format=csv,noheader,nounits"
    )
    rows = [line.split(", ") for line in out.splitlines()]
    assert len(rows) == 8
    assert {r[2] for r in rows} == {WANTED}
    assert {r[3] for r in rows} == {"12.0"}
    assert all("RTX PRO 6000" in r[1] for r in rows)


def test_container_userspace_equals_host_module(gpu_container):
    module = gpu_container.file("/var/lib/gpufleet-standin/proc/driver/nvidia/version").content_string
    assert f"Open Kernel Module for x86_64  {WANTED}" in module
    smi = json.loads(gpu_container.check_output("cat /etc/gpufleet-standin/nvidia-smi.json"))
    assert smi["driver_version"] == WANTED
