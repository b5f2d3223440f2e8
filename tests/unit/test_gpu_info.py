# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""gpu_info: the steps of nvidia_gpu_info on real captures (tests/unit/fixtures/nvidia/rtxpro6000-570),
with nvidia-smi replaced by a function that answers from the files (the module tests run the whole
module against the nvidia-smi stand-in)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.gpufleet.sglang.plugins.module_utils.nvidia import gpu_info as gi

CAPTURE = Path(__file__).parent / "fixtures" / "nvidia" / "rtxpro6000-570"


def smi(answers: dict[str, tuple[int, str]]):
    """A ``run`` that answers by the nvidia-smi arguments; records the calls."""
    calls: list[list[str]] = []

    def run(argv: list[str]) -> tuple[int, str, str]:
        calls.append(argv)
        key = " ".join(argv[1:]) or "-"
        if key.startswith("--query-gpu"):
            key = "query"
        rc, out = answers[key]
        return rc, out, ""

    return run, calls


def capture(name: str) -> str:
    return (CAPTURE / name).read_text()


def params(tmp_path: Path, **more) -> dict:
    return {
        "nvidia_smi_path": "nvidia-smi",
        "proc_version_path": str(CAPTURE / "proc-version.txt"),
        "proc_devices_path": str(CAPTURE / "proc-devices.txt"),
        "dev_dir": str(tmp_path),
        "topology": True,
        "require_driver": True,
        **more,
    }


def full_answers() -> dict[str, tuple[int, str]]:
    return {
        "query": (0, capture("query-gpu.csv")),
        "-q -d COMPUTE": (0, capture("nvidia-smi-q-compute.txt")),
        "-": (0, capture("nvidia-smi.txt")),
        "topo -m": (0, capture("topo.txt")),
    }


def test_collect_on_a_real_capture(tmp_path):
    run, calls = smi(full_answers())
    result, warnings = gi.empty_result(), []
    gi.collect(result, params(tmp_path), lambda name: "/usr/bin/" + name, run, warnings)
    assert warnings == []
    assert result["kernel_module"]["loaded"] is True
    assert result["gpu_count"] == len(result["gpus"]) > 0
    assert result["driver_version"] == "570.195.03"  # the per-GPU query's column
    assert result["cuda_version"] == "12.8"
    assert result["topology"]["gpus"]
    assert [c[1:] for c in calls][1:] == [["-q", "-d", "COMPUTE"], ["topo", "-m"]]


def test_versions_fall_back_to_plain_nvidia_smi(tmp_path):
    answers = {**full_answers(), "-q -d COMPUTE": (0, "garbage\n")}
    run, _calls = smi(answers)
    result = gi.empty_result()
    gi.learn_versions(result, "/usr/bin/nvidia-smi", run)
    assert result["cuda_version"] == "12.8"
    both_bad = {**answers, "-": (3, "boom")}
    run, _calls = smi(both_bad)
    with pytest.raises(gi.GpuInfoFailure, match=r"cannot learn the CUDA version: .*exit 3.*boom"):
        gi.learn_versions(gi.empty_result(), "/usr/bin/nvidia-smi", run)


@pytest.mark.parametrize(
    ("rc", "output", "driver", "needle"),
    [
        (9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", True, "not loaded"),
        (18, "Failed to initialize NVML: Driver/library version mismatch", True, "versions differ"),
        (4, "Insufficient Permissions", False, "failed with exit 4: Insufficient Permissions"),
    ],
)
def test_query_failures_are_named(rc, output, driver, needle):
    failure = gi.query_failure(rc, output, "nvidia-smi --query-gpu=...", "kernel module 570 (open) is loaded")
    assert failure is not None
    assert failure.driver is driver
    assert needle in str(failure)
    assert failure.extra == ({} if driver else {"rc": rc})


def test_no_devices_is_not_a_failure(tmp_path):
    assert gi.query_failure(6, "No devices were found", "q", "s") is None
    run, _calls = smi({**full_answers(), "query": (6, "No devices were found")})
    result = gi.empty_result()
    gi.collect(result, params(tmp_path), lambda name: name, run, [])
    assert (result["gpu_count"], result["topology"]) == (0, None)  # no GPU: no topology asked


def test_missing_nvidia_smi_is_a_driver_problem_after_the_kernel_side(tmp_path):
    result = gi.empty_result()
    with pytest.raises(gi.GpuInfoFailure, match="nvidia-smi not found at nvidia-smi") as info:
        gi.collect(result, params(tmp_path), lambda name: None, smi({})[0], [])
    assert info.value.driver is True
    assert result["kernel_module"]["loaded"] is True  # what was learnt before stays in the result


def test_absent_version_file_but_driver_reached_warns(tmp_path):
    run, _calls = smi(full_answers())
    result, warnings = gi.empty_result(), []
    gi.collect(result, params(tmp_path, proc_version_path=str(tmp_path / "none")), lambda n: n, run, warnings)
    assert result["kernel_module"]["loaded"] is True
    assert warnings == [
        f"{tmp_path / 'none'} does not exist, yet nvidia-smi reached the driver: kernel module version unknown"
    ]


def test_bad_parameters_and_unreadable_files_are_named(tmp_path):
    with pytest.raises(gi.GpuInfoFailure, match="nvidia_smi_path must not be empty"):
        gi.check_params(params(tmp_path, nvidia_smi_path=" "))
    with pytest.raises(gi.GpuInfoFailure, match="is not a directory"):
        gi.check_params(params(tmp_path, dev_dir=str(tmp_path / "nope")))
    with pytest.raises(gi.GpuInfoFailure, match=r"cannot read device list .*/nope: No such file"):
        gi.read_kernel_side(gi.empty_result(), params(tmp_path, proc_devices_path=str(tmp_path / "nope")))
