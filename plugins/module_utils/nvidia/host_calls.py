# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The two host calls the NVIDIA modules' pure cores take (gpu_health, nvidia_gpu_info).

Their cores (``nvidia.gpu_health.collect``, ``nvidia.gpu_info.collect``) never touch the host
themselves: they get ``which`` (find an executable: a name with a slash is taken as a path and must
be an executable file, a bare name is looked up on PATH as AnsibleModule does) and ``run`` (a
command in the C locale, so nvidia-smi's and the kernel's text is the English the parsers read).
Tests pass their own functions instead.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any


def host_calls(module: Any) -> tuple[Callable[[str], str | None], Callable[[list[str]], tuple[int, str, str]]]:
    """``(which, run)`` bound to ``module`` (an AnsibleModule)."""

    def which(name: str) -> str | None:
        if "/" in name:
            return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
        return module.get_bin_path(name)

    def run(argv: list[str]) -> tuple[int, str, str]:
        return module.run_command(argv, environ_update={"LC_ALL": "C", "LANG": "C"})

    return which, run
