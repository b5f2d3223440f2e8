# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one message a failed rollout fails the play with (playbooks/tasks/rollback.yml): what failed,
and what the node runs now. Standard library only; the filter ``rollback_message`` is its shell.

The message is one line of plain text (Ansible's failure message, the run's log); it goes into no
markup. Every string from outside (the node's name, the failed step, each reason) has its control
characters and line breaks turned into spaces, so no reason can start a line of its own or forge
another host's message.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from typing import Any

ACTIONS = ("none", "restored", "rolled_back")
# field -> the types it takes (None: may be left out or null)
FIELDS: dict[str, tuple[type, ...]] = {
    "host": (str,),
    "what": (str,),
    "action": (str,),
    "out_of_gateway": (bool,),
    "restarted": (bool,),
    "via_gateway": (bool,),
    "restore": (Mapping,),
    "now": (Mapping,),
    "version": (str,),
    "restore_error": (str,),
    "restore_left": (str,),
    "stop_error": (str,),
    "verify_error": (str,),
    "serving_after_s": (int, float, str),
    "verified": (str,),
    "gateway_error": (str,),
    # a GPU health check found the node failed (role sglang_server, entry point health): it stays out
    "gpu_failed": (bool,),
    "gpu_verdict": (str,),
}
REQUIRED = ("host", "what", "action")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


class RollbackMessageError(ValueError):
    """The facts cannot be worded; the message names the field and what it should be."""


def one_line(value: object) -> str:
    """``value`` as text on one line: control characters and line breaks become single spaces."""
    return " ".join(_CONTROL.sub(" ", str(value)).split())


def check(facts: object) -> dict[str, Any]:
    """The facts with every field of its type; unknown, missing or mistyped fields are named."""
    if not isinstance(facts, Mapping):
        raise RollbackMessageError(
            f"rollback_message: expected a dict of the rollback's facts, got {type(facts).__name__}"
        )
    unknown = sorted(str(k) for k in facts if k not in FIELDS)
    if unknown:
        raise RollbackMessageError(
            f"rollback_message: unknown field(s) {', '.join(unknown)}; known: {', '.join(FIELDS)}"
        )
    checked = {k: v for k, v in facts.items() if v is not None}
    for name in REQUIRED:
        if name not in checked:
            raise RollbackMessageError(f"rollback_message: {name} is required")
    for name, value in checked.items():
        kinds = FIELDS[name]
        if not isinstance(value, kinds) or (bool not in kinds and isinstance(value, bool)):
            wanted = " or ".join("dict" if k is Mapping else k.__name__ for k in kinds)
            raise RollbackMessageError(f"rollback_message: {name} must be {wanted}, got {type(value).__name__}")
    if checked["action"] not in ACTIONS:
        raise RollbackMessageError(
            f"rollback_message: action must be one of {', '.join(ACTIONS)}, got {one_line(checked['action'])!r}"
        )
    return checked


def _deployment(facts: dict[str, Any]) -> str:
    restore, now = facts.get("restore") or {}, facts.get("now") or {}
    return (
        f"deployment {one_line(restore.get('current', ''))} (SGLang {one_line(facts.get('version', 'unknown'))}, "
        f"release {one_line(now.get('release_dir', ''))}"
    )


def rollback_message(facts: object) -> str:
    """The play's message for a failed rollout on one node (see the module docstring)."""
    f = check(facts)
    out_of_gateway = f.get("out_of_gateway", False)
    out = " and is OUT of the gateway" if out_of_gateway else ""
    head = f"{one_line(f['host'])}: {one_line(f['what'])}."
    if f["action"] == "none":
        body = (
            "Nothing had changed on the node (no deployment recorded before this run and none now); "
            f"it was left as it was{out}."
        )
    elif "restore_error" in f:
        stopped = (
            f"NOT STOPPED (stopping it failed: {one_line(f['stop_error'])}; it may still serve the new deployment)"
            if "stop_error" in f
            else "STOPPED"
        )
        left = one_line(f.get("restore_left", "as it was"))
        reason = one_line(f["restore_error"])
        body = f"It could not go back ({reason}): the node is left {left}, {stopped} and OUT of the gateway."
    elif f["action"] == "restored" and not (f.get("restore") or {}).get("changed", False):
        body = f"Nothing on the node had changed: it runs {_deployment(f)}) as before{out}."
    else:
        restore = f.get("restore") or {}
        files = ", ".join(one_line(posixpath.basename(str(p))) for p in restore.get("files_changed") or []) or "none"
        verb = "Rolled back to" if f["action"] == "rolled_back" else "Restored"
        kept = (
            ""
            if f.get("restarted", True)
            else "; the server was never restarted on the new one and kept serving this one"
        )
        body = f"{verb} {_deployment(f)}; files restored: {files}){kept}."
        if "verify_error" in f:
            body += f" It is NOT serving as it should ({one_line(f['verify_error'])}) and is OUT of the gateway."
        else:
            body += " It serves again"
            if "serving_after_s" in f:
                body += f" ({one_line(f['serving_after_s'])} s after the failure)"
            if "verified" in f:
                body += f", verified: gate {one_line(f['verified'])}"
            if f.get("via_gateway", False) and not out_of_gateway:
                body += ", back in the gateway"
            if "gateway_error" in f:
                body += f" but is OUT of the gateway ({one_line(f['gateway_error'])})"
            if f.get("gpu_failed", False):
                body += (
                    f" but is OUT of the gateway and stays out: GPU health {one_line(f.get('gpu_verdict', 'failed'))}"
                    " (docs/gpu-health.md; once the GPU is repaired, run the rollout again)"
                )
            body += "."
    if f.get("gpu_failed", False) and f.get("via_gateway", False) and not out_of_gateway:
        body += (
            " It was never taken out of the gateway and is still IN it: the gateway stops routing to it when its"
            " health checks fail."
        )
    return one_line(f"{head} {body}")
