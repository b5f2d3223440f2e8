# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one argv check (module sglang_argv_check, core module_utils/sglang/argv_check.py): role sglang_server
and the sglang_tune action both call it. Runs the real checker script with this python against a
small fake ``sglang`` package (the parser's shape as 0.5.23 has it: ServerArgs.add_cli_args and
the config merger); the real wheels are checked by tests/unit/test_sglang_profiles.py."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpufleet.sglang.plugins.module_utils.common.secret_mask import MASK
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang import argv_check
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.argv_check import (
    ArgvCheckError,
    interpret,
    run,
    secrets_in,
)

REPO = Path(__file__).resolve().parents[2]
KEY = "k3y\\with'quote"

FAKE_SERVER_ARGS = """
class ServerArgs:
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--model-path")
        parser.add_argument("--api-key")
        parser.add_argument("--admin-api-key")
        parser.add_argument("--config")
        parser.add_argument("--attention-backend", choices=["flashinfer", "triton"])
        print("fake sglang: building the parser")
"""
FAKE_MERGER = """
import json
class ConfigArgumentMerger:
    def __init__(self, parser):
        self.parser = parser
    def merge_config_with_args(self, argv):
        path = argv[argv.index("--config") + 1]
        with open(path) as handle:
            options = json.load(handle)
        rest = [w for i, w in enumerate(argv) if w != "--config" and (i == 0 or argv[i - 1] != "--config")]
        words = []
        for key, value in options.items():
            words += ["--" + key, str(value)]
        return words + rest
"""


@pytest.fixture(scope="module")
def fake_sglang(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("fake-sglang")
    package = root / "sglang"
    (package / "srt" / "utils").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "version.py").write_text('__version__ = "0.5.23"\n')
    (package / "srt" / "__init__.py").write_text("")
    (package / "srt" / "utils" / "__init__.py").write_text("")
    (package / "srt" / "server_args.py").write_text(textwrap.dedent(FAKE_SERVER_ARGS))
    (package / "srt" / "utils" / "server_args_config_parser.py").write_text(textwrap.dedent(FAKE_MERGER))
    return {"PYTHONPATH": str(root)}


def test_an_accepted_argv(fake_sglang):
    result = run(sys.executable, ["--model-path", "/srv/models/m", "--attention-backend", "triton"], env=fake_sglang)
    assert result == {
        "ok": True,
        "stage": "done",
        "version": "0.5.23",
        "error": "",
        "warnings": [],
    }


def test_a_refused_argv_names_flag_value_and_version_with_the_key_masked(fake_sglang):
    result = run(sys.executable, ["--api-key", KEY, "--attention-backend", KEY], env=fake_sglang)
    assert result["ok"] is False
    assert result["stage"] == "parse"
    assert result["error"].startswith("SGLang 0.5.23 refuses the argv: argument --attention-backend: invalid choice")
    assert MASK in result["error"]
    assert "k3y" not in json.dumps(result)


def test_an_options_file_text_is_checked_as_config_and_its_key_masked(fake_sglang):
    text = json.dumps({"api-key": KEY, "attention-backend": KEY})
    result = run(sys.executable, [], config_text=text, env=fake_sglang)
    assert (result["ok"], result["stage"]) == (False, "parse")
    assert "k3y" not in json.dumps(result)
    accepted = run(sys.executable, [], config_text=json.dumps({"attention-backend": "triton"}), env=fake_sglang)
    assert accepted["ok"] is True


def test_an_options_file_named_by_the_argv_gives_its_keys(fake_sglang, tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps({"admin_api_key": KEY, "attention-backend": KEY}))
    result = run(sys.executable, ["--config", str(path)], env=fake_sglang)
    assert result["ok"] is False
    assert "k3y" not in json.dumps(result)


def test_a_python_without_sglang_cannot_check():
    with pytest.raises(ArgvCheckError, match=r"SGLang's parser could not be built \(rc 2\): cannot build the SGLang"):
        run(sys.executable, ["--api-key", KEY], env={"PYTHONPATH": "/nonexistent"})


def test_a_missing_python_is_named(tmp_path):
    with pytest.raises(ArgvCheckError, match=f"{tmp_path}/python does not exist: cannot check the argv"):
        run(str(tmp_path / "python"), [])


def test_a_hung_parser_is_a_named_error(tmp_path):
    def hang(*args, **kwargs):
        raise subprocess.TimeoutExpired(args[0], kwargs["timeout"])

    with pytest.raises(ArgvCheckError, match="did not answer within 7 s"):
        run(sys.executable, [], timeout_s=7, runner=hang)


def test_the_candidate_file_is_private_and_removed(fake_sglang):
    seen = {}

    def spy(argv, **kwargs):
        path = Path(argv[-1])
        seen.update(mode=path.stat().st_mode & 0o777, text=path.read_text(), dir=path.parent)
        return subprocess.CompletedProcess(argv, 0, '{"ok": true, "version": "0.5.23", "warnings": []}', "")

    run(sys.executable, ["--model-path", "m"], config_text='{"api-key": "x"}', runner=spy)
    assert seen["mode"] == 0o600
    assert seen["text"] == '{"api-key": "x"}'
    assert not seen["dir"].exists()


def test_the_checker_text_is_the_script_the_tests_and_the_flag_table_run():
    assert argv_check.checker_text() == (REPO / "plugins/module_utils/sglang/argv_check_script.py").read_text()


def test_secrets_in_argv_and_options():
    argv = ["--api-key", "a1", "--admin-api-key=b2", "--tp", "8"]
    assert secrets_in(argv, json.dumps({"api_key": "c3", "admin-api-key": "", "port": 1})) == ["a1", "b2", "c3"]
    assert secrets_in(["--api-key"], "not json") == []


@given(
    rc=st.integers(min_value=-20, max_value=300),
    stdout=st.text(max_size=80) | st.builds(json.dumps, st.dictionaries(st.text(max_size=8), st.text(max_size=8))),
    stderr=st.text(max_size=80),
)
def test_interpret_is_a_result_or_a_named_error(rc, stdout, stderr):
    if rc not in (0, 1):
        with pytest.raises(ArgvCheckError, match=rf"^SGLang's parser could not be built \(rc {rc}\)"):
            interpret(rc, stdout, stderr)
    else:
        result = interpret(rc, stdout, stderr)
        assert result["ok"] is (rc == 0)
        assert isinstance(result["error"], str)
        assert (result["error"] == "") is (rc == 0)


@given(argv=st.lists(st.text(max_size=12), max_size=8), config=st.none() | st.text(max_size=40))
def test_secrets_in_never_raises_and_finds_every_flag_value(argv, config):
    found = secrets_in(argv, config if config is not None else "")
    assert all(isinstance(s, str) and s for s in found)
    for index, word in enumerate(argv[:-1]):
        if word in ("--api-key", "--admin-api-key") and argv[index + 1]:
            assert argv[index + 1] in found
