# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Pieces of the modules' argument specs that more than one module spells the same way (pure)."""

from __future__ import annotations

from typing import Any


def dict_list(**options: dict[str, Any]) -> dict[str, Any]:
    """An option that takes a list of dicts, each checked against the sub-options ``options``; empty when not given."""
    return {"type": "list", "elements": "dict", "default": [], "options": options}
