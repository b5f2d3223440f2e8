# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The nvidia_gpu_info module run as Ansible runs it (args JSON), against the nvidia-smi stand-in and fixtures."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest
from lib.module import run_module as run_module_at
from lib.nvidia import FIX, PROFILES, STANDIN, profile_file

ROOT = Path(__file__).resolve().parents[2]
MODULE = ROOT / "plugins/modules/nvidia_gpu_info.py"


@pytest.fixture
def dev_dir(tmp_path: Path) -> Path:
    """Device nodes like an 8-GPU Proxmox host (needs root for mknod, as the real nodes do)."""
    if os.geteuid() != 0:
        pytest.skip("mknod of character devices needs root")
    dev = tmp_path / "dev"
    (dev / "nvidia-caps").mkdir(parents=True)
    nodes = [(f"nvidia{i}", 195, i) for i in range(8)]
    nodes += [("nvidiactl", 195, 255), ("nvidia-uvm", 510, 0), ("nvidia-uvm-tools", 510, 1)]
    nodes += [("nvidia-caps/nvidia-cap1", 511, 1), ("nvidia-caps/nvidia-cap2", 511, 2)]
    for name, major, minor in nodes:
        os.mknod(dev / name, stat.S_IFCHR | 0o666, os.makedev(major, minor))
    (dev / "nvidia-notes.txt").write_text("not a device\n", encoding="utf-8")
    return dev


def run_module(tmp_path: Path, args: dict, profile: Path | str = "rtxpro6000-8gpu") -> tuple[int, dict]:
    return run_module_at(MODULE, args, tmp_path, env={"STANDIN_NVIDIA_SMI_PROFILE": str(profile_file(profile))})


def base_args(dev: Path, variant: str = "rtxpro6000-8gpu", **extra) -> dict:
    args = {
        "nvidia_smi_path": str(STANDIN),
        "proc_version_path": str(FIX / variant / "proc-version.txt"),
        "proc_devices_path": str(FIX / variant / "proc-devices.txt"),
        "dev_dir": str(dev),
    }
    args.update(extra)
    return args


def test_rtxpro6000_8gpu(tmp_path, dev_dir):
    rc, result = run_module(tmp_path, base_args(dev_dir))
    assert rc == 0, result
    assert result["changed"] is False
    assert result["kernel_module"] == {"loaded": True, "version": "580.159.04", "type": "open"}
    assert (result["driver_version"], result["cuda_version"], result["gpu_count"]) == ("580.159.04", "13.0", 8)
    assert {g["compute_cap"] for g in result["gpus"]} == {"12.0"}
    assert result["gpus"][3]["pci_bus_id"] == "00000000:61:00.0"
    assert result["device_majors"]["nvidia-uvm"] == 510
    assert result["device_majors"]["nvidia-caps"] == 511
    paths = {n["path"].replace(str(dev_dir), "/dev"): (n["major"], n["minor"]) for n in result["device_nodes"]}
    assert paths["/dev/nvidiactl"] == (195, 255)
    assert paths["/dev/nvidia-caps/nvidia-cap2"] == (511, 2)
    assert "/dev/nvidia-notes.txt" not in paths
    assert len(paths) == 13
    assert result["topology"]["matrix"]["GPU2"]["GPU6"] == "SYS"
    assert result["links"] == {"gpu_count": 8, "nvlink": False, "pcie_farthest": "SYS"}
    assert result["nccl_env"] == {"NCCL_P2P_LEVEL": "SYS", "NCCL_IB_DISABLE": "1"}


def test_570_and_proprietary_are_reported_not_judged(tmp_path, dev_dir):
    rc, result = run_module(tmp_path, base_args(dev_dir, "rtxpro6000-570"), profile="rtxpro6000-570")
    assert rc == 0
    assert (result["kernel_module"]["version"], result["driver_version"], result["cuda_version"]) == (
        "570.195.03",
        "570.195.03",
        "12.8",
    )
    rc, result = run_module(tmp_path, base_args(dev_dir, "rtxpro6000-proprietary", topology=False))
    assert rc == 0
    assert result["kernel_module"]["type"] == "proprietary"
    assert result["topology"] is None
    assert (result["links"], result["nccl_env"]) == (None, {})


def test_check_mode_runs(tmp_path, dev_dir):
    rc, result = run_module(tmp_path, {**base_args(dev_dir), "_ansible_check_mode": True})
    assert rc == 0
    assert result["gpu_count"] == 8


def test_missing_nvidia_smi_fails_clearly(tmp_path, dev_dir):
    rc, result = run_module(tmp_path, base_args(dev_dir, nvidia_smi_path=str(tmp_path / "nope/nvidia-smi")))
    assert rc == 1
    assert result["failed"] is True
    assert result["msg"].startswith(f"nvidia-smi not found at {tmp_path}/nope/nvidia-smi; is the NVIDIA userspace")
    assert result["kernel_module"]["version"] == "580.159.04"  # what was learned comes along


def test_no_driver_at_all_with_require_driver_false(tmp_path, dev_dir):
    args = base_args(
        dev_dir,
        nvidia_smi_path="nvidia-smi-that-does-not-exist",
        proc_version_path=str(tmp_path / "absent"),
        require_driver=False,
    )
    rc, result = run_module(tmp_path, args)
    assert rc == 0, result
    assert result["kernel_module"] == {"loaded": False, "version": None, "type": None}
    assert (result["driver_version"], result["gpu_count"], result["gpus"]) == (None, 0, [])
    assert "nvidia-smi not found" in json.dumps(result["warnings"])


def profile_with_proc(tmp_path: Path, name: str, proc: Path) -> Path:
    data = json.loads((PROFILES / f"{name}.json").read_text(encoding="utf-8"))
    data["proc_version_path"] = str(proc)
    path = tmp_path / f"{name}-proc.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_driver_not_loaded_exit_9(tmp_path, dev_dir):
    absent = tmp_path / "absent-version"
    profile = profile_with_proc(tmp_path, "rtxpro6000-8gpu", absent)
    rc, result = run_module(tmp_path, base_args(dev_dir, proc_version_path=str(absent)), profile=profile)
    assert rc == 1
    assert "the NVIDIA driver is not loaded" in result["msg"]
    assert "exit 9" in result["msg"]
    assert f"({absent} does not exist)" in result["msg"]
    rc, result = run_module(
        tmp_path, base_args(dev_dir, proc_version_path=str(absent), require_driver=False), profile=profile
    )
    assert rc == 0
    assert result["kernel_module"]["loaded"] is False


def test_userspace_kernel_mismatch(tmp_path, dev_dir):
    proc = FIX / "rtxpro6000-8gpu/proc-version.txt"  # kernel module 580.159.04
    profile = profile_with_proc(tmp_path, "rtxpro6000-570", proc)  # userspace 570.195.03
    rc, result = run_module(tmp_path, base_args(dev_dir), profile=profile)
    assert rc == 1
    assert "versions differ" in result["msg"]
    assert "580.159.04" in result["msg"]


def garbage_smi(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "nvidia-smi"
    path.write_text(f"#!{sys.executable}\nimport sys\n{body}\n", encoding="utf-8")
    path.chmod(0o755)
    return path


def test_garbage_output_names_command_and_line(tmp_path, dev_dir):
    smi = garbage_smi(tmp_path, "print('0, NVIDIA RTX PRO 6000, GPU-x, 00000000:01:00.0'); sys.exit(0)")
    rc, result = run_module(tmp_path, base_args(dev_dir, nvidia_smi_path=str(smi)))
    assert rc == 1
    assert "unparsable output: cannot parse" in result["msg"]
    assert "--query-gpu=index,name,uuid" in result["msg"]
    assert "0, NVIDIA RTX PRO 6000, GPU-x" in result["msg"]


def test_other_failure_shows_exit_and_output(tmp_path, dev_dir):
    smi = garbage_smi(
        tmp_path, "print('Unable to determine the device handle for GPU0000:01:00.0: Unknown Error'); sys.exit(15)"
    )
    rc, result = run_module(tmp_path, base_args(dev_dir, nvidia_smi_path=str(smi)))
    assert rc == 1
    assert "failed with exit 15: Unable to determine the device handle" in result["msg"]


def test_a_failing_topology_read_warns_without_require_driver_and_fails_with_it(tmp_path, dev_dir):
    # the stand-in for everything but `topo -m`, which fails as a broken driver's does
    smi = garbage_smi(
        tmp_path,
        "import os\n"
        "if sys.argv[1:2] == ['topo']:\n"
        "    print('Failed to initialize NVML: Unknown Error'); sys.exit(255)\n"
        f"os.execv({str(STANDIN)!r}, [{str(STANDIN)!r}, *sys.argv[1:]])",
    )
    rc, result = run_module(tmp_path, base_args(dev_dir, nvidia_smi_path=str(smi), require_driver=False))
    assert rc == 0, result
    assert (result["driver_version"], result["gpu_count"]) == ("580.159.04", 8)
    assert (result["topology"], result["links"], result["nccl_env"]) == (None, None, {})
    assert "topo -m failed with exit 255: Failed to initialize NVML" in json.dumps(result["warnings"])
    rc, result = run_module(tmp_path, base_args(dev_dir, nvidia_smi_path=str(smi)))
    assert rc == 1
    assert "topo -m failed with exit 255" in result["msg"]


def test_bad_input_rejected(tmp_path, dev_dir):
    rc, result = run_module(tmp_path, base_args(dev_dir, topology="sometimes"))
    assert rc == 1
    assert "topology" in result["msg"]
    rc, result = run_module(tmp_path, base_args(dev_dir, dev_dir=str(tmp_path / "nodev")))
    assert rc == 1
    assert result["msg"] == f"dev_dir {tmp_path}/nodev is not a directory"
    rc, result = run_module(tmp_path, base_args(dev_dir, proc_devices_path=str(FIX / "malformed/proc-devices.txt")))
    assert rc == 1
    assert "not-a-major" in result["msg"]
    rc, result = run_module(tmp_path, {**base_args(dev_dir), "bogus_option": 1})
    assert rc == 1
    assert "bogus_option" in result["msg"]
