# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Run one module of plugins/modules as Ansible runs it: a process given an args file, its result JSON
on stdout. The collection's module_utils come from collections/ (the checkout's symlink).

- :func:`run_module`: the module's exit status and result. A test adds only what its case needs:
  ``check`` (check mode), ``env`` (its own variables over the caller's environment), ``fsize``
  (RLIMIT_FSIZE in the module's process: a write that fails half-way), ``wrap`` (the command line
  that runs the module's argv: a private mount namespace, dropped capabilities).
- :func:`documented_options`: a module's or plugin's documented options, its doc fragments merged in.
- :func:`in_mount_namespace`: a ``wrap`` that runs a shell ``setup`` first in a private mount
  namespace (``unshare --mount``): a read-only bind mount, a tiny tmpfs.
"""

from __future__ import annotations

import importlib
import json
import os
import resource
import shlex
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
import yaml
from lib.playbook import DEFAULT_TIMEOUT_S, REPO, tail

Wrap = Callable[[list[str]], list[str]]


def run_module(
    module: Path,
    args: dict,
    workdir: Path,
    *,
    check: bool = False,
    env: Mapping[str, str] | None = None,
    fsize: int | None = None,
    wrap: Wrap | None = None,
) -> tuple[int, dict]:
    """The module's exit status and result, run on ``workdir/args.json``.

    A traceback anywhere in its output, a stdout that is not one JSON result, or a run past
    ``DEFAULT_TIMEOUT_S`` fails the test with the tail of the output.
    """
    args_file = workdir / "args.json"
    module_args = dict(args, _ansible_check_mode=True) if check else dict(args)
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": module_args}), encoding="utf-8")
    # The stand-ins the module runs (`#!/usr/bin/env python3`) get this interpreter too: with this
    # sys.path as PYTHONPATH, another python3 on PATH would read the wrong standard library
    # (a pytest of .venv-newest run without its bin/ on PATH: nvidia-smi's `import json` broke).
    environ = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(REPO / "collections"), *sys.path]),
        PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]),
    )
    environ.update(env or {})
    argv = [sys.executable, str(module), str(args_file)]
    if wrap is not None:
        argv = wrap(argv)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    try:
        proc = subprocess.run(
            argv,
            check=False,
            capture_output=True,
            text=True,
            env=environ,
            timeout=DEFAULT_TIMEOUT_S,
            preexec_fn=None if fsize is None else limit,
        )
    except subprocess.TimeoutExpired as expired:
        output = [
            text.decode(errors="replace") if isinstance(text, bytes) else text or ""
            for text in (expired.stdout, expired.stderr)
        ]
        pytest.fail(f"{shlex.join(argv)}\nran past {DEFAULT_TIMEOUT_S:g} s:\n{tail(*output)}", pytrace=False)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    try:
        result = json.loads(proc.stdout)
    except json.JSONDecodeError:
        pytest.fail(
            f"{shlex.join(argv)}\nexited {proc.returncode} with no JSON result:\n{tail(proc.stdout, proc.stderr)}",
            pytrace=False,
        )
    return proc.returncode, result


def in_mount_namespace(setup: str, *, exec_module: bool = True) -> Wrap:
    """A ``wrap`` for :func:`run_module`: ``sh -ec setup`` in a private mount namespace, then the module.

    The shell execs the module; with ``exec_module=False`` it runs it as its child instead, so that
    an EXIT trap of ``setup`` runs after the module (exec would drop the trap).
    """

    def wrap(argv: list[str]) -> list[str]:
        run = f"exec {shlex.join(argv)}" if exec_module else shlex.join(argv)
        return ["unshare", "--mount", "sh", "-ec", f"{setup}; {run}"]

    return wrap


def documented_options(documentation: str) -> dict[str, dict]:
    """A plugin's DOCUMENTATION options with those of its ``extends_documentation_fragment`` merged in
    as ansible-doc, validate-modules and the plugin loader merge them (an option of the plugin's own wins):
    this collection's fragments and ansible-core's (a name without a collection, such as
    ``connection_pipelining``)."""
    doc = yaml.safe_load(documentation)
    options: dict[str, dict] = {}
    for name in doc.get("extends_documentation_fragment") or []:
        parts = name.split(".")
        if len(parts) == 1:
            parts = ["ansible", "builtin", *parts]
        package = {
            ("gpufleet", "sglang"): "ansible_collections.gpufleet.sglang.plugins.doc_fragments",
            ("ansible", "builtin"): "ansible.plugins.doc_fragments",
        }.get((parts[0], parts[1]))
        assert package, f"fragment {name} is neither this collection's nor ansible-core's"
        fragment = importlib.import_module(f"{package}.{parts[2]}")
        text = getattr(fragment.ModuleDocFragment, parts[3].upper() if len(parts) > 3 else "DOCUMENTATION")
        options.update(yaml.safe_load(text).get("options") or {})
    options.update(doc.get("options") or {})
    return options
