# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""tests/lib/playbook.py, the one way the tests run Ansible: a failing play gives its exit status and
its message in the failure text, a passing one gets the checkout's settings, the test's variables and
check mode, and a timeout kills the command with every process it started."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
import yaml
from lib.playbook import BIN, REPO, Result, ansible_settings, run_playbook, run_tool, runner_data_dir

LOCAL = "localhost,"  # an inline inventory: the play sets the local connection itself


def write_play(tmp_path: Path, tasks: list[dict]) -> Path:
    play = tmp_path / "play.yml"
    plays = [{"name": "Tiny", "hosts": "all", "connection": "local", "gather_facts": False, "tasks": tasks}]
    play.write_text(yaml.safe_dump(plays, sort_keys=False), encoding="utf-8")
    return play


def test_a_failing_play_exits_2_and_the_failure_text_has_its_message(tmp_path):
    play = write_play(tmp_path, [{"name": "Fail on purpose", "ansible.builtin.fail": {"msg": "tiny-play-broke-7f3a"}}])
    result = run_playbook(play, inventory=LOCAL, timeout=120)
    assert result.rc == 2, result.tail()
    with pytest.raises(pytest.fail.Exception) as failed:
        result.expect(0)
    text = str(failed.value)
    assert "tiny-play-broke-7f3a" in text
    assert "exited 2, not 0" in text
    assert str(play) in text  # the command line, to run it again by hand
    assert result.expect(2) is result


def test_a_play_gets_the_checkouts_settings_the_tests_variables_and_check_mode(tmp_path):
    shown = {
        "config": "{{ lookup('ansible.builtin.env', 'ANSIBLE_CONFIG') }}",
        "mark": "{{ lookup('ansible.builtin.env', 'GPUFLEET_LIB_TEST') }}",
        "check": "{{ ansible_check_mode }}",
        "count": "{{ count + 1 }}",  # an extra var keeps its type: 41 + 1, not '41' + 1
        "words": "{{ words | join('+') }}",
    }
    play = write_play(tmp_path, [{"name": "Show", "ansible.builtin.debug": {"msg": "{{ shown }}"}}])
    result = run_playbook(
        play,
        inventory=LOCAL,
        extra_vars={"shown": shown, "count": 41, "words": ["a b", "c'd"]},
        # a test's own variables, one of them over a setting of ansible.cfg (stdout_callback)
        env={"GPUFLEET_LIB_TEST": "from-the-test", "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json"},
        check=True,
        timeout=120,
    ).expect(0)
    msg = json.loads(result.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]["msg"]
    assert msg == {
        "config": str(REPO / "ansible.cfg"),
        "mark": "from-the-test",
        "check": True,
        "count": 42,
        "words": "a b+c'd",
    }
    assert "\x1b[" not in result.output  # no colour


def test_settings_put_the_venv_first_and_colour_off():
    env = ansible_settings()
    assert env["PATH"].split(os.pathsep, maxsplit=1)[0] == str(BIN)
    assert (env["ANSIBLE_NOCOLOR"], env["ANSIBLE_FORCE_COLOR"]) == ("1", "0")
    assert env["ANSIBLE_COLLECTIONS_PATH"] == str(REPO / "collections")


def alive(pid: int) -> bool:
    """Whether the process runs (a zombie waiting for its parent to read its status does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def test_a_timeout_holds_and_kills_what_the_command_started(tmp_path):
    # the command starts a child that would outlive it; both must be gone when the test fails
    code = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen(['sleep', '600'])\n"
        "print('CHILD', child.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    start = time.monotonic()
    with pytest.raises(pytest.fail.Exception) as failed:
        run_tool("python", "-c", code, timeout=3, cwd=tmp_path)
    took = time.monotonic() - start
    assert took < 15, f"the 3 s timeout took {took:.1f} s"
    text = str(failed.value)
    assert "did not finish in 3 s" in text
    child = re.search(r"CHILD (\d+)", text)  # what it printed before the deadline is in the failure text
    assert child, text
    pid = int(child.group(1))
    deadline = time.monotonic() + 5  # the killed child is reaped by whoever inherits it
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(pid), f"the command's child {pid} outlived the timeout"


def test_the_tail_is_the_end_of_each_stream():
    result = Result(("x",), 1, "a" * 5000 + "END-OUT", "err-start " + "b" * 5000 + "END-ERR")
    text = result.tail(100)
    assert "END-OUT" in text
    assert "END-ERR" in text
    assert "err-start" not in text
    assert "last 100 of 5007 characters" in text
    assert Result(("x",), 0, "", "").tail() == "(no output)"


def test_ansible_runner_runs_in_its_data_dirs_with_the_settings(tmp_path):
    """The integration tests' way (ansible-runner): each run its own data dir, the same settings."""
    import ansible_runner  # noqa: PLC0415 - only this test drives ansible-runner

    play = yaml.safe_dump(
        [
            {
                "name": "Runner",
                "hosts": "all",
                "gather_facts": False,
                "tasks": [{"ansible.builtin.debug": {"msg": "{{ lookup('ansible.builtin.env', 'ANSIBLE_CONFIG') }}"}}],
            }
        ]
    )
    dirs = [runner_data_dir(tmp_path, play), runner_data_dir(tmp_path, play)]
    assert [d.name for d in dirs] == ["runner-0", "runner-1"]
    assert (dirs[1] / "project" / "play.yml").read_text() == play
    runner = ansible_runner.run(
        private_data_dir=str(dirs[1]),
        playbook="play.yml",
        inventory="localhost ansible_connection=local",
        envvars=ansible_settings(),
        quiet=True,
        timeout=120,
    )
    output = runner.stdout.read()
    assert runner.rc == 0, output[-3000:]
    msgs = [e["event_data"]["res"]["msg"] for e in runner.events if e.get("event") == "runner_on_ok"]
    assert msgs == [str(REPO / "ansible.cfg")]
    assert "\x1b[" not in output  # ansible-runner runs it on a terminal: colour would be on without the settings
