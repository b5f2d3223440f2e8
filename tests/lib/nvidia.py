# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The NVIDIA test inputs shared by the unit tests of nvidia-smi's parsers, NCCL, nvidia_gpu_info and
gpu_health: the fixtures (real H200 captures, SM120 files and fault variants, kernel logs in the
real Xid formats), the nvidia-smi stand-in (tests/standins/nvidia-smi) and its profiles, and
gpu_health run as Ansible runs it (:func:`lib.module.run_module`) against the stand-in."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from lib.module import run_module
from lib.playbook import REPO

FIX = REPO / "tests/unit/fixtures/nvidia"
VARIANTS = FIX / "rtxpro6000-health"
LOGS = FIX / "kernel-log"
STANDIN = REPO / "tests/standins/nvidia-smi"
PROFILES = REPO / "tests/standins/nvidia/profiles"
GPU_HEALTH = REPO / "plugins/modules/gpu_health.py"


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def profile_file(profile: str | Path) -> Path:
    """The stand-in's profile: a file, or the name of one of tests/standins/nvidia/profiles."""
    return profile if isinstance(profile, Path) else PROFILES / f"{profile}.json"


def run_standin(
    *args: str, profile: str | Path = "h200-580", env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``nvidia-smi args`` as the stand-in answers it for ``profile``, with only PATH, the profile and
    ``env`` (over those two) in its environment; at most 30 s."""
    environ = {"PATH": os.environ.get("PATH", ""), "STANDIN_NVIDIA_SMI_PROFILE": str(profile_file(profile))}
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, str(STANDIN), *args], env=environ, capture_output=True, text=True, timeout=30, check=False
    )


def module_args(log: str = "journal-clean.txt", **extra) -> dict:
    """gpu_health's options: the stand-in for nvidia-smi, the kernel log ``log`` of the fixtures read as a file."""
    return {"nvidia_smi_path": str(STANDIN), "kernel_log": "file", "kernel_log_path": str(LOGS / log), **extra}


def run_gpu_health(
    tmp_path: Path, args: dict, profile: str = "h200-580", *, env: Mapping[str, str] | None = None
) -> tuple[int, dict]:
    """gpu_health's exit status and result with the stand-in serving ``profile`` (and ``env`` over that)."""
    environ = {"STANDIN_NVIDIA_SMI_PROFILE": str(profile_file(profile)), **(env or {})}
    return run_module(GPU_HEALTH, args, tmp_path, env=environ)
