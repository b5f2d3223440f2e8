# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Decide, poll by poll, whether an SGLang server unit is ready, still starting, or will never be, and where
to ask (the readiness path of a version). Standard library and ansible.module_utils only.

The readiness wait watches two things: the HTTP readiness endpoint (200 = ready) and the systemd
unit (``systemctl show`` properties). A unit in ``failed`` state, a unit that stopped, or one that
restarted more than ``max_restarts`` times since the wait began cannot become ready: the wait ends
at once instead of polling until its deadline.
"""

from __future__ import annotations

from ansible_collections.gpufleet.sglang.plugins.module_utils.common.secret_mask import mask
from ansible_collections.gpufleet.sglang.plugins.module_utils.common.version_order import VersionError, reaches

# The readiness path a server of a version has: SGLang 0.5.23 added GET /ready (200 once warmed up,
# no generation); before, GET /health_generate (a real one-token generation) is the readiness check.
READY_SINCE = "0.5.23"
READY_PATH = "/ready"
READY_PATH_BEFORE = "/health_generate"


def ready_path(version: str, override: str = "") -> str:
    """The readiness path of an SGLang ``version``: ``override`` when set, else by version.

    Versions are ordered by PEP 440 (version_order.reaches): a pre-release or dev build of 0.5.23
    (``0.5.23rc1``) has /ready, as 0.5.23 has. Raises ``ValueError`` for a version it cannot order.
    """
    if override:
        return str(override)
    try:
        newer = reaches(str(version), READY_SINCE)
    except VersionError as exc:
        raise ValueError(f"SGLang version {version!r} cannot be compared with {READY_SINCE}: {exc}") from None
    return READY_PATH if newer else READY_PATH_BEFORE


def wait_options(*, timeout_s: int | None, max_restarts: int, journal_lines: int) -> dict[str, dict]:
    """The argument spec of a readiness wait: the options of module sglang_server_ready that say where to
    ask and how long to wait, which action sglang_tune takes as its ``ready`` and passes on. The callers'
    defaults differ: ``timeout_s`` None makes that option required."""
    return {
        "url": {"type": "str", "required": True},
        "timeout_s": {"type": "int", "required": True} if timeout_s is None else {"type": "int", "default": timeout_s},
        "poll_s": {"type": "int", "default": 15},
        "max_restarts": {"type": "int", "default": max_restarts},
        "journal_lines": {"type": "int", "default": journal_lines},
    }


# systemctl show -p ... : what the verdict needs, and what a failure report shows.
UNIT_PROPERTIES = (
    "ActiveState",
    "SubState",
    "Result",
    "NRestarts",
    "MainPID",
    "ExecMainCode",
    "ExecMainStatus",
    "InactiveExitTimestamp",
    "InactiveExitTimestampMonotonic",
)


def parse_show(text: str) -> dict[str, str]:
    """``Key=Value`` lines of ``systemctl show`` to a dict (values keep any ``=`` they contain)."""
    props: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            props[key.strip()] = value.strip()
    return props


def restarts(props: dict[str, str]) -> int:
    """NRestarts as an int (0 when systemd does not report it)."""
    try:
        return int(props.get("NRestarts", "0") or 0)
    except ValueError:
        return 0


def unit_verdict(props: dict[str, str], restarts_at_start: int, max_restarts: int) -> tuple[str, str] | None:
    """``(verdict, reason)`` when the unit cannot become ready, else ``None`` (keep waiting).

    Verdicts: ``failed`` (ActiveState=failed), ``stopped`` (inactive: it exited cleanly or was
    stopped, and Restart=on-failure will not bring it back), ``crashloop`` (more than
    ``max_restarts`` automatic restarts since the wait began).
    """
    state = props.get("ActiveState", "")
    detail = (
        f"result {props.get('Result', '?')}, main process {props.get('ExecMainCode', '?')} "
        f"status {props.get('ExecMainStatus', '?')}, {restarts(props)} restarts"
    )
    if state == "failed":
        return "failed", f"the unit failed ({detail})"
    if state == "inactive":
        return "stopped", f"the unit is not running and will not be restarted ({detail})"
    since = restarts(props) - restarts_at_start
    if since > max_restarts:
        return "crashloop", f"the unit restarted {since} times during the wait, more than {max_restarts} ({detail})"
    return None


def journal_argv(journalctl: str, service: str, lines: int, activation: str) -> list[str]:
    """argv of ``journalctl`` for the last ``lines`` lines of ``service`` since ``activation``: the
    unit's ``InactiveExitTimestamp`` as ``systemctl show`` printed it when the wait began, i.e. the
    start the wait is about (automatic restarts do not move it). Lines of an earlier run of the unit
    (the release before, a previous tune candidate) stay out. A unit never started has none: then
    the last lines, whatever their run."""
    argv = [journalctl, "--no-pager", "-u", service, "-n", str(lines)]
    if activation and activation != "n/a":
        argv += ["--since", activation]
    return argv


def probe_timeout(remaining_s: float, cap_s: float = 60.0) -> float:
    """Timeout of one HTTP probe: never past the deadline, at least 1 s, at most ``cap_s``."""
    return max(1.0, min(cap_s, remaining_s))


def journal_lines(rc: int, out: str, err: str, secrets: list[str]) -> list[str]:
    """The lines a failed wait returns: journalctl's output (or why it failed), every form of each secret
    masked (secret_mask.mask: as written, repr- and JSON-escaped, percent-encoded)."""
    lines = (out if rc == 0 else f"journalctl failed (rc {rc}): {err}").splitlines()
    return [str(line) for line in mask(lines, [s for s in secrets if s])]  # type: ignore[union-attr]


def time_to_ready(start_us: str, ready_at: float, waited_s: float) -> float:
    """Seconds from the unit's start to its readiness answer: ``start_us`` is systemd's
    ``InactiveExitTimestampMonotonic`` when the wait began (microseconds of CLOCK_MONOTONIC, the clock of
    Python's ``time.monotonic`` on Linux), ``ready_at`` the ``time.monotonic()`` of the 200. When systemd
    does not say (``0``, empty, not a number) or says something impossible (after the 200, or earlier than
    the wait's own ``waited_s`` allows), the wait's ``waited_s``: a lower bound, never a guess."""
    try:
        start = int(start_us) / 1e6
    except ValueError:
        return round(waited_s, 1)
    seconds = ready_at - start
    if start <= 0 or seconds < waited_s:
        return round(waited_s, 1)
    return round(seconds, 1)
