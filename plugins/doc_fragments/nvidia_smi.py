# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The nvidia-smi option of the modules that read the GPUs (gpu_health, nvidia_gpu_info).

Both find it with plugins/module_utils/nvidia/host_calls.py; the default is their argument specs'.
"""

from __future__ import annotations


class ModuleDocFragment:
    # gpufleet.sglang.nvidia_smi
    DOCUMENTATION = r"""
options:
  nvidia_smi_path:
    description:
      - The nvidia-smi program. A bare name is looked up on E(PATH); a path containing V(/) is used as is.
    type: str
    default: nvidia-smi
"""
