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
<-> ``attn_dp_size``. ``fast_load: true`` (not a flag of SGLang: the collection's own key) becomes the
release's fastest safe loader options (``fast_load_config``): ``--model-loader-extra-config
{"enable_multithread_load": true}`` where the version's parser has that flag and its multithreaded
loader keeps memory bounded (``MULTITHREAD_LOAD_FROM``), nothing on a release without them.
Any flag the version's parser does not know is refused, naming the flag and the version. The known
flags per version come from ``sglang_flag_table`` (dumped from the real parsers of released wheels).
For a version between two dumped ones, a flag is known only if both neighbours know it; the
installed parser has the last word on the node.

No value may read as an option (``option_in_value``): SGLang's ``--config`` merge turns
``key: value`` into ``--key value`` and argparse then takes a value such as ``--admin-api-key=x``
(a list item, or after a flag whose value is optional) as that option, past every check made on
the keys. Secret flags and ``--config`` are never profile keys (``check_profile``).
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

from ansible_collections.gpufleet.sglang.plugins.module_utils.common.secret_mask import SECRET_FLAGS
from ansible_collections.gpufleet.sglang.plugins.module_utils.common.version_order import (
    VersionKey,
    public_key,
    version_key,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.flag_table import FLAGS, VERSIONS


class SGLangArgsError(ValueError):
    """A profile cannot be rendered for the version; the message names what is wrong."""


# Short spellings people write (argparse's prefix matching accepts them) -> canonical flag.
ALIASES = {"tp": "tp-size", "dp": "dp-size", "pp": "pp-size", "ep": "ep-size"}

# Flags the role sets itself: --config names the options file it writes.
RESERVED_FLAGS = ("config",)

# The collection's key for the fastest safe loader options of a release (docs/sglang-versions-and-flags.md,
# "Loading the checkpoint"): the extra config's multithreaded safetensors loader reads shards in parallel
# threads (8 by default); before 0.5.9 it held every shard it had read in memory until the model took
# it (unbounded on a checkpoint of hundreds of GB, per TP rank), from 0.5.9 at most num_threads + 2.
FAST_LOAD_KEY = "fast-load"
MULTITHREAD_LOAD_FROM = "0.5.9"
LOADER_EXTRA_CONFIG = "model-loader-extra-config"
# What argparse (Python 3.11 to 3.13) takes as a negative number, hence as a value, not an option.
_NEGATIVE_NUMBER = re.compile(r"-\d+|-\d*\.\d+")
# A profile key: a flag name with dashes or underscores, with or without the leading "--".
_KEY_RE = re.compile(r"(?:--)?[A-Za-z0-9][A-Za-z0-9_-]*")
_SCALARS = (str, int, float)

# An SGLang release names major.minor.patch; its PEP 440 suffixes are spelled out (rc1, .post1, .dev1, +cu128).
# "0.5.23-1" (PEP 440's implicit post-release) reads like a build tag and is refused.
_SGLANG_VERSION_RE = re.compile(r"\s*v?[0-9]+\.[0-9]+\.[0-9]+(?!\.?[0-9]|-[0-9]).*", re.ASCII | re.DOTALL)


def parse_version(version: str) -> VersionKey:
    """The PEP 440 key (version_order.version_key) of an SGLang version; refuses anything it cannot order."""
    text = str(version)
    key = version_key(text) if _SGLANG_VERSION_RE.fullmatch(text) else None
    if key is None:
        raise SGLangArgsError(
            f"SGLang version {version!r} is not a release version like 0.5.23, 0.5.23rc1 or 0.5.12.post1"
        )
    return key


def known_flags(version: str) -> dict[str, str]:
    """{'--flag': kind} the version's parser accepts (kind: bool, value, optional, list)."""
    # a local build (0.5.23+cu128) has the parser of its public version
    wanted = public_key(parse_version(version))
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


def _is_dash(char: str) -> bool:
    """ASCII '-', a Unicode dash (category Pd) or a minus sign: what reads as an option's prefix."""
    return char in "-\u2212\ufe63\uff0d" or unicodedata.category(char) == "Pd"


def option_in_value(value: str) -> str | None:
    """Why ``value`` may not be the value of a flag (it is, or reads as, an option), or None.

    argparse reads a word that starts with '-' as an option unless it is a plain negative number;
    ``--name=x`` and any unambiguous prefix of a long option (``--admin-api``) are that option, and
    ``-h...`` is the help option. A word that starts with blanks or a Unicode dash is a value to
    argparse today, but is one trim or normalisation away from an option: refused as well.
    """
    text = value.lstrip()
    if not text or not _is_dash(text[0]):
        return None
    if text == value and _NEGATIVE_NUMBER.fullmatch(value):
        return None
    lead = 0
    while lead < len(text) and _is_dash(text[lead]):
        lead += 1
    plain = "-" * lead + text[lead:]
    name = plain.split("=", 1)[0]
    matches = sorted(
        flag for flag in FLAGS if flag == name or (name.startswith("--") and len(name) > 2 and flag.startswith(name))
    )
    if name in FLAGS:
        what = f"it is the SGLang option {name}"
    elif len(matches) == 1:
        what = f"argparse completes it to the SGLang option {matches[0]}"
    elif matches:
        what = f"argparse reads it as an abbreviation of an SGLang option ({', '.join(matches[:3])}, ...)"
    elif lead == 1 and plain.startswith("-h"):
        what = "argparse reads it as the help option -h (the server would print its usage and exit)"
    else:
        what = "argparse reads a word starting with '-' as an option (only plain negative numbers like -1 are values)"
    if text != value:
        what += "; it starts with blanks that any trimming removes"
    if plain != text:
        what += f"; it starts with the dash U+{ord(text[0]):04X} that reads as '-'"
    return what


def shown_value(value: str) -> str:
    """The value for an error message: its leading word up to '=' or a blank, at most 40 characters;
    the rest (after ``--api-key=`` or ``--api-key `` comes a key) is never shown."""
    text = value.lstrip()
    cut = next((i for i, char in enumerate(text) if char == "=" or char.isspace()), len(text))
    head = text[: min(cut, 40)]
    return repr(("<blanks>" if text != value else "") + head + ("<hidden>" if len(head) < len(text) else ""))


def check_value(where: str, key: str, value: str) -> None:
    """Refuse a value that reads as an option (``option_in_value``); the message names key and value."""
    why = option_in_value(value)
    if why is not None:
        raise SGLangArgsError(
            f"{where}: the value {shown_value(value)} of {key} looks like an option: {why}. SGLang's --config "
            "merge and its argument parser would read it as an option, not as the value of this flag; give the "
            "option as a key of its own (secrets only through sglang_server_api_key)"
        )


def check_profile(profile: Any, where: str = "SGLang flags") -> None:
    """The shape of a profile, version-independent: keys are flag names (never a secret flag or --config),
    values are None, switches, numbers, text, lists of those, or dicts (rendered as JSON), and no text
    reads as an option. ``where`` says whose profile it is (a file, a variable) in the message."""
    if not isinstance(profile, dict):
        raise SGLangArgsError(f"{where} must be a dict of flag: value, got {type(profile).__name__}")
    for key, value in profile.items():
        if not isinstance(key, str) or not _KEY_RE.fullmatch(key):
            raise SGLangArgsError(
                f"{where}: key {shown_value(str(key))} is not a flag name "
                "(letters, digits, '-' and '_', e.g. tp or moe_runner_backend)"
            )
        name = _flag_name(key)
        if value is None or value is False:
            continue  # removes the flag (merge_profiles) or renders nothing
        if name in SECRET_FLAGS:
            raise SGLangArgsError(
                f"{where}: key {key!r} sets --{name}, which must not be set in profiles, tuned profiles or extra args "
                "(they show in facts and logs); set sglang_server_api_key instead"
            )
        if name in RESERVED_FLAGS:
            raise SGLangArgsError(
                f"{where}: key {key!r} sets --{name}, which role sglang_server sets itself "
                "(its options file); remove it"
            )
        items = value if isinstance(value, (list, tuple)) else [value]
        for item in items:
            if item is None and value is not item:
                raise SGLangArgsError(f"{where}: key {key!r} has a null item in its list")
            if isinstance(item, dict) or item is None or isinstance(item, bool):
                continue
            if isinstance(item, (list, tuple)):
                raise SGLangArgsError(f"{where}: key {key!r} has a nested list, which cannot be rendered")
            if not isinstance(item, _SCALARS):
                raise SGLangArgsError(
                    f"{where}: key {key!r} has a value of type {type(item).__name__}; give text, a number, true/false, "
                    "a list or a dict"
                )
            check_value(where, f"key {key!r}", str(item))


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


def fast_load_config(version: str, known: dict[str, str]) -> dict[str, Any]:
    """The loader's extra config ``fast_load`` sets on ``version`` (empty where the release lacks it)."""
    if f"--{LOADER_EXTRA_CONFIG}" not in known or public_key(parse_version(version)) < parse_version(
        MULTITHREAD_LOAD_FROM
    ):
        return {}
    return {"enable_multithread_load": True}


def _map_fast_load(flags: dict[str, Any], known: dict[str, str], version: str) -> dict[str, Any]:
    """``fast_load`` replaced by the release's loader options; an extra config given as a dict keeps its
    own keys over them, one given as text (JSON the user wrote) is left as it is."""
    out = dict(flags)
    if FAST_LOAD_KEY not in out:
        return out
    wanted = out.pop(FAST_LOAD_KEY)
    if wanted is None or wanted is False:
        return out
    if wanted is not True:
        raise SGLangArgsError(f"fast_load is a switch of the collection: give true or false, not {wanted!r}")
    extra = fast_load_config(version, known)
    given = out.get(LOADER_EXTRA_CONFIG)
    if extra and (given is None or isinstance(given, dict)):
        out[LOADER_EXTRA_CONFIG] = {**extra, **(given or {})}
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
    check_profile(profile)
    flags = _map_fast_load(_map_renamed(normalize(profile), known), known, version)
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
