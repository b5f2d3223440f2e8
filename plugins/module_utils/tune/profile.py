# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Files of a sweep on the controller, next to the gate's baselines and keyed like them (stdlib only).

- ``<stem>.sweep.json``: the last sweep of a key (every candidate, the winner, the time);
  ``<stem>.sweeps.jsonl`` keeps every sweep, one line each. The report reads them.
- ``<stem>.tuned.json``: the tuned profile written by ``sglang_tune_apply``: the flags merged over the
  profile by role sglang_server (lookup gpufleet.sglang.sglang_tuned_profile), with how they were found.

``<stem>`` is the gate's baseline file stem (module_utils/gate/baseline.py ``file_stem``).

A tuned profile's flags are a profile like any other (module_utils/sglang/args.py ``check_profile``):
written only when they pass, and checked again when read back, since the file is outside data by
then (a value such as ``--admin-api-key=x`` is refused by name with the file's path).
"""

from __future__ import annotations

import glob
import json
import os
from typing import Any

from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.baseline import (
    append_line,
    atomic_write,
    file_stem,
    locked,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.args import SGLangArgsError, check_profile

# Controller-only: no module in plugins/modules may bundle this file, not even through another
# module_utils (tests/unit/test_module_rooms.py walks the imports; docs/CONTRIBUTING.md, "Where code lives").
CONTROLLER_ONLY = True

TUNED_SUFFIX = ".tuned.json"
SWEEP_SUFFIX = ".sweep.json"
SWEEPS_SUFFIX = ".sweeps.jsonl"


class TunedProfileError(ValueError):
    """A tuned profile file that cannot be used; the message names the file."""


def stem_path(directory: str, key: dict[str, str]) -> str:
    return os.path.join(directory, file_stem(key))


def write_sweep(directory: str, key: dict[str, str], sweep: dict[str, Any]) -> str:
    """Record a sweep (latest file + history line) under the key's lock; returns the latest file's path."""
    stem = stem_path(directory, key)
    os.makedirs(directory, exist_ok=True)
    text = json.dumps(sweep, sort_keys=True, separators=(",", ":"))
    with locked(stem + ".lock"):
        append_line(stem + SWEEPS_SUFFIX, text)
        atomic_write(stem + SWEEP_SUFFIX, json.dumps(sweep, sort_keys=True, indent=1) + "\n")
    return stem + SWEEP_SUFFIX


def write_tuned(directory: str, key: dict[str, str], flags: dict[str, Any], found: dict[str, Any]) -> str:
    """Write the tuned profile of ``key`` (the winner's flags over the profile); returns its path."""
    try:
        check_profile(flags, "the tuned flags")
    except SGLangArgsError as exc:
        raise TunedProfileError(f"{exc}; nothing was written") from exc
    stem = stem_path(directory, key)
    doc = {"key": key, "flags": flags, "found": found}
    with locked(stem + ".lock"):
        atomic_write(stem + TUNED_SUFFIX, json.dumps(doc, sort_keys=True, indent=1) + "\n")
    return stem + TUNED_SUFFIX


def find_tuned(directory: str, match: dict[str, str]) -> tuple[str, dict[str, Any]] | None:
    """The tuned profile whose key has every part in ``match`` (None: there is none).

    More than one match (e.g. two GPU models for the same host, profile and version) is an error
    naming the files: the role cannot know which one the node is.
    """
    hits = []
    for path in sorted(glob.glob(os.path.join(glob.escape(directory), "*" + TUNED_SUFFIX))):
        try:
            with open(path, encoding="utf-8") as handle:
                doc = json.load(handle)
        except (OSError, ValueError) as exc:
            raise TunedProfileError(f"tuned profile {path} cannot be read: {exc}") from exc
        key = doc.get("key") if isinstance(doc, dict) else None
        if not isinstance(key, dict) or not isinstance(doc.get("flags"), dict):
            raise TunedProfileError(f"tuned profile {path} has no key/flags mappings; move it away or rewrite it")
        if all(str(key.get(k)) == str(v) for k, v in match.items()):
            hits.append((path, doc))
    if len(hits) > 1:
        raise TunedProfileError(
            f"more than one tuned profile matches {match}: {', '.join(p for p, _d in hits)}; remove all but one"
        )
    if not hits:
        return None
    path, doc = hits[0]
    try:
        check_profile(doc["flags"], f"tuned profile {path}")
    except SGLangArgsError as exc:
        raise TunedProfileError(f"{exc}; fix or delete the file (or run tune.yml again)") from exc
    return path, doc
