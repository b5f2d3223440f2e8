# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Render the SGLang server's option file and the unit's environment files (stdlib only).

Options file (``--config FILE.yaml``, SGLang >= 0.5.3; see docs/sglang-server-hardening.md): SGLang
reads it with ``yaml.safe_load`` and turns each ``key: value`` back into ``--key value`` before its
argparse parser runs; ``true`` on a switch gives the bare ``--key``, a list gives ``--key v1 v2``.
We write every key with dashes, exactly as the flag (``tp-size``), every value as a string, switches
as ``true``, in the JSON subset of YAML: any YAML parser and ``json`` read it the same way, and no
value can change type (``"0755"``, ``"no"``, ``"1e3"`` stay strings).

Environment files (systemd ``EnvironmentFile=``, read by ``parse_env_file_internal`` in systemd's
``src/basic/env-file.c``; docs/sglang-server-hardening.md): one ``NAME="value"`` per line, the value
double-quoted with ``\\``, ``"``, `````` ` `````` and ``$`` escaped. Inside double quotes systemd
keeps every character but ``"`` and ``\\``, and turns ``\\`` before one of ``"\\`$`` into that
character, so the value reads back exactly. Refused, with a message that names the variable, never
the value: a name that is not an identifier (``FOO\\n`` included), a value with a character that is
not printable (a NUL ends the file for systemd, a newline or carriage return would end the line
for any reader of the file but systemd's quoted state), and a header line with such a character or
ending with ``\\`` (systemd before 254 continues such a comment onto the next line, which would
swallow the first variable).
"""

from __future__ import annotations

import json
import re
from typing import Any

from ansible_collections.gpufleet.sglang.plugins.module_utils.common.secret_mask import SECRET_FLAGS
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.args import (
    RESERVED_FLAGS,
    known_flags,
    option_in_value,
    shown_value,
)

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ServerConfigError(ValueError):
    """The options or environment cannot be written safely; the message names the key, not the value."""


def check_text(where: str, value: str) -> None:
    """Refuse a character that is not printable (control, line/paragraph separators, BOM, surrogates)."""
    for index, char in enumerate(value):
        if not char.isprintable():
            raise ServerConfigError(
                f"{where} contains the non-printable character U+{ord(char):04X} at position {index}; "
                "control characters and line separators are refused (a newline would inject a line)"
            )


def supports_config(version: str) -> bool:
    """True when the version's parser has ``--config`` (per the collection's flag table)."""
    return "--config" in known_flags(version)


def config_from_argv(argv: list[str], kinds: dict[str, str]) -> dict[str, Any]:
    """``['--tp-size', '8', '--enable-metrics']`` -> ``{'tp-size': '8', 'enable-metrics': True}``.

    ``kinds`` maps each flag of the version to bool/value/optional/list (sglang_args.known_flags).
    A list flag takes the words up to the next known flag. A value that reads as an option
    (sglang_args.option_in_value: ``--admin-api-key=x``, ``--api``, ``-h``) is refused: SGLang's
    config merge would hand it to argparse as that option.
    """
    config: dict[str, Any] = {}
    index = 0
    while index < len(argv):
        flag = argv[index]
        kind = kinds.get(flag)
        if kind is None:
            raise ServerConfigError(f"SGLang option {shown_value(flag)} is not a flag this version knows")
        key = flag[2:]
        if key in config:
            raise ServerConfigError(f"SGLang flag {flag} is given twice")
        index += 1
        if kind == "bool":
            config[key] = True
            continue
        values = []
        while index < len(argv) and (kind == "list" or not values) and argv[index] not in kinds:
            why = option_in_value(argv[index])
            if why is not None:
                raise ServerConfigError(
                    f"SGLang flag {flag}: the value {shown_value(argv[index])} looks like an option ({why}); "
                    f"SGLang's config merge would hand it to argparse as an option, not as the value of {flag}"
                )
            values.append(argv[index])
            index += 1
        if not values:
            raise ServerConfigError(f"SGLang flag {flag} has no value")
        config[key] = values if kind == "list" else values[0]
    return config


def render_config(argv: list[str], version: str, api_key: str = "") -> str:
    """The text of the options file for ``argv`` on SGLang ``version``, with the API key if any."""
    for word in argv:
        check_text("an SGLang option", word)
    kinds = known_flags(version)
    config = config_from_argv(argv, kinds)
    given = [f"--{key}" for key in SECRET_FLAGS if key in config]
    if given:
        raise ServerConfigError(
            f"{', '.join(given)} must not be set in profiles or extra args (they show in facts and logs); "
            "set sglang_server_api_key instead"
        )
    reserved = [f"--{key}" for key in RESERVED_FLAGS if key in config]
    if reserved:
        raise ServerConfigError(f"{', '.join(reserved)} is set by role sglang_server itself; remove it from the argv")
    if api_key:
        check_text("sglang_server_api_key", api_key)
        config["api-key"] = api_key
    return json.dumps(config, indent=2, ensure_ascii=False) + "\n"


def render_env_file(env: dict[str, Any], header: str = "") -> str:
    """``NAME="value"`` lines for systemd's EnvironmentFile=, sorted by name; refuses unsafe input."""
    if not isinstance(env, dict):
        raise ServerConfigError(f"environment must be a dict of NAME: value, got {type(env).__name__}")
    lines = []
    for line in header.split("\n") if header.rstrip("\n") else []:
        check_text("the environment file's header", line)
        if line.endswith("\\"):
            raise ServerConfigError(
                "a line of the environment file's header ends with '\\', which continues the comment onto the "
                "next line for systemd before 254; remove the backslash"
            )
        lines.append(f"# {line}" if line else "#")
    for name in sorted(env, key=str):
        value = env[name]
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
            raise ServerConfigError(
                f"environment variable name {str(name)[:60]!r} is not a valid identifier (letters, digits and '_', "
                "not starting with a digit)"
            )
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ServerConfigError(
                f"environment variable {name} must be a string or a number, not {type(value).__name__} "
                '(quote it: "1", "true")'
            )
        text = str(value)
        check_text(f"environment variable {name}", text)
        escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`").replace("$", "\\$")
        lines.append(f'{name}="{escaped}"')
    return "\n".join(lines) + "\n"
