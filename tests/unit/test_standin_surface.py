# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The SGLang stand-in's response surface (STANDIN_SURFACE): its rate and fate follow its flags."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from lib.standin import sglang_standin
from standins import sglang_api

STANDIN = Path(sglang_api.__file__)
SURFACE = STANDIN.parent / "surfaces" / "tune.json"


@pytest.fixture(scope="module")
def surface():
    return sglang_api.load_surface(str(SURFACE))


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({}, {"mode": "serve", "tokens_per_s": 1000.0}),
        ({"attention_backend": "triton"}, {"mode": "serve", "tokens_per_s": 1500.0}),
        # the interaction: triton without CUDA graphs, both spellings of "no CUDA graphs"
        ({"attention_backend": "triton", "disable_cuda_graph": True}, {"mode": "serve", "tokens_per_s": 2160.0}),
        (
            {"attention_backend": "triton", "cuda_graph_backend_decode": "disabled"},
            {"mode": "serve", "tokens_per_s": 2160.0},
        ),
        ({"attention_backend": "flashinfer", "disable_cuda_graph": True}, {"mode": "serve", "tokens_per_s": 900.0}),
        ({"max_running_requests": "1024"}, {"mode": "serve", "tokens_per_s": 1600.0}),
    ],
)
def test_rates(surface, flags, expected):
    assert sglang_api.surface_outcome(surface, flags) == expected


@pytest.mark.parametrize(
    ("flags", "mode", "text"),
    [
        ({"attention_backend": "fa3"}, "crash", "FlashAttention v3"),
        ({"mem_fraction_static": "0.95"}, "oom", "KV cache pool"),
        ({"kv_cache_dtype": "fp8_e4m3"}, "never_ready", "hangs"),
    ],
)
def test_failures(surface, flags, mode, text):
    out = sglang_api.surface_outcome(surface, flags)
    assert out["mode"] == mode
    assert text in out["message"]


def test_bad_surface_is_refused(tmp_path):
    bad = tmp_path / "s.json"
    bad.write_text(json.dumps({"base_tokens_per_s": 1, "failures": [{"when": {}, "mode": "explode"}]}))
    with pytest.raises(SystemExit, match="failure mode 'explode'"):
        sglang_api.load_surface(str(bad))
    bad.write_text("[]")
    with pytest.raises(SystemExit, match="base_tokens_per_s"):
        sglang_api.load_surface(str(bad))


def _env(rate=None) -> dict[str, str]:
    env = {"STANDIN_SURFACE": str(SURFACE)}
    if rate is not None:
        env["STANDIN_TOKENS_PER_S"] = str(rate)
    return env


def test_crash_exits_at_once_with_the_message(tmp_path):
    with sglang_standin(tmp_path, "--attention-backend", "fa3", env=_env(), capture=True, listen=False) as standin:
        assert standin.wait_exit(timeout=15) == 1
    assert "FlashAttention v3" in standin.stderr
    assert '"mode": "crash"' in standin.stdout


def test_oom_exits_after_its_delay_with_a_cuda_oom(tmp_path):
    start = time.monotonic()
    with sglang_standin(tmp_path, "--mem-fraction-static", "0.95", env=_env(), capture=True, listen=False) as standin:
        assert standin.wait_exit(timeout=15) == 1
    assert time.monotonic() - start >= 1.0
    assert "torch.OutOfMemoryError: CUDA out of memory" in standin.stderr


def test_never_ready_listens_but_stays_503(tmp_path):
    with sglang_standin(tmp_path, "--kv-cache-dtype", "fp8_e4m3", env=_env(), timeout=10) as standin:
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(f"{standin.url}/health_generate", timeout=5)
        assert info.value.code == 503


@pytest.mark.parametrize(("rate", "expected"), [(None, 1600.0), (3740, 5984.0)])
def test_the_rate_is_the_base_times_the_factors(tmp_path, rate, expected):
    # STANDIN_TOKENS_PER_S, when set, is the base (a lab keeps its rate for the profile it deploys)
    with sglang_standin(
        tmp_path, "--max-running-requests", "1024", env=_env(rate), capture=True, listen=False
    ) as standin:
        line = standin.proc.stdout.readline()
        assert line.startswith("STANDIN_SURFACE ")
        assert json.loads(line.split(" ", 1)[1]) == {"mode": "serve", "tokens_per_s": expected}
