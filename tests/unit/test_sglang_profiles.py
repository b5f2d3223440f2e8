# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The sglang_server profiles carry the flags of the runs they are named after, and SGLang 0.5.23's own
parser (built from the real wheel by plugins/module_utils/sglang_argv_check.py) accepts them.

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

from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang_args import render_argv

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "sglang_server"
CHECKER = REPO / "plugins" / "module_utils" / "sglang_argv_check.py"
PARSER_VENV = Path(os.environ.get("GPUFLEET_CACHE") or Path.home() / ".cache" / "gpufleet") / "sglang-parser-0.5.23"
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


needs_parser = pytest.mark.skipif(
    PARSER_PYTHON is None,
    reason=f"no SGLang {VERSION} parser: run tests/harness/sglang-parser-venv.sh or set GPUFLEET_SGLANG_PARSER_PYTHON",
)


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
