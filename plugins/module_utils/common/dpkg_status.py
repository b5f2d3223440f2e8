# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What dpkg says is installed, and which wanted packages it does not satisfy (pure; node_state runs it on the node).

The roles read the packages they manage with one ``dpkg-query`` (DPKG_QUERY_FORMAT) and run their apt
tasks only for what this finds unsatisfied, so that a node that has everything skips apt's cache load
for each task (docs/connection.md, "Lever C for apt"). The rule is conservative: a package counts as satisfied
only when every line dpkg prints for it says ``ok installed`` with a wanted selection (``install`` or
``hold``, or exactly the one asked for) at exactly the version asked for; anything else (not listed,
half-configured, config-files only, another version, a version with apt's ``*`` pattern, apt's
``name:arch`` or ``name>=version``) is left to apt, which decides as it always did. dpkg's output is
outside data: a line that is not ``<package>\\t<version>\\t<want> <error> <state>`` with dpkg's own
words is refused with a message that names it. Source: dpkg-query(1) (``--showformat``, the ``Status``
field), deb-version(7), Debian Policy 5.6.1 (package names).
"""

from __future__ import annotations

import re

# dpkg-query --show --showformat: one line per package (and per architecture of a multi-arch one)
DPKG_QUERY_FORMAT = "${Package}\\t${Version}\\t${Status}\\n"

# a Debian package name (Policy 5.6.1)
_NAME_PATTERN = r"[a-z0-9][a-z0-9+.-]+"
_NAME = re.compile(_NAME_PATTERN + r"\Z")
# apt's forms of a wanted package: name, name:arch, each with =version or a comparison such as >=version
_SPEC = re.compile(
    rf"(?P<name>{_NAME_PATTERN})(?P<arch>:[a-z0-9-]+)?(?:(?P<op>=|>=|<=|>>|<<|>|<)(?P<version>[A-Za-z0-9.+~:*-]+))?\Z"
)
_VERSION = re.compile(r"(?:[0-9]+:)?[A-Za-z0-9][A-Za-z0-9.+~:-]*\Z")
_WANT = frozenset({"unknown", "install", "hold", "deinstall", "purge"})
_ERROR = frozenset({"ok", "reinstreq", "hold", "hold-reinstreq"})
_STATE = frozenset(
    {
        "not-installed",
        "config-files",
        "half-installed",
        "unpacked",
        "half-configured",
        "triggers-awaited",
        "triggers-pending",
        "installed",
    }
)
_SELECTIONS = ("install", "hold")


class DpkgStatusError(ValueError):
    """dpkg's output or a wanted package is not what this reads."""


def _shown(text: str) -> str:
    return repr(text if len(text) <= 120 else text[:120] + "...")


def parse_dpkg_status(stdout: str) -> dict[str, list[tuple[str, str, str, str]]]:
    """``{package: [(version, want, error, state), ...]}`` from DPKG_QUERY_FORMAT's lines."""
    if not isinstance(stdout, str):
        raise DpkgStatusError(f"dpkg-query's output is {type(stdout).__name__}, not text")
    found: dict[str, list[tuple[str, str, str, str]]] = {}
    for number, line in enumerate(stdout.split("\n"), start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        words = fields[2].split(" ") if len(fields) == 3 else []
        if (
            len(words) != 3
            or not _NAME.match(fields[0])
            or not (fields[1] == "" or _VERSION.match(fields[1]))
            or words[0] not in _WANT
            or words[1] not in _ERROR
            or words[2] not in _STATE
        ):
            raise DpkgStatusError(
                f"dpkg-query's line {number} is not '<package>\\t<version>\\t<want> <error> <state>': {_shown(line)}"
            )
        found.setdefault(fields[0], []).append((fields[1], words[0], words[1], words[2]))
    return found


def split_spec(spec: object) -> tuple[str, str | None, bool]:
    """(name, version or None, exact) of apt's ``name``, ``name=version``, ``name:arch`` or ``name>=version``.

    ``exact`` is true for ``name`` and ``name=version``, the forms this reads; the others (an architecture,
    a comparison) are apt's to resolve, so a package asked that way is never counted as satisfied.
    Anything else (not a Debian package name, an empty version, shell syntax) is refused.
    """
    if not isinstance(spec, str):
        raise DpkgStatusError(f"a wanted package must be text, not {type(spec).__name__}: {spec!r}")
    match = _SPEC.match(spec)
    if not match:
        raise DpkgStatusError(f"not a Debian package as apt takes it (name, name=version, name:arch): {_shown(spec)}")
    exact = match["arch"] is None and match["op"] in (None, "=")
    return match["name"], match["version"], exact


def unsatisfied(stdout: str, wanted: list, selection: str | None = None) -> list[str]:
    """The entries of ``wanted`` (apt's forms, split_spec) that dpkg's output does not satisfy.

    Satisfied: every line of the package says ``ok installed``, at exactly the version when one is
    given, with the selection ``install`` or ``hold`` (only ``selection`` when that is given).
    """
    if selection is not None and selection not in _SELECTIONS:
        raise DpkgStatusError(f"selection must be one of {', '.join(_SELECTIONS)}, not {selection!r}")
    if not isinstance(wanted, list):
        raise DpkgStatusError(f"the wanted packages must be a list, not {type(wanted).__name__}")
    status = parse_dpkg_status(stdout)
    allowed = (selection,) if selection else _SELECTIONS
    missing = []
    for spec in wanted:
        name, version, exact = split_spec(spec)
        lines = status.get(name, [])
        ok = (
            exact
            and bool(lines)
            and all(
                err == "ok"
                and state == "installed"
                and want in allowed
                # (have passed _VERSION when read, so an apt pattern such as 13.0* never equals it)
                and (version is None or have == version)
                for have, want, err, state in lines
            )
        )
        if not ok:
            missing.append(spec)
    return missing


# dpkg-divert(1): ``--listpackage PATH`` prints the diversion's holder (``LOCAL`` for a local one, else the
# package) and nothing when PATH is not diverted; ``--truename PATH`` prints the name PATH is diverted to,
# PATH itself when it is not. community.general.dpkg_divert reads a diversion the same way.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _one_line(text: object, what: str) -> str:
    if not isinstance(text, str):
        raise DpkgStatusError(f"{what} is {type(text).__name__}, not text")
    body = text[:-1] if text.endswith("\n") else text
    if _CONTROL.search(body):
        raise DpkgStatusError(f"{what} is not one line of text: {_shown(text)}")
    return body


def parse_diversion(path: str, listpackage: object, truename: object) -> dict[str, str | None]:
    """``{"holder": ..., "divert": ...}`` of ``path`` from dpkg-divert's two answers; both None where ``path``
    is not diverted. The holder is ``LOCAL`` or a package name; the divert an absolute path without control
    characters. Anything else is refused with a message that names the output."""
    holder = _one_line(listpackage, f"dpkg-divert --listpackage {path}")
    divert = _one_line(truename, f"dpkg-divert --truename {path}")
    if holder == "":
        return {"holder": None, "divert": None}
    if holder != "LOCAL" and not _NAME.match(holder):
        raise DpkgStatusError(f"dpkg-divert --listpackage {path} is not LOCAL or a package: {_shown(holder)}")
    if not divert.startswith("/"):
        raise DpkgStatusError(f"dpkg-divert --truename {path} is not an absolute path: {_shown(divert)}")
    return {"holder": holder, "divert": divert}


def check_name(name: object) -> str:
    """A Debian package name (Policy 5.6.1), or ``DpkgStatusError``."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise DpkgStatusError(f"not a Debian package name: {_shown(str(name))}")
    return name
