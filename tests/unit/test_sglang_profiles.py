# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The sglang_server profiles carry the flags of the runs they are named after, and SGLang 0.5.23's own
parser (built from the real wheel by plugins/module_utils/sglang/argv_check_script.py) accepts them.

The parser check needs the CPU parser venv of tests/harness/sglang-parser-venv.sh (built by
`make unit` and the sglang_server scenario) or GPUFLEET_SGLANG_PARSER_PYTHON; it names what is
missing when it cannot run.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from lib.cache import CACHE

from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang import args as sglang_args
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.args import render_argv
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.flag_table import VERSIONS

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "sglang_server"
CHECKER = REPO / "plugins" / "module_utils" / "sglang" / "argv_check_script.py"
PARSER_VENV = CACHE / "sglang-parser-0.5.23"
PARSER_PYTHON = os.environ.get("GPUFLEET_SGLANG_PARSER_PYTHON") or (
    str(PARSER_VENV / "bin" / "python") if (PARSER_VENV / ".gpufleet-stamp").is_file() else None
)
VERSION = "0.5.23"


def defaults() -> dict:
    return yaml.safe_load((ROLE / "defaults" / "main.yml").read_text(encoding="utf-8"))


PROFILES = defaults()["sglang_server_profiles"]


def test_argument_spec_default_is_the_defaults_file():
    spec = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text(encoding="utf-8"))
    options = spec["argument_specs"]["main"]["options"]
    assert options["sglang_server_profiles"]["default"] == PROFILES


def test_glm5_profile_is_the_glm5_run_on_sm120():
    glm5 = PROFILES["glm5_nvfp4_tp8"]
    # FlashInfer attention with CUDA graphs (no switch turning them off), bf16 KV cache on SM120
    assert glm5["attention_backend"] == "flashinfer"
    assert "disable_cuda_graph" not in glm5
    assert glm5["kv_cache_dtype"] == "bf16"
    assert (glm5["quantization"], glm5["moe_runner_backend"]) == ("modelopt_fp4", "flashinfer_cutlass")
    assert (glm5["reasoning_parser"], glm5["tool_call_parser"]) == ("glm45", "glm47")
    assert glm5["tp"] == 8


def test_kimi_profile_is_the_kimi_run():
    kimi = PROFILES["kimi_k2_thinking_tp8"]
    assert kimi == {
        "fast_load": True,
        "tp": 8,
        "attention_backend": "triton",
        "max_running_requests": 2048,
        "disable_cuda_graph": True,
        "trust_remote_code": True,
        "reasoning_parser": "kimi_k2",
        "tool_call_parser": "kimi_k2",
    }


def test_glm5_argv_for_0523():
    argv = render_argv(PROFILES["glm5_nvfp4_tp8"], VERSION)
    assert "--cuda-graph-backend-decode" not in argv
    assert "--disable-cuda-graph" not in argv
    assert argv[argv.index("--kv-cache-dtype") + 1] == "bf16"
    assert argv[argv.index("--attention-backend") + 1] == "flashinfer"
    assert argv[argv.index("--reasoning-parser") + 1] == "glm45"
    assert argv[argv.index("--tool-call-parser") + 1] == "glm47"


def test_kimi_argv_for_0523_disables_cuda_graphs_the_new_way():
    argv = render_argv(PROFILES["kimi_k2_thinking_tp8"], VERSION)
    assert "--trust-remote-code" in argv
    assert argv[argv.index("--cuda-graph-backend-decode") + 1] == "disabled"
    assert argv[argv.index("--reasoning-parser") + 1] == "kimi_k2"
    assert argv[argv.index("--tool-call-parser") + 1] == "kimi_k2"


def check(argv: list[str]) -> tuple[int, dict]:
    proc = subprocess.run(
        [PARSER_PYTHON, str(CHECKER), "--", "--model-path", "/models/m", *argv],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert proc.stdout.strip(), f"no result from the checker: {proc.stderr[-2000:]}"
    return proc.returncode, json.loads(proc.stdout)


NO_PARSER = f"no SGLang {VERSION} parser: run tests/harness/sglang-parser-venv.sh or set GPUFLEET_SGLANG_PARSER_PYTHON"


def needs_parser(test):
    """The real parser's tests: marked parser_venv (make newest leaves them out), skipped without the venv."""
    return pytest.mark.parser_venv(pytest.mark.skipif(PARSER_PYTHON is None, reason=NO_PARSER)(test))


@needs_parser
@pytest.mark.parametrize("name", sorted(PROFILES))
def test_real_0523_parser_accepts_profile(name):
    rc, result = check(render_argv(PROFILES[name], VERSION))
    assert result["version"] == VERSION
    assert (rc, result["ok"]) == (0, True), result


@needs_parser
@pytest.mark.parametrize(
    ("flag", "bad"),
    [("--reasoning-parser", "glm5"), ("--tool-call-parser", "kimi-k2"), ("--kv-cache-dtype", "bfloat17")],
)
def test_real_0523_parser_refuses_a_wrong_value(flag, bad):
    # the check above can fail: a parser or dtype name SGLang 0.5.23 does not know is refused
    argv = render_argv(PROFILES["glm5_nvfp4_tp8"], VERSION)
    argv[argv.index(flag) + 1] = bad
    rc, result = check(argv)
    assert rc == 1
    assert result["ok"] is False
    assert bad in result["error"]


# -- the fastest safe loader options (fast_load) --------------------------------------------------

LOADER = "--model-loader-extra-config"


def loader_config(argv: list[str]) -> dict | None:
    return json.loads(argv[argv.index(LOADER) + 1]) if LOADER in argv else None


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_profile_asks_for_the_fastest_safe_loader(name):
    assert PROFILES[name]["fast_load"] is True


@pytest.mark.parametrize("name", sorted(PROFILES))
@pytest.mark.parametrize("version", [*VERSIONS, "0.5.12.post1", "0.5.9rc1", "0.5.23+cu130"])
def test_fast_load_sets_the_multithreaded_loader_where_the_release_bounds_its_memory(name, version):
    argv = render_argv(PROFILES[name], version)
    assert "--fast-load" not in argv
    bounded = sglang_args.public_key(sglang_args.parse_version(version)) >= sglang_args.parse_version("0.5.9")
    # the multithreaded loader of 0.5.8 keeps every shard it read in memory: never set there
    assert loader_config(argv) == ({"enable_multithread_load": True} if bounded else None)


def test_a_release_whose_parser_lacks_the_flag_never_gets_it(monkeypatch):
    table = dict(sglang_args.FLAGS)
    monkeypatch.setitem(sglang_args.FLAGS, LOADER, (table[LOADER][0], "0" * len(VERSIONS)))
    for version in VERSIONS:
        assert LOADER not in render_argv(PROFILES["glm5_nvfp4_tp8"], version)


def test_the_users_loader_config_wins_over_fast_load():
    mine = {"fast_load": True, "model_loader_extra_config": {"num_threads": 16, "enable_multithread_load": False}}
    assert loader_config(render_argv(mine, VERSION)) == {"num_threads": 16, "enable_multithread_load": False}
    text = {"fast_load": True, "model_loader_extra_config": '{"num_threads": 4}'}
    assert loader_config(render_argv(text, VERSION)) == {"num_threads": 4}
    assert loader_config(render_argv({"fast_load": False}, VERSION)) is None
    assert loader_config(render_argv({"fast_load": None}, VERSION)) is None


def test_fast_load_is_a_switch():
    with pytest.raises(sglang_args.SGLangArgsError, match="fast_load is a switch"):
        render_argv({"fast_load": "yes"}, VERSION)
