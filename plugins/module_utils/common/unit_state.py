# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Whether systemd units are enabled and active, from one ``systemctl show`` (stdlib only; runs on targets).

Module ``node_state`` reads the units a role keeps enabled and started (as ``ansible.builtin.systemd_service``
with ``enabled: true`` and ``state: started`` leaves them) in the same call as its files, so that the role runs
those tasks only where a unit is not so. The rule is conservative: a unit matches only when systemd has it
loaded (``LoadState=loaded``), its unit file ``enabled`` and the unit ``active``; anything else (static,
masked, failed, not found, an output this parser does not know) is drift, and the role's tasks decide as before.

``systemctl show --property=...`` prints one block of ``Key=value`` lines per unit named, in the order named,
blocks separated by an empty line (systemctl(1), ``show``; systemd 252 and 257).
"""

from __future__ import annotations

import re

__all__ = ["SHOW_PROPERTIES", "UnitStateError", "check_units", "parse_show", "unit_drift"]

SHOW_PROPERTIES = ("Id", "LoadState", "UnitFileState", "ActiveState")
# a unit name as systemd.unit(5) allows it (letters, digits, ":-_.\\@"), with a type suffix; never starting
# with '-' (systemctl would read an option)
_UNIT = re.compile(r"^[A-Za-z0-9:_.\\@][A-Za-z0-9:_.\\@-]{0,250}\.(service|socket|timer|path|mount|target)$")


class UnitStateError(ValueError):
    """A bad unit name, or a ``systemctl show`` output that is not its format."""


def check_units(units: object) -> list[str]:
    """The unit names, checked, or ``UnitStateError`` naming the entry."""
    if not isinstance(units, list):
        raise UnitStateError(f"units must be a list, got {type(units).__name__}")
    for i, name in enumerate(units):
        if not isinstance(name, str) or not _UNIT.match(name):
            raise UnitStateError(
                f"units[{i}]: {str(name)[:80]!r} is not a unit name such as 'nvidia-persistenced.service'"
            )
    return list(units)


def parse_show(out: str, names: list[str]) -> dict[str, dict[str, str]]:
    """The properties of each unit named, from ``systemctl show``'s output, or ``UnitStateError``."""
    blocks: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in out.splitlines():
        if not line.strip():
            if current:
                blocks.append(current)
                current = {}
            continue
        key, sep, value = line.partition("=")
        if not sep or key not in SHOW_PROPERTIES:
            raise UnitStateError(f"systemctl show printed {line[:120]!r}, not one of {', '.join(SHOW_PROPERTIES)}")
        current[key] = value
    if current:
        blocks.append(current)
    if len(blocks) != len(names):
        raise UnitStateError(f"systemctl show printed {len(blocks)} unit(s) for the {len(names)} named")
    return dict(zip(names, blocks))  # noqa: B905 (lengths checked above; targets may run Python < 3.10)


def unit_drift(found: dict[str, dict[str, str]], names: list[str]) -> list[str]:
    """One reason per unit that is not loaded, enabled and active, each naming the unit."""
    reasons = []
    for name in names:
        props = found.get(name, {})
        wrong = [
            f"{key} {props.get(key) or 'unknown'}, wanted {wanted}"
            for key, wanted in (("LoadState", "loaded"), ("UnitFileState", "enabled"), ("ActiveState", "active"))
            if props.get(key) != wanted
        ]
        if wrong:
            reasons.append(f"unit {name}: {', '.join(wrong)}")
    return reasons
