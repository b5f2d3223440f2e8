# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Check an SGLang server argv with the installed SGLang's own argument parser (the argv check's script).

This file is a script for the release venv's python, not a library: module ``sglang_argv_check``
(core in ``argv_check.py``) sends its text to that python on stdin; nothing imports it but the
tests. Standard library only, no ``ansible`` import: it runs outside Ansible's interpreter.

    python - -- --model-path M --tp 8 ...      < argv_check_script.py
    python - -- --config /etc/sglang/sglang-server.yaml   < argv_check_script.py

It imports ``sglang.srt.server_args``, builds ``argparse.ArgumentParser`` with
``ServerArgs.add_cli_args`` (what ``sglang.launch_server`` does) and parses the
argv. With ``--config FILE`` it first merges the file into the argv with that
version's own ``ConfigArgumentMerger``, as ``prepare_server_args`` does (the
merger moved from ``sglang.srt`` to ``sglang.srt.utils`` in later releases; both
are tried). It prints the parser's own words; the caller (argv_check.py) masks every
form of the API keys with secret_mask before anything is returned. It does NOT run
``ServerArgs.__post_init__`` (that probes GPUs and the model), so it catches unknown flags,
bad choices and bad types, not semantic
conflicts that SGLang only finds at startup.

Prints one JSON object on stdout:
  {"ok": bool, "version": str|null, "error": str|null, "warnings": [str],
   "stage": "import"|"config"|"parse"|"done"}
Exit status: 0 accepted, 1 refused by the parser, 2 the parser could not be built.

``--dump-flags`` prints every long option of the parser (used to generate and check
the collection's flag table against real wheels).

Limits: importing ``sglang.srt.server_args`` needs SGLang's runtime dependencies, torch and
triton among them (measured on 0.5.9 and 0.5.23 wheels; a CPU-only host imports it fine, no GPU
is touched), so it runs with the release venv's python on the node.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import sys
import traceback
from typing import Any


class _ParserRefused(Exception):
    pass


class _CheckingParser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # type: ignore[override]
        raise _ParserRefused(message)


def _result(ok: bool, stage: str, version: str | None, error: str | None, warnings: list[str]) -> dict:
    return {
        "ok": ok,
        "stage": stage,
        "version": version,
        "error": error,
        "warnings": warnings,
    }


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def _build_parser() -> tuple[argparse.ArgumentParser, str | None]:
    server_args = importlib.import_module("sglang.srt.server_args")
    try:
        version = importlib.import_module("sglang.version").__version__
    except Exception:
        version = None
    parser = _CheckingParser(prog="sglang.launch_server")
    server_args.ServerArgs.add_cli_args(parser)
    return parser, version


def dump_flags() -> tuple[int, dict]:
    """Every long option the parser knows, with how many values it takes."""
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
        parser, version = _build_parser()
    flags = {}
    for action in parser._actions:
        for option in action.option_strings:
            if option.startswith("--") and option != "--help":
                flags[option] = {"nargs": action.nargs, "dest": action.dest}
    return 0, {"version": version, "flags": flags}


def _merge_config(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """The argv after ``--config FILE`` is merged in, by the installed SGLang's own merger."""
    try:
        merger_module = importlib.import_module("sglang.srt.utils.server_args_config_parser")
    except ImportError:
        merger_module = importlib.import_module("sglang.srt.server_args_config_parser")
    return merger_module.ConfigArgumentMerger(parser).merge_config_with_args(argv)


def check(argv: list[str]) -> tuple[int, dict]:
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
            parser, version = _build_parser()
    except Exception as exc:
        where = traceback.extract_tb(exc.__traceback__)[-1]
        message = (
            f"cannot build the SGLang argument parser: {type(exc).__name__}: {exc} (at {where.filename}:{where.lineno})"
        )
        return 2, _result(False, "import", None, message, _lines(captured.getvalue())[-20:])
    if "--config" in argv:
        captured = io.StringIO()
        try:
            with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
                argv = _merge_config(parser, argv)
        except Exception as exc:  # the merger raises ValueError, yaml errors, OSError
            message = f"SGLang {version} cannot read the --config file: {type(exc).__name__}: {exc}"
            return 1, _result(False, "config", version, message, _lines(captured.getvalue()))
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
            parser.parse_args(argv)
    except _ParserRefused as exc:
        lines = _lines(captured.getvalue())
        return 1, _result(False, "parse", version, f"SGLang {version} refuses the argv: {exc}", lines)
    except SystemExit as exc:  # an action that exits (e.g. --help, --version)
        lines = _lines(captured.getvalue())
        message = f"SGLang {version} parser exited ({exc.code})"
        return 1, _result(False, "parse", version, message, lines)
    return 0, _result(True, "done", version, None, _lines(captured.getvalue()))


def main() -> int:
    args = sys.argv[1:]
    if args == ["--dump-flags"]:
        rc, result = dump_flags()
    elif args[:1] == ["--"]:
        rc, result = check(args[1:])
    else:
        usage = "usage: argv_check_script.py -- ARGV... | --dump-flags"
        rc, result = 2, _result(False, "usage", None, usage, [])
    sys.stdout.write(json.dumps(result, sort_keys=True) + "\n")
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
