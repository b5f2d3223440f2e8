# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Render a profile of SGLang server flags into an argv for a given SGLang version (stdlib only).

A profile is a dict ``{flag: value}``; keys use underscores or dashes, without ``--``
(``tp``, ``moe_runner_backend``, ``disable_cuda_graph``). Values: ``True`` = bare flag,
``False``/``None`` = omitted, list = several values (only for flags that take several),
dict = JSON text, anything else = its text.

Flags that changed between releases are mapped for the target version (docs/sglang-versions-and-flags.md):
``disable_cuda_graph`` -> ``--cuda-graph-backend-decode/prefill disabled`` where those exist;
``cuda_graph_max_bs`` <-> ``cuda_graph_max_bs_decode``; ``enable_dp_attention`` + ``dp_size``
<-> ``attn_dp_size``. Any flag the version's parser does not know is refused, naming the flag
and the version. The known flags per version come from ``sglang_flag_table`` (dumped from the
real parsers of released wheels). For a version between two dumped ones, a flag is known only
if both neighbours know it; the installed parser has the last word on the node.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang_flag_table import FLAGS, VERSIONS


class SGLangArgsError(ValueError):
    """A profile cannot be rendered for the version; the message names what is wrong."""


# Short spellings people write (argparse's prefix matching accepts them) -> canonical flag.
ALIASES = {"tp": "tp-size", "dp": "dp-size", "pp": "pp-size", "ep": "ep-size"}

_VERSION_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)(?:\.?(post|rc|dev)(\d+))?$")
_SUFFIX_ORDER = {"dev": -3, "rc": -2, None: 0, "post": 1}


def parse_version(version: str) -> tuple[int, int, int, int, int]:
    """'0.5.12.post1' -> (0, 5, 12, 1, 1); refuses anything it cannot order."""
    match = _VERSION_RE.match(str(version).strip())
    if not match:
        raise SGLangArgsError(f"SGLang version {version!r} is not a release version like 0.5.23 or 0.5.12.post1")
    major, minor, patch, suffix, number = match.groups()
    return int(major), int(minor), int(patch), _SUFFIX_ORDER[suffix], int(number or 0)


def known_flags(version: str) -> dict[str, str]:
    """{'--flag': kind} the version's parser accepts (kind: bool, value, optional, list)."""
    wanted = parse_version(version)
    keys = [parse_version(v) for v in VERSIONS]
    if wanted < keys[0]:
        raise SGLangArgsError(f"SGLang {version} is older than the oldest version the flag table knows ({VERSIONS[0]})")
    if wanted in keys:
        indexes = [keys.index(wanted)]
    elif wanted > keys[-1]:
        indexes = [len(keys) - 1]
    else:
        upper = next(i for i, key in enumerate(keys) if key > wanted)
        indexes = [upper - 1, upper]
    return {flag: kind for flag, (kind, presence) in FLAGS.items() if all(presence[index] == "1" for index in indexes)}


def _flag_name(key: str) -> str:
    name = str(key).strip()
    if name.startswith("--"):
        name = name[2:]
    name = name.replace("_", "-")
    return ALIASES.get(name, name)


def normalize(profile: dict[str, Any]) -> dict[str, Any]:
    """Keys to canonical dashed names without '--'; a key given twice (tp and tp_size) is an error."""
    if not isinstance(profile, dict):
        raise SGLangArgsError(f"SGLang flags must be a dict of flag: value, got {type(profile).__name__}")
    out: dict[str, Any] = {}
    for key, value in profile.items():
        name = _flag_name(key)
        if name in out:
            raise SGLangArgsError(f"SGLang flag --{name} is given twice (as {key!r} and another spelling)")
        out[name] = value
    return out


def _map_renamed(flags: dict[str, Any], known: dict[str, str]) -> dict[str, Any]:
    out = dict(flags)
    backends = "--cuda-graph-backend-decode" in known and "--cuda-graph-backend-prefill" in known
    if "disable-cuda-graph" in out and backends and out.pop("disable-cuda-graph") is True:
        out.setdefault("cuda-graph-backend-decode", "disabled")
        out.setdefault("cuda-graph-backend-prefill", "disabled")
    if "cuda-graph-max-bs" in out and "--cuda-graph-max-bs-decode" in known:
        out["cuda-graph-max-bs-decode"] = out.pop("cuda-graph-max-bs")
    elif "cuda-graph-max-bs-decode" in out and "--cuda-graph-max-bs-decode" not in known:
        out["cuda-graph-max-bs"] = out.pop("cuda-graph-max-bs-decode")
    if "enable-dp-attention" in out and "--attn-dp-size" in known and out.pop("enable-dp-attention") is True:
        if "dp-size" not in out:
            raise SGLangArgsError("SGLang flag --enable-dp-attention needs dp_size to map to --attn-dp-size")
        out["attn-dp-size"] = out.pop("dp-size")
    elif "attn-dp-size" in out and "--attn-dp-size" not in known:
        out["dp-size"] = out.pop("attn-dp-size")
        out["enable-dp-attention"] = True
    return out


def _values(flag: str, kind: str, value: Any, version: str) -> list[str]:
    if isinstance(value, bool):
        if kind == "bool":
            return [flag] if value else []
        return [flag, "true" if value else "false"]
    if kind == "bool":
        raise SGLangArgsError(f"SGLang {version} flag {flag} is a switch: give true or false, not {value!r}")
    if isinstance(value, (list, tuple)):
        if kind != "list":
            raise SGLangArgsError(f"SGLang {version} flag {flag} takes one value, not a list ({value!r})")
        if not value:
            return []
        return [flag, *(_scalar(flag, item, version) for item in value)]
    return [flag, _scalar(flag, value, version)]


def _scalar(flag: str, value: Any, version: str) -> str:
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    if isinstance(value, (list, tuple)):
        raise SGLangArgsError(f"SGLang {version} flag {flag}: nested list {value!r} cannot be rendered")
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def render_argv(profile: dict[str, Any], version: str) -> list[str]:
    """The argv (without the launcher) for ``profile`` on SGLang ``version``; errors name the flag."""
    known = known_flags(version)
    flags = _map_renamed(normalize(profile), known)
    unknown = sorted(f"--{name}" for name, value in flags.items() if f"--{name}" not in known and value is not None)
    if unknown:
        raise SGLangArgsError(f"SGLang {version} does not know the flag(s) {', '.join(unknown)}")
    argv: list[str] = []
    for name, value in flags.items():
        if value is None:
            continue
        flag = f"--{name}"
        argv.extend(_values(flag, known[flag], value, version))
    return argv


def merge_profiles(*layers: dict[str, Any] | None) -> dict[str, Any]:
    """Later layers win, key by key, after spelling is normalized; ``None`` in a layer removes the flag."""
    out: dict[str, Any] = {}
    for layer in layers:
        if layer:
            out.update(normalize(layer))
    return {name: value for name, value in out.items() if value is not None}
