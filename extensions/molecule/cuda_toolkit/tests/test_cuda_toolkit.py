"""The pinned toolkit is installed, nvcc answers, and services get CUDA_HOME."""

from __future__ import annotations

import os

import pytest
import testinfra
import testinfra.utils.ansible_runner

NAMES = testinfra.utils.ansible_runner.AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"]).get_hosts("all")


@pytest.fixture(params=NAMES)
def node(request):
    return testinfra.get_host(f"podman://{request.param}")


def test_pinned_package(node):
    out = node.check_output("dpkg-query -W -f='${Version} ${Status}' cuda-toolkit-13-0")
    assert out == "13.0.2-1 install ok installed"
    assert not node.package("cuda-toolkit-12-8").is_installed


def test_nvcc_version(node):
    out = node.check_output("/usr/local/cuda-13.0/bin/nvcc --version")
    assert "Cuda compilation tools, release 13.0, V13.0.88" in out


def test_service_environment(node):
    env = node.file("/etc/gpufleet/cuda.env")
    assert env.mode == 0o644
    assert env.contains("^CUDA_HOME=/usr/local/cuda-13.0$")
    assert env.contains("^PATH=/usr/local/cuda-13.0/bin:")
    # a login shell finds nvcc through the profile script
    assert node.check_output("bash -lc 'command -v nvcc'") == "/usr/local/cuda-13.0/bin/nvcc"
