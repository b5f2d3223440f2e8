"""sglang_server_config: the --config options file and the EnvironmentFile texts; unsafe input refused by name."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError
from standins import sglang_api

from ansible_collections.gpufleet.sglang.plugins.filter import sglang_server_config as config_filter
from ansible_collections.gpufleet.sglang.plugins.filter.sglang_server_config import sglang_server_config
from ansible_collections.gpufleet.sglang.plugins.filter.sglang_server_env_file import sglang_server_env_file
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.args import known_flags, render_argv
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.server_config import (
    ServerConfigError,
    check_text,
    config_from_argv,
    render_config,
    render_env_file,
)

PROFILE = {
    "model_path": "/models/GLM-5-NVFP4",
    "tp": 8,
    "attention_backend": "triton",
    "enable_metrics": True,
    "disable_cuda_graph": True,
    "json_model_override_args": {"rope": {"factor": 2}},
}


def test_config_round_trips_the_argv() -> None:
    argv = render_argv(PROFILE, "0.5.23")
    config = json.loads(render_config(argv, "0.5.23", "k3y"))
    assert config == {
        "model-path": "/models/GLM-5-NVFP4",
        "tp-size": "8",
        "attention-backend": "triton",
        "enable-metrics": True,
        "cuda-graph-backend-decode": "disabled",
        "cuda-graph-backend-prefill": "disabled",
        "json-model-override-args": '{"rope":{"factor":2}}',
        "api-key": "k3y",
    }
    # what SGLang's merger makes of it again (switch -> bare flag, the rest -> --key value)
    merged: list[str] = []
    for key, value in config.items():
        merged += [f"--{key}"] if value is True else [f"--{key}", value]
    assert merged[: len(argv)] == argv


def test_values_stay_strings_that_yaml_would_retype() -> None:
    text = render_config(["--model-path", "0755", "--served-model-name", "no"], "0.5.23")
    assert json.loads(text) == {"model-path": "0755", "served-model-name": "no"}
    assert '"0755"' in text


def test_list_flags_take_their_words() -> None:
    kinds = {"--a": "list", "--b": "bool", "--c": "value"}
    assert config_from_argv(["--a", "x", "y", "--b", "--c", "z"], kinds) == {"a": ["x", "y"], "b": True, "c": "z"}


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--no-such"], "not a flag this version knows"),
        (["--tp-size"], "has no value"),
        (["--tp-size", "1", "--tp-size", "2"], "given twice"),
    ],
)
def test_config_from_argv_refuses(argv: list[str], error: str) -> None:
    with pytest.raises(ServerConfigError, match=error):
        config_from_argv(argv, known_flags("0.5.23"))


@pytest.mark.parametrize("key", ["evil\nINJECTED=1", "a\rb", "nul\x00", "sep\u2028x", "bom\ufeff", "esc\x1b[0m"])
def test_api_key_with_control_characters_is_refused_without_showing_it(key: str) -> None:
    with pytest.raises(ServerConfigError) as info:
        render_config(["--model-path", "/m"], "0.5.23", key)
    message = str(info.value)
    assert "sglang_server_api_key" in message
    assert "U+" in message
    assert key not in message


def test_option_with_newline_is_refused() -> None:
    with pytest.raises(ServerConfigError, match="U\\+000A at position 2"):
        render_config(["--model-path", "/m\nx"], "0.5.23")


@pytest.mark.parametrize("flag", ["--api-key", "--admin-api-key"])
def test_key_in_profile_is_refused(flag: str) -> None:
    with pytest.raises(ServerConfigError, match="set sglang_server_api_key instead"):
        render_config(["--model-path", "/m", flag, "k"], "0.5.23")


def test_unicode_printable_values_survive() -> None:
    text = render_config(["--model-path", "/models/模型-ü-🦙"], "0.5.23", "ключ")
    assert json.loads(text) == {"model-path": "/models/模型-ü-🦙", "api-key": "ключ"}


def test_filter_without_config_support(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config_filter, "supports_config", lambda version: False)
    assert config_filter.sglang_server_config(["--model-path", "/m"], "0.5.8", "") == ""
    with pytest.raises(AnsibleFilterError, match="has no --config option"):
        config_filter.sglang_server_config(["--model-path", "/m"], "0.5.8", "secret")


def test_filter_names_the_problem() -> None:
    with pytest.raises(AnsibleFilterError, match=r"^sglang_server: sglang_server_api_key contains"):
        sglang_server_config(["--model-path", "/m"], "0.5.23", "a\nb")


def test_env_file_quotes_and_sorts() -> None:
    text = render_env_file({"Z": 'a "b" $X `c` \\ d #e', "A": 1, "B": "x y"}, "managed")
    assert text.splitlines() == ["# managed", 'A="1"', 'B="x y"', 'Z="a \\"b\\" \\$X \\`c\\` \\\\ d #e"']


@pytest.mark.parametrize(
    ("env", "error"),
    [
        (
            {"HF_TOKEN": "abc\nINJECTED=1"},
            "environment variable HF_TOKEN contains the non-printable character U\\+000A",
        ),
        ({"BAD NAME": "x"}, "is not a valid identifier"),
        ({"X\nY": "x"}, "is not a valid identifier"),
        ({"1X": "x"}, "is not a valid identifier"),
        ({"FLAG": True}, "must be a string or a number, not bool"),
        ({"LIST": ["a"]}, "must be a string or a number, not list"),
    ],
)
def test_env_file_refuses(env: dict, error: str) -> None:
    with pytest.raises(ServerConfigError, match=error) as info:
        render_env_file(env)
    assert "INJECTED" not in str(info.value)


def test_env_filter_error() -> None:
    with pytest.raises(AnsibleFilterError, match=r"^sglang_server: environment variable T contains"):
        sglang_server_env_file({"T": "a\x00"})


def test_check_text_accepts_printable() -> None:
    check_text("x", "plain ascii ~!@#$%^&*()_+ ü 模型")


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_env_file_read_back_by_a_shell_like_systemd(tmp_path: Path) -> None:
    """systemd reads "-quoted EnvironmentFile values with the shell's double-quote rules; so does sh."""
    value = 'a "b" $HOME `id` \\ \\n #c'
    env_file = tmp_path / "x.env"
    env_file.write_text(render_env_file({"V": value}))
    out = subprocess.run(
        ["bash", "-c", f'set -a; . "{env_file}"; printf %s "$V"'],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": os.environ["PATH"]},
    )
    assert out.stdout == value


def test_standin_merges_the_rendered_file(tmp_path: Path) -> None:
    """The SGLang stand-in reads the options file the way SGLang's merger does."""
    path = tmp_path / "s.yaml"
    path.write_text(render_config(render_argv(PROFILE, "0.5.23"), "0.5.23", "k"))
    merged = sglang_api.merge_config(["--config", str(path), "--port", "1"])
    flags = sglang_api.parse_flags(merged)
    assert flags["api_key"] == "k"
    assert flags["tp_size"] == "8"
    assert flags["enable_metrics"] is True
    assert flags["port"] == "1"
    with pytest.raises(SystemExit, match="must be YAML format"):
        sglang_api.merge_config(["--config", str(tmp_path / "s.json")])
