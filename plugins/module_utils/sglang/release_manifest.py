# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The manifest of an installed SGLang release (role sglang writes it last, as
``<release>/gpufleet-release.json``), read back as data from disk (stdlib only; no I/O).

The rollout's plan (playbooks/sglang.yml) reads the manifest of the release ``current`` points at to
tell whether this run's pins name the same release. Only the fields it uses are taken, each checked:
``id`` (the release directory's name: one path segment), ``version`` and ``pins.python``. Anything
else, or a text that is not such a manifest, gives ``ok: false`` and a ``problem`` that names what is
wrong: a node whose manifest cannot be read is not steady, and its own run reads and fixes it.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_MANIFEST_BYTES = 1 << 16  # role sglang's manifest is about 1 KB
# the release ids role sglang forms: sglang-<version or git-<ref>>-<10 hex digits>
_ID_RE = re.compile(r"sglang-[A-Za-z0-9._+-]{1,160}-[0-9a-f]{10}")
_VERSION_RE = re.compile(r"[A-Za-z0-9._+-]{1,64}")
_PYTHON_RE = re.compile(r"[0-9]{1,2}\.[0-9]{1,3}(\.[0-9]{1,4})?")


def _bad(problem: str) -> dict[str, Any]:
    return {"ok": False, "problem": problem, "id": "", "version": "", "python": ""}


def _load(text: object) -> tuple[dict[str, Any], str]:
    """The manifest as a JSON object, or ``({}, problem)``."""
    if not isinstance(text, str):
        return {}, f"the manifest is {type(text).__name__}, not text"
    if not text:
        return {}, "no manifest (no release is current, or its install did not finish)"
    if len(text) > MAX_MANIFEST_BYTES:
        return {}, f"the manifest is more than {MAX_MANIFEST_BYTES} bytes"
    try:
        doc = json.loads(text)
    except ValueError as exc:
        return {}, f"the manifest is not JSON ({exc.msg} at line {exc.lineno})"
    if not isinstance(doc, dict):
        return {}, f"the manifest is a JSON {type(doc).__name__}, not an object"
    return doc, ""


def parse_release_manifest(text: object) -> dict[str, Any]:
    """``{"ok", "problem", "id", "version", "python"}`` from the manifest's text (``""``: none found)."""
    doc, problem = _load(text)
    if problem:
        return _bad(problem)
    pins = doc.get("pins")
    checks = (
        ("id", "id", doc.get("id"), _ID_RE),
        ("version", "version", doc.get("version"), _VERSION_RE),
        ("python", "pins.python", pins.get("python") if isinstance(pins, dict) else None, _PYTHON_RE),
    )
    fields = {}
    for name, shown_as, value, pattern in checks:
        if not isinstance(value, str) or not pattern.fullmatch(value):
            shown = repr(value)[:60] if value is not None else "missing"
            return _bad(f"the manifest's {shown_as} is not a valid value ({shown})")
        fields[name] = value
    return {"ok": True, "problem": "", **fields}
