# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""throughput_gate against a hostile or broken server: never a PASS, always within the stated deadline.

Every case runs the module through ansible-runner with a hard outer timeout (the runner kills the
play), asserts a failure that names the cause, the run's own time (the module's ``elapsed_s``, on the
monotonic clock; the task's duration where the module stopped before measuring) within the deadline
that applies plus 10 s, no traceback, and that the API key appears in no output in any form.
The server is tests/standins/sglang_api.py with an injected fault (STANDIN_FAULT, STANDIN_HEALTH_FAULT).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from lib.gate_play import MODULE_PLAY, run_play

KEY = "gate-Secret-4711"
MARGIN_S = 10.0
OUTER_TIMEOUT_S = 120
# small: 4 streams, 8 requests of 8 tokens; request_timeout 2 s, so a request's hard ceiling is
# 2 + 8 x 0.5 = 6 s
SHAPE = {
    "concurrency": 4,
    "requests_per_trial": 8,
    "input_len": 16,
    "output_len": 8,
    "warmup_requests": 0,
    "trials": 5,
    "ready_timeout": 3,
    "request_timeout": 2,
    "max_invalid_trials": 0,
    "telemetry": False,
    "baseline": [1000.0] * 5,
}


def run_gate(tmp_path: Path, url: str, **args) -> tuple[object, float, str]:
    """Run the module; return (result, the run's own time in seconds, every output as text).

    The run's time is the module's ``elapsed_s`` where it measured, else the task's duration: the
    task's duration adds the interpreter's start, which a host loaded by parallel test stages
    stretched to 36 s once (the outer timeout still bounds the whole task)."""
    gate_args = {"url": url, "api_key": KEY, **SHAPE, **args}
    started = time.monotonic()
    r = run_play(tmp_path, MODULE_PLAY, {"gate_args": gate_args}, "Run the throughput gate", timeout=OUTER_TIMEOUT_S)
    wall = time.monotonic() - started
    assert wall < OUTER_TIMEOUT_S, "the outer timeout killed the play"
    everything = r.output + json.dumps(r.res) + "".join(json.dumps(e) for e in r.events)
    if isinstance(r.res.get("elapsed_s"), (int, float)):
        return r, float(r.res["elapsed_s"]), everything
    return r, r.duration if r.duration is not None else wall, everything


def assert_failed_cleanly(r, duration: float, everything: str, deadline: float, needle: str) -> None:
    assert r.rc != 0, r.output
    assert r.res.get("verdict") != "pass", r.res
    assert needle in r.res["msg"], r.res["msg"]
    assert duration <= deadline + MARGIN_S, (
        f"took {duration:.1f}s, deadline {deadline}s; task {r.duration}s, ready {r.res.get('ready')}, "
        f"trials {[(t.get('n'), t.get('invalid_reason'), t.get('duration_s')) for t in r.res.get('trials') or []]}"
    )
    assert "Traceback" not in everything
    for form in (KEY, KEY.lower(), KEY.encode().hex()):
        assert form not in everything, f"secret leaked as {form!r}"


STREAM_FAULTS = {
    # fault: (message needle, the deadline that applies in seconds)
    "trickle_head": ("no progress (no new token) for 2s", 2),
    "trickle_body": ("no progress (no new token) for 2s", 2),
    "endless_stream": ("no progress (no new token) for 2s", 2),
    "malformed_middle": ("malformed event", 0),
    "error_with_counts": ("server sent an error event", 0),
    "after_done": ("data after [DONE]", 0),
    "huge_event": ("bytes", 0),
    "short_tokens": ("wrong token count", 0),
}


@pytest.mark.parametrize("fault", sorted(STREAM_FAULTS))
@pytest.mark.parametrize("api", ["native", "openai"])
def test_stream_fault_never_passes(tmp_path, standin, fault, api):
    needle, deadline = STREAM_FAULTS[fault]
    server = standin("--api-key", KEY, STANDIN_TOKENS_PER_S="2000", STANDIN_FAULT=fault, STANDIN_TRICKLE_S="0.5")
    r, duration, everything = run_gate(tmp_path, server.url, api=api, model="test/model")
    assert_failed_cleanly(r, duration, everything, deadline, needle)
    assert r.res["reason"] == "invalid_trials"
    assert r.res["trials"]
    assert not any(t["valid"] for t in r.res["trials"])


HEALTH_FAULTS = {
    # fault: (message needle, ready_timeout, the deadline that applies): a refusal fails at once,
    # long before a ready_timeout of 60 s
    "401": ("HTTP 401", 60, 0),
    "403": ("HTTP 403", 60, 0),
    "redirect": ("redirect", 60, 0),
    "trickle_head": ("not ready after 3s", 3, 3),
    "trickle_body": ("not ready after 3s", 3, 3),
}


@pytest.mark.parametrize("fault", sorted(HEALTH_FAULTS))
def test_health_fault_fails_at_once_or_at_ready_timeout(tmp_path, standin, fault):
    needle, ready_timeout, deadline = HEALTH_FAULTS[fault]
    server = standin("--api-key", KEY, STANDIN_HEALTH_FAULT=fault, STANDIN_TRICKLE_S="0.5")
    r, duration, everything = run_gate(tmp_path, server.url, ready_timeout=ready_timeout)
    assert_failed_cleanly(r, duration, everything, deadline, needle)
    assert server.generation_tokens() == 0  # nothing was sent to /generate
    if fault == "redirect":
        assert "hunter2" not in everything  # the Location's password is masked too


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ({"ready_timeout": float("nan")}, "ready_timeout must be a finite number in [1, 86400] s"),
        ({"request_timeout": float("inf")}, "request_timeout must be a finite number in [1, 3600] s"),
        ({"min_output_tokens_per_s": float("nan")}, "min_output_tokens_per_s must be a finite number"),
        ({"input_len": 10**12}, "input_len must be a finite number in [1, 262144] tokens"),
        ({"concurrency": 100_000, "requests_per_trial": 100_000}, "concurrency must be a finite number in [1, 4096]"),
        ({"concurrency": 4096, "requests_per_trial": 4096, "input_len": 262144}, "one trial could hold"),
        ({"url": "http://127.0.0.1:1/a b"}, "contains a space, a control or a non-ASCII character"),
        ({"api_key": KEY + "\r\nX-Injected: 1"}, "api_key contains a control character"),
    ],
)
def test_bad_options_refused_before_any_request(tmp_path, standin, args, needle):
    server = standin("--api-key", KEY, STANDIN_TOKENS_PER_S="2000")
    url = args.pop("url", server.url)
    r, duration, everything = run_gate(tmp_path, url, **args)
    assert_failed_cleanly(r, duration, everything, 0, needle)
    assert r.res["reason"] == "error"
    assert server.generation_tokens() == 0


def test_url_password_masked_in_check_mode_plan(tmp_path, standin):
    server = standin(STANDIN_TOKENS_PER_S="2000")
    url = server.url.replace("http://", f"http://gate:{KEY}@")
    gate_args = {"url": url, **SHAPE}
    r = run_play(tmp_path, MODULE_PLAY, {"gate_args": gate_args}, "Run the throughput gate", check=True)
    everything = r.output + json.dumps(r.res)
    assert r.rc == 0, r.output
    assert r.res["plan"]["endpoint"].startswith("POST http://gate:********@127.0.0.1:")
    assert r.res["plan"]["deadlines_s"]["request_s"] == 6.0
    assert KEY not in everything


def test_pass_message_counts_invalid_trials(tmp_path, standin):
    # the 2nd trial's first request gets an error event that carries counts; it is retried
    server = standin(
        STANDIN_TOKENS_PER_S="2000",
        STANDIN_FAULT="error_with_counts",
        STANDIN_FAULT_AFTER=str(SHAPE["requests_per_trial"]),
        STANDIN_FAULT_COUNT="1",
    )
    gate_args = {"url": server.url, **SHAPE, "baseline": [], "max_invalid_trials": 2}
    r = run_play(tmp_path, MODULE_PLAY, {"gate_args": gate_args}, "Run the throughput gate")
    assert r.rc == 0, r.output
    assert r.res["verdict"] == "pass"
    assert r.res["invalid_trials"] == 1
    assert "1 invalid trial retried, not counted: errors: server sent an error event" in r.res["msg"]


def test_request_that_progresses_too_slowly_hits_its_hard_ceiling(tmp_path, standin):
    # 4 streams share 4 tokens/s: a new token every second (under request_timeout, 2 s), so only
    # the hard ceiling (2 + 8 x 0.5 = 6 s) stops a request that would need 8 s
    server = standin("--api-key", KEY, STANDIN_TOKENS_PER_S="4")
    r, duration, everything = run_gate(tmp_path, server.url)
    assert_failed_cleanly(r, duration, everything, 6, "its hard ceiling")
    assert r.res["reason"] == "invalid_trials"
