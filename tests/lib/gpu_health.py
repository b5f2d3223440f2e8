# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The gpu_health module's test inputs, shared by tests/unit/test_gpu_health.py and
test_gpu_health_metrics.py: the fixtures (the real H200 capture, the SM120 fault variants, kernel
logs in the real Xid formats), the nvidia-smi stand-in and its profiles, and the module run as
Ansible runs it (:func:`lib.module.run_module`) against the stand-in."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from lib.module import run_module
from lib.playbook import REPO

FIX = REPO / "tests/unit/fixtures/nvidia"
VARIANTS = FIX / "rtxpro6000-health"
LOGS = FIX / "kernel-log"
MODULE = REPO / "plugins/modules/gpu_health.py"
STANDIN = REPO / "tests/standins/nvidia-smi"
PROFILES = REPO / "tests/standins/nvidia/profiles"


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def module_args(log: str = "journal-clean.txt", **extra) -> dict:
    """gpu_health's options: the stand-in for nvidia-smi, the kernel log ``log`` of the fixtures read as a file."""
    return {"nvidia_smi_path": str(STANDIN), "kernel_log": "file", "kernel_log_path": str(LOGS / log), **extra}


def run_gpu_health(
    tmp_path: Path, args: dict, profile: str = "h200-580", *, env: Mapping[str, str] | None = None
) -> tuple[int, dict]:
    """gpu_health's exit status and result with the stand-in serving ``profile`` (and ``env`` over that)."""
    environ = {"STANDIN_NVIDIA_SMI_PROFILE": str(PROFILES / f"{profile}.json"), **(env or {})}
    return run_module(MODULE, args, tmp_path, env=environ)
