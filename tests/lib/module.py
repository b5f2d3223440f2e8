# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Run one module of plugins/modules as Ansible runs it: a process given an args file, its result JSON
on stdout. The collection's module_utils come from collections/ (the checkout's symlink)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from lib.playbook import REPO


def run_module(module: Path, args: dict, workdir: Path, *, check: bool = False) -> tuple[int, dict]:
    """The module's exit status and result; a traceback anywhere in its output fails the test."""
    args_file = workdir / "args.json"
    module_args = dict(args, _ansible_check_mode=True) if check else dict(args)
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": module_args}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "collections"), *sys.path]))
    proc = subprocess.run(
        [sys.executable, str(module), str(args_file)], check=False, capture_output=True, text=True, env=env
    )
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    return proc.returncode, json.loads(proc.stdout)
