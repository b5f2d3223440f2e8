# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""tests/lib/module.py, the one way the unit tests run a module: the args reach it as Ansible passes
them, the collection's module_utils import, a test's variables, file size limit and wrapper apply to
the module's process, and a traceback, a stdout that is no JSON result or a hung module fail the test."""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from pathlib import Path

import lib.module
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lib.fuzz import examples
from lib.module import in_mount_namespace, run_module

# a module that says what it was given: its args, argv, two variables, whether module_utils import
ECHO = textwrap.dedent(
    """\
    import json, os, sys
    try:
        from ansible_collections.gpufleet.sglang.plugins.module_utils.common import version_order  # noqa: F401
        imports = True
    except ImportError:
        imports = False
    with open(sys.argv[1], encoding="utf-8") as handle:
        args = json.load(handle)["ANSIBLE_MODULE_ARGS"]
    size = args.get("write")
    if size:
        try:
            with open(args["path"], "wb") as out:
                out.write(b"x" * size)
            wrote = "all"
        except OSError as err:
            wrote = err.strerror
    else:
        wrote = None
    print(json.dumps({
        "args": args, "argv": sys.argv, "imports": imports, "wrote": wrote,
        "mark": os.environ.get("GPUFLEET_LIB_MODULE_TEST"), "home": os.environ.get("HOME"),
    }))
    sys.exit(int(args.get("exit", 0)))
    """
)


def module(tmp_path: Path, body: str = ECHO) -> Path:
    path = tmp_path / "echo_module.py"
    path.write_text(body, encoding="utf-8")
    return path


def test_the_module_gets_its_args_file_and_the_collections_module_utils(tmp_path):
    rc, result = run_module(module(tmp_path), {"name": "x", "exit": 3}, tmp_path)
    assert rc == 3
    assert result["args"] == {"name": "x", "exit": 3}
    assert result["argv"][1] == str(tmp_path / "args.json")
    assert result["imports"] is True
    assert json.loads((tmp_path / "args.json").read_text(encoding="utf-8")) == {
        "ANSIBLE_MODULE_ARGS": {"name": "x", "exit": 3}
    }


def test_check_mode_is_the_args_check_mode_flag(tmp_path):
    args = {"name": "x"}
    assert run_module(module(tmp_path), args, tmp_path, check=True)[1]["args"] == {
        "name": "x",
        "_ansible_check_mode": True,
    }
    assert args == {"name": "x"}  # the caller's dict is left as it was
    assert run_module(module(tmp_path), args, tmp_path)[1]["args"] == {"name": "x"}


def test_env_is_set_over_the_callers_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUFLEET_LIB_MODULE_TEST", "from-the-caller")
    monkeypatch.setenv("HOME", "/home/caller")
    assert run_module(module(tmp_path), {}, tmp_path)[1]["mark"] == "from-the-caller"
    _rc, result = run_module(module(tmp_path), {}, tmp_path, env={"GPUFLEET_LIB_MODULE_TEST": "from-the-test"})
    assert (result["mark"], result["home"]) == ("from-the-test", "/home/caller")


def test_fsize_limits_what_the_module_may_write(tmp_path):
    args = {"write": 5000, "path": str(tmp_path / "big")}
    assert run_module(module(tmp_path), args, tmp_path)[1]["wrote"] == "all"
    _rc, result = run_module(module(tmp_path), args, tmp_path, fsize=1000)
    assert result["wrote"] == "File too large"
    assert (tmp_path / "big").stat().st_size == 1000


def test_wrap_gets_the_modules_argv_and_what_it_returns_runs(tmp_path):
    seen: list[list[str]] = []

    def through_env(argv: list[str]) -> list[str]:
        seen.append(argv)
        return [shutil.which("env") or "/usr/bin/env", "GPUFLEET_LIB_MODULE_TEST=wrapped", *argv]

    rc, result = run_module(module(tmp_path), {}, tmp_path, wrap=through_env)
    assert rc == 0
    assert result["mark"] == "wrapped"
    assert len(seen) == 1
    assert seen[0][1:] == [str(tmp_path / "echo_module.py"), str(tmp_path / "args.json")]


def test_in_mount_namespace_execs_the_module_or_keeps_the_shell_for_its_trap():
    argv = ["/venv/bin/python", "/r/m y.py", "/t/args.json"]
    assert in_mount_namespace("mount x")(argv) == [
        "unshare",
        "--mount",
        "sh",
        "-ec",
        "mount x; exec /venv/bin/python '/r/m y.py' /t/args.json",
    ]
    assert in_mount_namespace("trap t EXIT", exec_module=False)(argv)[-1] == (
        "trap t EXIT; /venv/bin/python '/r/m y.py' /t/args.json"
    )


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="a mount namespace needs root")
def test_in_mount_namespace_runs_setup_first_and_the_trap_after_the_module(tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    setup = f"mount -t tmpfs -o size=4k tmpfs {scratch}; trap 'ls -A {scratch} > {tmp_path}/after.txt' EXIT"
    args = {"write": 8192, "path": str(scratch / "big")}
    wrap = in_mount_namespace(setup, exec_module=False)
    rc, result = run_module(module(tmp_path), args, tmp_path, wrap=wrap)
    assert (rc, result["wrote"]) == (0, "No space left on device")
    assert (tmp_path / "after.txt").read_text(encoding="utf-8").split() == ["big"]
    assert list(scratch.iterdir()) == []  # the tmpfs was the namespace's own


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("print('not json')", "exited 0 with no JSON result"),
        ("import sys; sys.exit(4)", "exited 4 with no JSON result"),
        ("print('{\"a\": 1}'); print('{\"b\": 2}')", "with no JSON result"),
    ],
)
def test_a_stdout_that_is_no_json_result_fails_the_test_with_the_output(tmp_path, body, message):
    with pytest.raises(pytest.fail.Exception) as failed:
        run_module(module(tmp_path, body), {}, tmp_path)
    assert message in str(failed.value)
    assert str(tmp_path / "echo_module.py") in str(failed.value)


def test_a_traceback_fails_the_test(tmp_path):
    with pytest.raises(AssertionError, match="ZeroDivisionError"):
        run_module(module(tmp_path, "import json\nprint(json.dumps({}))\n1 / 0\n"), {}, tmp_path)


def test_a_module_past_the_timeout_fails_the_test(tmp_path, monkeypatch):
    monkeypatch.setattr(lib.module, "DEFAULT_TIMEOUT_S", 0.5)
    body = "import sys, time\nprint('started', flush=True)\ntime.sleep(30)\n"
    with pytest.raises(pytest.fail.Exception, match=r"ran past 0\.5 s") as failed:
        run_module(module(tmp_path, body), {}, tmp_path)
    assert "started" in str(failed.value)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=examples(40))
@given(args=st.dictionaries(st.text().filter(lambda k: k not in {"write", "exit"}), JSON, max_size=6))
def test_any_json_args_reach_the_module_unchanged(tmp_path, args):
    rc, result = run_module(module(tmp_path), args, tmp_path)
    assert rc == 0
    assert result["args"] == args
