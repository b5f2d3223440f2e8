# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The attributes of the modules that only read (node_state, nvidia_gpu_info, rollout_room,
sglang_source_info): said once here, as community.general's attributes fragments do."""

from __future__ import annotations


class ModuleDocFragment:
    # gpufleet.sglang.read_only
    DOCUMENTATION = r"""
attributes:
  check_mode:
    support: full
    description: Read-only; runs the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing, so has no diff.
"""
