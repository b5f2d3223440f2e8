# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The argv check (docs/glossary.md): the installed SGLang release's own parser reads a server argv or
options file before anything is written or restarted. Standard library only; runs on the node.

The one implementation behind module ``sglang_argv_check``, which role sglang_server
(tasks/check_argv.yml) and the sglang_tune action (each candidate) both call. The parser can only
be built by the release venv's python (it imports torch and triton), so :func:`run` sends the text
of ``argv_check_script.py`` (a script, beside this file) to that python on stdin and reads the one
JSON object it prints. What comes back has every form of each API key masked (secret_mask): the
keys of the argv (``--api-key K``) and of the options file it names (``--config FILE``).
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from typing import Any

from ansible_collections.gpufleet.sglang.plugins.module_utils.common.secret_mask import SECRET_FLAGS, mask
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang import argv_check_script

# the checker's exit status: 0 accepted, 1 refused by the parser, 2 the parser could not be built
ACCEPTED, REFUSED, BROKEN = 0, 1, 2


class ArgvCheckError(RuntimeError):
    """The check could not be made (no python, no parser, no answer); the message says why, keys masked."""


def checker_text() -> str:
    """The text of the checker script sent to the release python."""
    return inspect.getsource(argv_check_script)


def _values(argv: list[str], flag: str) -> list[str]:
    """Every value ``flag`` has in ``argv``, written ``--flag VALUE`` or ``--flag=VALUE``."""
    found = [argv[i + 1] for i, word in enumerate(argv[:-1]) if word == flag]
    return found + [word[len(flag) + 1 :] for word in argv if word.startswith(flag + "=")]


def secrets_in(argv: list[str], config_text: str | None = None) -> list[str]:
    """The API keys an argv carries: values of ``--api-key``/``--admin-api-key`` (``--flag=value`` too)
    and of the same keys in the options file's JSON (``config_text``, else the file ``--config`` names)."""
    found = [value for name in SECRET_FLAGS for value in _values(argv, f"--{name}")]
    paths = _values(argv, "--config")
    if config_text is None and paths:
        try:
            with open(paths[0], encoding="utf-8") as handle:
                config_text = handle.read()
        except (OSError, UnicodeDecodeError):
            config_text = None  # the checker names the unreadable file itself
    try:
        options = json.loads(config_text) if config_text else {}
    except ValueError:
        options = {}
    if isinstance(options, dict):
        for name in SECRET_FLAGS:
            for key in (name, name.replace("-", "_")):
                if options.get(key) not in (None, "", False):
                    found.append(str(options[key]))
    return [secret for secret in dict.fromkeys(found) if secret]


def interpret(rc: int, stdout: str, stderr: str) -> dict[str, Any]:
    """The result of one checker run: ``{ok, stage, version, error, warnings}``.

    Raises ArgvCheckError for any other exit status: the parser could not be built (rc 2), or the
    checker crashed (a python without SGLang)."""
    lines = stdout.strip().splitlines()
    try:
        out = json.loads(lines[-1]) if lines else None
    except ValueError:
        out = None
    if not isinstance(out, dict):
        out = {}
    tail = stderr.strip()[-500:]
    if rc == ACCEPTED:
        warnings = out.get("warnings", [])
        return {"ok": True, "stage": "done", "version": out.get("version"), "error": "", "warnings": warnings}
    if rc == REFUSED:
        return {
            "ok": False,
            "stage": str(out.get("stage") or "parse"),
            "version": out.get("version"),
            "error": str(out.get("error") or tail or "SGLang's parser refused the argv and said nothing"),
            "warnings": out.get("warnings", []),
        }
    raise ArgvCheckError(f"SGLang's parser could not be built (rc {rc}): {out.get('error') or tail or 'no output'}")


Runner = Callable[..., Any]


def run(
    python: str,
    argv: list[str],
    *,
    config_text: str | None = None,
    env: dict[str, str] | None = None,
    timeout_s: float = 300,
    runner: Runner = subprocess.run,
) -> dict[str, Any]:
    """Check ``argv`` (with ``config_text`` given: ``--config FILE`` of that text, appended) with the
    parser of the SGLang that ``python`` imports; the masked result of :func:`interpret`.

    ``config_text`` goes to a private temporary directory (0700, file 0600), removed afterwards.
    Raises ArgvCheckError (masked) when ``python`` is missing, times out or cannot build the parser."""
    secrets = secrets_in(argv, config_text)
    if not os.path.exists(python):
        raise ArgvCheckError(f"{python} does not exist: cannot check the argv with SGLang's parser")
    tmp = tempfile.mkdtemp(suffix=".sglang-argv-check") if config_text is not None else None
    try:
        words = list(argv)
        if tmp is not None:
            path = os.path.join(tmp, "candidate.yaml")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(config_text or "")
            words += ["--config", path]
        try:
            # subprocess.run, not AnsibleModule.run_command: the parser needs a timeout, which run_command
            # lacks (ansible-test 2.21's pylint infers the default runner and flags the call)
            # pylint: disable-next=ansible-bad-function
            proc = runner(
                [python, "-", "--", *words],
                input=checker_text(),
                capture_output=True,
                text=True,
                env=dict(os.environ, **{str(k): str(v) for k, v in (env or {}).items()}),
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise ArgvCheckError(f"SGLang's parser did not answer within {timeout_s:g} s") from None
        try:
            result = interpret(proc.returncode, proc.stdout, proc.stderr)
        except ArgvCheckError as exc:
            raise ArgvCheckError(str(mask(str(exc), secrets))) from None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return mask(result, secrets)  # type: ignore[return-value]
