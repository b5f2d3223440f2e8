# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One way for the tests to run Ansible's commands (``ansible-playbook``, ``ansible``,
``ansible-inventory``) against this checkout; import it as ``from lib.playbook import ...``
(pyproject.toml puts tests/ on pytest's pythonpath).

- :func:`ansible_settings`: the environment every Ansible run of the tests gets, said once here: this
  checkout's ansible.cfg and collection (collections/ansible_collections/gpufleet/sglang links to
  the checkout), the venv's commands first on PATH (as the Makefile exports it, so that a bare
  ``pytest`` runs what ``make`` runs), no colour. ansible-runner adds its ``envvars`` to the
  caller's environment itself: pass it ``ansible_settings()``, and :func:`runner_data_dir` makes
  its private data directory.
- :data:`CASES_PLAY`: a play that runs a test's case.yml once per case, so that several cases share one run.
- :func:`run_playbook` and :func:`run_tool`: run a command of the venv with that environment,
  its output captured, under a timeout that holds: at the deadline the command and every process
  it started (its own process group) are killed and the test fails with the tail of the output.
- :class:`Result`: ``rc``, ``stdout``, ``stderr``; ``expect(rc)`` fails the test with the tail
  of the output unless the command exited ``rc``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
# the venv's bin (sys.executable is its python, not resolved through the symlink)
BIN = Path(sys.executable).parent
DEFAULT_TIMEOUT_S = 300.0
TAIL_CHARS = 3000
# after the kill: how long to wait for the rest of the output (only a process that left the group can hold it)
DRAIN_S = 10.0


def ansible_settings() -> dict[str, str]:
    """The variables every Ansible run of the tests sets, on top of the caller's environment.

    Colour is off with ANSIBLE_NOCOLOR and ANSIBLE_FORCE_COLOR=0 both: Ansible lets a forced colour
    win over ``nocolor``, so one set outside (the Makefile's ``ANSIBLE_FORCE_COLOR ?= 0`` takes one
    from the caller) would put escape codes into the output the tests read.
    """
    return {
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_COLLECTIONS_PATH": str(REPO / "collections"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", "")]),
    }


# One playbook, several cases: the play runs project/case.yml (which the test writes next to play.yml) once
# for each element of the extra var ``cases``, with ``case`` set to it (each needs a ``name``). A case's tasks
# record their own outcome (a block whose rescue records the failure), so a case that fails does not stop
# the next one. One ansible-playbook run costs about a second of CPU before its first task
# (docs/test-hosts.md): cases that need nothing of each other share a run.
CASES_PLAY = """
- name: One case after another
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Run each case
      ansible.builtin.include_tasks: case.yml
      loop: "{{ cases }}"
      loop_control:
        loop_var: case
        label: "{{ case.name }}"
"""


def runner_data_dir(tmp_path: Path, play: str) -> Path:
    """A new ansible-runner private data directory under ``tmp_path`` (``runner-0``, ``runner-1``, ... in the
    order of the runs) with ``play`` as project/play.yml: pass ``playbook="play.yml"``."""
    pdd = tmp_path / f"runner-{len(list(tmp_path.glob('runner-*')))}"
    (pdd / "project").mkdir(parents=True)
    (pdd / "project" / "play.yml").write_text(play)
    return pdd


def environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The caller's environment with :func:`ansible_settings` and then ``env`` (a test's own variables) over it."""
    return {**os.environ, **ansible_settings(), **(env or {})}


def tail(stdout: str, stderr: str, chars: int = TAIL_CHARS) -> str:
    """The last ``chars`` characters of stdout and of stderr, each under a line that says which and how much."""
    parts = [
        f"--- {name}: last {min(len(text), chars)} of {len(text)} characters ---\n{text[-chars:]}"
        for name, text in (("stdout", stdout), ("stderr", stderr))
        if text
    ]
    return "\n".join(parts) or "(no output)"


@dataclass(frozen=True)
class Result:
    """A finished command: its argv, exit status and captured output."""

    argv: tuple[str, ...]
    rc: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        """stdout and then stderr, for tests that look for a message wherever Ansible printed it."""
        return self.stdout + self.stderr

    def tail(self, chars: int = TAIL_CHARS) -> str:
        return tail(self.stdout, self.stderr, chars)

    def expect(self, rc: int = 0) -> Result:
        """This result if the command exited ``rc``; else the test fails with the command and its output's tail."""
        if self.rc != rc:
            pytest.fail(f"{' '.join(self.argv)}\nexited {self.rc}, not {rc}:\n{self.tail()}", pytrace=False)
        return self


def run_tool(
    tool: str,
    *args: str | Path,
    env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    cwd: Path | None = None,
) -> Result:
    """Run the venv's command ``tool`` (``ansible``, ``ansible-inventory``, ...) with ``args`` in ``cwd``
    (default: the checkout) and the :func:`environment` with ``env``; wait at most ``timeout`` seconds.

    The command runs in a process group of its own; at the deadline the whole group is killed (Ansible's
    workers and the modules they run with it) and the test fails with what the command had printed.
    """
    argv = (str(BIN / tool), *map(str, args))
    with subprocess.Popen(
        argv,
        cwd=cwd or REPO,
        env=environment(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            try:
                stdout, stderr = proc.communicate(timeout=DRAIN_S)
            except subprocess.TimeoutExpired:
                stdout, stderr = "", f"(no output: a process outside the group held the pipes {DRAIN_S:g} s on)"
            pytest.fail(
                f"{' '.join(argv)}\ndid not finish in {timeout:g} s; it and the processes it started were killed:\n"
                + tail(stdout, stderr),
                pytrace=False,
            )
    return Result(argv, proc.returncode, stdout, stderr)


def run_playbook(
    playbook: str | Path,
    *,
    inventory: str | Path,
    extra_vars: Mapping[str, object] | None = None,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    check: bool = False,
    timeout: float = DEFAULT_TIMEOUT_S,
    cwd: Path | None = None,
) -> Result:
    """``ansible-playbook -i inventory [-e extra_vars as JSON] [--check] args playbook`` through :func:`run_tool`.

    ``inventory``: a path or an inline host list (``"localhost,"``); ``extra_vars`` go as one JSON
    document, so their types hold (``-e k=v`` would make every value a string); ``args``: any other
    options (``--tags``, ``--limit``, ``-v``). A relative ``playbook`` is taken from ``cwd``.
    """
    options = ["-i", str(inventory)]
    if extra_vars:
        options += ["-e", json.dumps(dict(extra_vars))]
    if check:
        options.append("--check")
    return run_tool("ansible-playbook", *options, *args, playbook, env=env, timeout=timeout, cwd=cwd)


def rollout_play() -> dict:
    """playbooks/sglang.yml's rollout play (the one with `serial`; the play before it puts the nodes in order)."""
    plays = yaml.safe_load((REPO / "playbooks" / "sglang.yml").read_text(encoding="utf-8"))
    (play,) = [p for p in plays if "serial" in p]
    return play


def rollout_batch_vars(max_unavailable: object) -> dict:
    """The rollout play's own vars its `serial` is templated from, with ``max_unavailable`` set."""
    own = rollout_play()["vars"]
    return {
        "sglang_rollout_max_unavailable": max_unavailable,
        "sglang_rollout_serial": own["sglang_rollout_serial"],
        "__rollout_steady_count": own["__rollout_steady_count"],
    }


def recorded_case(name: str, steps: list[dict], out: str) -> dict:
    """One task running ``steps`` as case ``name`` and writing its outcome to ``out`` as JSON:
    ``{"failed": false}``, or ``failed``, the failed task's name, its ``msg`` and ``msgs`` (that ``msg`` and,
    for a looped task, each item's). Many cases then run in one ``ansible-playbook`` (about a second of CPU
    before its first task), each read back by name."""
    return {
        "name": f"Case {name}",
        "block": [
            *steps,
            {
                "name": "Record the pass",
                "ansible.builtin.copy": {"content": '{"failed": false}', "dest": out, "mode": "0644"},
            },
        ],
        "rescue": [
            {
                "name": "Record the failure",
                "ansible.builtin.copy": {
                    "content": "{{ {'failed': true, 'task': ansible_failed_task.name, "
                    "'msg': ansible_failed_result.msg | default(''), "
                    "'msgs': [ansible_failed_result.msg | default('')] + (ansible_failed_result.results"
                    " | default([]) | map(attribute='msg', default='') | list)} | to_json }}",
                    "dest": out,
                    "mode": "0644",
                },
            }
        ],
    }
