# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The steps of the nvidia_gpu_info module (stdlib only; runs on the target).

:func:`collect` fills the module's result step by step: kernel side (``/proc/driver/nvidia/version``,
``/proc/devices``, device nodes), the per-GPU query, the CUDA and driver versions, the P2P matrix.
It runs commands through the ``run`` function it is given (the module passes ``run_command``), so
each step is a small function a test can call. A step that cannot go on raises :class:`GpuInfoFailure`
with the message and whether it is a driver problem (which ``require_driver: false`` turns into a
warning and a successful result); the result holds what was learnt until then.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ansible_collections.gpufleet.sglang.plugins.module_utils.nvidia.nccl import (
    NcclTopologyError,
    link_summary,
    nccl_env,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.nvidia.smi import (
    GPU_INFO_FIELDS,
    NvidiaParseError,
    classify_smi_failure,
    nvidia_device_majors,
    parse_gpu_query,
    parse_proc_devices,
    parse_proc_version,
    parse_query_csv,
    parse_smi_versions,
    parse_topo_matrix,
    scan_device_nodes,
)

QUERY_ARGS = ["--query-gpu=" + ",".join(GPU_INFO_FIELDS), "--format=csv,noheader,nounits"]

Run = Callable[[list[str]], "tuple[int, str, str]"]

__all__ = ["QUERY_ARGS", "GpuInfoFailure", "collect", "empty_result", "short"]


class GpuInfoFailure(Exception):
    """The module cannot go on. ``driver``: the NVIDIA driver is missing or unusable (a warning
    when the driver is not required); ``extra``: more keys for the failure result (``rc``)."""

    def __init__(self, message: str, *, driver: bool = False, **extra: object) -> None:
        super().__init__(message)
        self.driver = driver
        self.extra = extra


def empty_result() -> dict:
    return {
        "changed": False,
        "kernel_module": {"loaded": False, "version": None, "type": None},
        "driver_version": None,
        "cuda_version": None,
        "gpu_count": 0,
        "gpus": [],
        "device_majors": {},
        "device_nodes": [],
        "topology": None,
        "links": None,
        "nccl_env": {},
    }


def short(text: str, limit: int = 400) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + "..."


def read_text(path: str, what: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError as exc:
        raise GpuInfoFailure(f"cannot read {what} {path}: {exc.strerror}") from None


def check_params(params: dict) -> None:
    if not params["nvidia_smi_path"].strip():
        raise GpuInfoFailure("nvidia_smi_path must not be empty")
    if not os.path.isdir(params["dev_dir"]):
        raise GpuInfoFailure(f"dev_dir {params['dev_dir']} is not a directory")


def read_kernel_side(result: dict, params: dict) -> None:
    """Kernel module version and type, the device majors and the device nodes."""
    proc_version = params["proc_version_path"]
    try:
        if os.path.exists(proc_version):
            parsed = parse_proc_version(read_text(proc_version, "kernel module version file"), proc_version)
            result["kernel_module"] = {"loaded": True, **parsed}
        majors_text = read_text(params["proc_devices_path"], "device list")
        result["device_majors"] = nvidia_device_majors(parse_proc_devices(majors_text, params["proc_devices_path"]))
    except NvidiaParseError as exc:
        raise GpuInfoFailure(str(exc)) from None
    result["device_nodes"] = scan_device_nodes(params["dev_dir"])


def module_state(result: dict, proc_version: str) -> str:
    """The kernel module's state in words, for messages about the userspace side."""
    kernel = result["kernel_module"]
    if kernel["loaded"]:
        return f"kernel module {kernel['version']} ({kernel['type']}) is loaded"
    return f"the NVIDIA kernel module is not loaded ({proc_version} does not exist)"


def query_failure(rc: int, output: str, query_cmd: str, state: str) -> GpuInfoFailure | None:
    """What a failed per-GPU query means; None when it only found no GPU."""
    kind = classify_smi_failure(rc, output)
    if kind == "driver_not_loaded":
        return GpuInfoFailure(
            f"the NVIDIA driver is not loaded: nvidia-smi couldn't communicate with the NVIDIA driver "
            f"(exit {rc}); {state}. Load the kernel module (modprobe nvidia) or install the driver.",
            driver=True,
        )
    if kind == "version_mismatch":
        return GpuInfoFailure(
            f"NVIDIA userspace and kernel module versions differ: {short(output)} ({state}); "
            "install the userspace driver at exactly the kernel module's version.",
            driver=True,
        )
    if kind == "no_devices":
        return None
    return GpuInfoFailure(f"{query_cmd} failed with exit {rc}: {short(output)}", rc=rc)


def run_query(smi: str, run: Run, state: str) -> tuple[str, str]:
    """Run the per-GPU query; (its output, '' when it found no GPU; the command line)."""
    rc, out, err = run([smi, *QUERY_ARGS])
    query_cmd = f"{smi} {' '.join(QUERY_ARGS)}"
    if rc != 0:
        failure = query_failure(rc, out + err, query_cmd, state)
        if failure is not None:
            raise failure
    return (out if rc == 0 else ""), query_cmd


def parse_query(result: dict, text: str, query_cmd: str) -> str | None:
    """The per-GPU query into ``result``; returns the driver version it reports (None without GPUs)."""
    try:
        gpus = parse_gpu_query(text, query_cmd)
        query_driver = next((row["driver_version"] for row in parse_query_csv(text, GPU_INFO_FIELDS)), None)
    except NvidiaParseError as exc:
        raise GpuInfoFailure(f"unparsable output: {exc}") from None
    result["gpus"] = gpus
    result["gpu_count"] = len(gpus)
    return query_driver


def learn_versions(result: dict, smi: str, run: Run) -> None:
    """CUDA and driver versions from ``nvidia-smi -q -d COMPUTE``, else from plain ``nvidia-smi``."""
    problems = []
    for argv in ([smi, "-q", "-d", "COMPUTE"], [smi]):
        rc, out, err = run(argv)
        try:
            if rc != 0:
                raise NvidiaParseError(" ".join(argv), f"exit {rc}", short(out + err))
            versions = parse_smi_versions(out, " ".join(argv))
        except NvidiaParseError as exc:
            problems.append(str(exc))
            continue
        result["cuda_version"] = versions["cuda_version"]
        result["driver_version"] = versions["driver_version"]
        return
    raise GpuInfoFailure("cannot learn the CUDA version: " + "; ".join(problems))


def read_topology(result: dict, smi: str, run: Run) -> None:
    """The P2P matrix, what it says about the links, and the NCCL environment it calls for."""
    argv = [smi, "topo", "-m"]
    rc, out, err = run(argv)
    if rc != 0:
        raise GpuInfoFailure(
            f"{' '.join(argv)} failed with exit {rc}: {short(out + err)} (set topology: false to skip it)"
        )
    try:
        result["topology"] = parse_topo_matrix(out, " ".join(argv))
        result["links"] = link_summary(result["topology"])
        result["nccl_env"] = nccl_env(result["topology"])
    except (NvidiaParseError, NcclTopologyError) as exc:
        raise GpuInfoFailure(f"unparsable output: {exc}") from None


def collect(result: dict, params: dict, which: Callable[[str], str | None], run: Run, warnings: list[str]) -> None:
    """Fill ``result`` (from :func:`empty_result`) for the module's ``params``. ``which`` resolves
    the nvidia-smi name to a path (None: not found); warnings are appended to ``warnings``."""
    check_params(params)
    read_kernel_side(result, params)
    proc_version = params["proc_version_path"]
    state = module_state(result, proc_version)
    smi = which(params["nvidia_smi_path"])
    if smi is None:
        raise GpuInfoFailure(
            f"nvidia-smi not found at {params['nvidia_smi_path']}; is the NVIDIA userspace driver installed? ({state})",
            driver=True,
        )
    text, query_cmd = run_query(smi, run, state)
    if not result["kernel_module"]["loaded"]:
        result["kernel_module"]["loaded"] = True  # nvidia-smi reached the driver although the file is absent
        warnings.append(
            f"{proc_version} does not exist, yet nvidia-smi reached the driver: kernel module version unknown"
        )
    query_driver = parse_query(result, text, query_cmd)
    learn_versions(result, smi, run)
    if query_driver:
        result["driver_version"] = query_driver  # the per-GPU query is authoritative for the userspace version
    if params["topology"] and result["gpus"]:
        try:
            read_topology(result, smi, run)
        except GpuInfoFailure as exc:
            if params["require_driver"]:
                raise
            # a read before a change reports what it learnt: the topology stays null, and the warning says why
            warnings.append(str(exc))
