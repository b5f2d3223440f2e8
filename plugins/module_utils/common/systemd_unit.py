# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Values for systemd unit files, checked and quoted (stdlib only; runs on the controller).

A unit file is lines of ``Key=value``; a value is parsed by systemd, not by a shell (systemd.syntax(7),
systemd.service(7) "Command lines", systemd.exec(7) ``Environment=``, systemd 252):

- a line feed or carriage return ends the directive, so any control character is refused here (a
  :class:`UnitValueError` naming the variable and the character), never rendered;
- in ``ExecStart=`` words are split at white space unless quoted; inside double quotes C-style escapes
  apply (``\\\\`` and ``\\"``), ``%`` starts a specifier (``%h`` is the home directory: ``%%`` is one
  ``%``) and ``$`` an environment variable (``$$`` is one ``$``); a lone ``;`` separates two commands.
  :func:`exec_word` quotes one argument so that systemd hands it to the program unchanged: spaces,
  ``;``, quotes, backslashes, ``%`` and ``$`` included;
- in ``Environment=`` the same quoting and specifiers apply, ``$`` has no meaning (:func:`env_assignment`);
- ``OnCalendar=`` and ``RandomizedDelaySec=`` take a calendar event and a time span (systemd.time(7)):
  :func:`calendar` and :func:`timespan` accept the characters those use and nothing else (no quote, no
  ``%``, no ``;``), so a value is rendered as given or refused with the fix.

:func:`regate_units` builds the values of the scheduled re-gate's service and timer (role fleet_regate)
from the role's variables, each error naming the variable.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "ROLLOUT_EXTRA_VARS",
    "UnitValueError",
    "absolute_path",
    "calendar",
    "env_assignment",
    "exec_line",
    "exec_word",
    "regate_units",
    "timespan",
    "unit_name",
    "user_name",
]

# the re-gate takes one node out of the gateway at a time: playbooks/sglang.yml builds its batches
# (`serial`) and its capacity check from this variable, and `serial` sees extra vars only
ROLLOUT_EXTRA_VARS = "sglang_rollout_max_unavailable=1"
# exit status of flock when another run holds the lock (EX_TEMPFAIL, sysexits.h)
LOCK_CONFLICT_EXIT = 75

_CALENDAR_RE = re.compile(r"^[A-Za-z0-9*:,./~_+ -]+$")
_SPAN_UNITS = (
    "usec|us|msec|ms|seconds|second|sec|s|minutes|minute|min|m|hours|hour|hr|h|days|day|d|weeks|week|w"
    "|months|month|M|years|year|y"
)
_SPAN_RE = re.compile(rf"^(?:[0-9]+(?:\.[0-9]+)? ?(?:{_SPAN_UNITS})? ?)+$")
_UNIT_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$")
_USER_RE = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
_FQCN_PLAYBOOK_RE = re.compile(r"^[a-z0-9_]+\.[a-z0-9_]+\.[a-z0-9_]+$")


class UnitValueError(ValueError):
    """A value that cannot go into a unit file as given; the message names the variable and the fix."""


def _control(text: str) -> str | None:
    """The first control character of ``text`` as a name (``a line feed``, ``U+0007``), or None."""
    names = {"\n": "a line feed", "\r": "a carriage return", "\t": "a tab", "\x00": "a NUL"}
    for char in text:
        if ord(char) < 0x20 or ord(char) == 0x7F or 0xD800 <= ord(char) <= 0xDFFF:
            return names.get(char, f"U+{ord(char):04X}")
    return None


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise UnitValueError(f"{what} is a {type(value).__name__}, not text")
    if not value:
        raise UnitValueError(f"{what} is empty")
    bad = _control(value)
    if bad:
        raise UnitValueError(
            f"{what} {value!r} contains {bad}: a unit file's value ends at a line break, so the rest would "
            "become a directive of its own. Remove it"
        )
    return value


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")


def exec_word(value: Any, what: str) -> str:
    """One argument of ``ExecStart=``, double-quoted so that systemd passes exactly ``value``."""
    return '"' + _escape(_text(value, what)).replace("$", "$$") + '"'


def exec_line(words: list[tuple[str, Any]]) -> str:
    """``ExecStart=``'s value from (what, argument) pairs, each argument quoted by :func:`exec_word`."""
    return " ".join(exec_word(value, what) for what, value in words)


def env_assignment(name: str, value: Any, what: str) -> str:
    """One ``Environment=`` assignment ``"NAME=value"`` (quoted; ``%`` doubled; ``$`` means nothing there)."""
    if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
        raise UnitValueError(f"{name!r} is not an environment variable name")
    return '"' + name + "=" + _escape(_text(value, what)) + '"'


def absolute_path(value: Any, what: str) -> str:
    """An absolute path (any characters but control characters: :func:`exec_word` quotes it)."""
    path = _text(value, what)
    if not path.startswith("/"):
        raise UnitValueError(
            f"{what} {path!r} is not an absolute path: the service does not run where you are. Give it as /..."
        )
    return path


def calendar(value: Any, what: str) -> str:
    """An ``OnCalendar=`` expression of the characters systemd.time(7) uses (``Mon *-*-* 03:30:00 UTC``)."""
    text = _text(value, what)
    if not _CALENDAR_RE.match(text) or text != text.strip():
        raise UnitValueError(
            f"{what} {text!r} is not a calendar event: use letters, digits, spaces and * : , . / ~ _ + - only, "
            "as in '*-*-* 03:30:00' or 'Sun *-*-* 04:00:00 UTC' (check it with systemd-analyze calendar)"
        )
    return text


def timespan(value: Any, what: str) -> str:
    """A time span of systemd.time(7) (``30min``, ``1h 30min``, ``90``: seconds)."""
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else _text(value, what)
    if not _SPAN_RE.match(text) or text != text.strip():
        raise UnitValueError(f"{what} {text!r} is not a time span: give it as 30min, 1h, 90s or 45 (seconds)")
    return text


def unit_name(value: Any, what: str) -> str:
    """A unit's name without its suffix (letters, digits and _ . : -)."""
    text = _text(value, what)
    if not _UNIT_NAME_RE.match(text):
        raise UnitValueError(f"{what} {text!r} is not a unit name: letters, digits and _ . : - only, at most 200")
    return text


def user_name(value: Any, what: str) -> str:
    """A login name for ``User=`` (the POSIX-portable form Debian's adduser accepts by default)."""
    text = _text(value, what)
    if not _USER_RE.match(text):
        raise UnitValueError(f"{what} {text!r} is not a user name: lower-case letters, digits, _ and - only")
    return text


def _playbook(value: Any, what: str) -> str:
    text = _text(value, what)
    if _FQCN_PLAYBOOK_RE.match(text):
        return text
    if text.startswith("/") and text.endswith((".yml", ".yaml")):
        return text
    raise UnitValueError(
        f"{what} {text!r} is neither a collection playbook (namespace.collection.name, as gpufleet.sglang.sglang) "
        "nor an absolute path to a .yml file"
    )


def _deadline(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise UnitValueError(f"{what} is true/false, not a number of seconds")
    try:
        seconds = int(str(value))
    except ValueError:
        raise UnitValueError(f"{what} {value!r} is not a whole number of seconds") from None
    if seconds < 60 or seconds > 7 * 86400:
        raise UnitValueError(f"{what} {seconds} is outside 60 to 604800 seconds (one minute to one week)")
    return seconds


def regate_units(settings: Any) -> dict[str, Any]:
    """The re-gate service's and timer's values from the role's variables (``fleet_regate_<name>``).

    Keys of ``settings``: name, user, ansible_playbook, inventory, playbook, config (may be empty),
    vault_password_file (may be empty), lock_file, flock, on_calendar, randomized_delay, deadline_s.
    Returns what the templates print: ``exec_start``, ``environment`` (a list of assignments),
    ``on_calendar``, ``randomized_delay``, ``deadline_s``, ``user``, ``name`` and ``argv`` (the command
    as a list, for the role's facts). Every value is checked before any is rendered.
    """
    if not isinstance(settings, dict):
        raise UnitValueError(f"the settings are a {type(settings).__name__}, not a mapping")

    def var(key: str) -> str:
        return f"fleet_regate_{key}"

    def get(key: str) -> Any:
        if key not in settings:
            raise UnitValueError(f"{var(key)} is missing")
        return settings[key]

    name = unit_name(get("name"), var("name"))
    user = user_name(get("user"), var("user"))
    argv: list[tuple[str, str]] = [
        (var("flock"), absolute_path(get("flock"), var("flock"))),
        ("flock's option", "--nonblock"),
        ("flock's option", "--conflict-exit-code"),
        ("flock's option", str(LOCK_CONFLICT_EXIT)),
        (var("lock_file"), absolute_path(get("lock_file"), var("lock_file"))),
        (var("ansible_playbook"), absolute_path(get("ansible_playbook"), var("ansible_playbook"))),
        ("option", "-i"),
        (var("inventory"), absolute_path(get("inventory"), var("inventory"))),
    ]
    vault = get("vault_password_file")
    if vault not in (None, ""):
        vault_file = absolute_path(vault, var("vault_password_file"))
        argv += [("option", "--vault-password-file"), (var("vault_password_file"), vault_file)]
    argv += [
        ("option", "--extra-vars"),
        ("the rollout's pace", ROLLOUT_EXTRA_VARS),
        ("option", "--tags"),
        ("the gate's tag", "bench"),
        (var("playbook"), _playbook(get("playbook"), var("playbook"))),
    ]
    environment = [
        env_assignment("ANSIBLE_NOCOLOR", "1", "ANSIBLE_NOCOLOR"),
        env_assignment("ANSIBLE_FORCE_COLOR", "0", "ANSIBLE_FORCE_COLOR"),
        env_assignment("PYTHONUNBUFFERED", "1", "PYTHONUNBUFFERED"),
    ]
    config = get("config")
    if config not in (None, ""):
        environment.append(env_assignment("ANSIBLE_CONFIG", absolute_path(config, var("config")), var("config")))
    return {
        "name": name,
        "user": user,
        "exec_start": exec_line(argv),
        "argv": [pair[1] for pair in argv],
        "environment": environment,
        "on_calendar": calendar(get("on_calendar"), var("on_calendar")),
        "randomized_delay": timespan(get("randomized_delay"), var("randomized_delay")),
        "deadline_s": _deadline(get("deadline_s"), var("deadline_s")),
        "lock_conflict_exit": LOCK_CONFLICT_EXIT,
    }
