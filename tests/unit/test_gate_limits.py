# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Bounds, deadlines and the trial memory ceiling of the throughput gate (gate_limits), and the
runner's input checks, secret masking and bounded readiness GET (gate_runner)."""

from __future__ import annotations

import json
import math
import socket
import threading
import time

import pytest
from lib.tcp import serve_in_thread

from ansible_collections.gpufleet.sglang.plugins.module_utils.common.secret_mask import MASK, mask, mask_url
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate import limits as gl
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate import runner as gr
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.http import Target


def params(**kw) -> gr.GateParams:
    return gr.GateParams(**kw)


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"ready_timeout": math.nan}, "ready_timeout must be a finite number in [1, 86400] s, got nan"),
        ({"request_timeout": math.inf}, "request_timeout must be a finite number in [1, 3600] s, got inf"),
        ({"min_output_tokens_per_s": math.nan}, "min_output_tokens_per_s must be a finite number"),
        ({"tolerance": -math.inf}, "tolerance must be a finite number in [0, 1)"),
        ({"alpha": 0.0}, "alpha must be a finite number in (0, 1)"),
        ({"alpha": 1.0}, "alpha must be a finite number in (0, 1)"),
        ({"input_len": 10**12}, "input_len must be a finite number in [1, 262144] tokens, got 1000000000000"),
        ({"output_len": 32769}, "output_len must be a finite number in [1, 32768]"),
        ({"concurrency": 100_000, "requests_per_trial": 100_000}, "concurrency must be a finite number in [1, 4096]"),
        ({"requests_per_trial": 65537}, "requests_per_trial must be a finite number in [1, 65536]"),
        ({"trials": 51}, "trials must be a finite number in [1, 50]"),
        ({"max_invalid_trials": -1}, "max_invalid_trials must be a finite number in [0, 100]"),
        ({"min_trials": 1}, "min_trials must be a finite number in [2, 50], got 1"),
        ({"max_trials": 101}, "max_trials must be a finite number in [2, 100], got 101"),
        ({"min_trials": 3.5}, "min_trials must be a whole number"),
        ({"min_trials": 12, "max_trials": 10}, "min_trials (12) must be between 1 and max_trials (10)"),
        ({"beta": 0.0}, "beta must be a finite number in (0, 0.5)"),
        ({"beta": math.nan}, "beta must be a finite number in (0, 0.5)"),
        ({"margin": 0.001}, "margin must be a finite number in [0.01, 0.5]"),
        ({"tolerance": 0.6, "margin": 0.45}, "tolerance + margin below 1"),
        ({"design": "bayesian"}, "design must be one of sequential, fixed"),
        ({"telemetry_interval_ms": 10}, "telemetry_interval_ms must be a finite number in [50, 60000] ms"),
        ({"baseline": [1.0, math.nan]}, "baseline[1] must be a finite number in (0, 1e+08] tokens/s"),
        ({"baseline": [1.0] * 1001}, "baseline has 1001 values"),
        ({"concurrency": True}, "concurrency must be a number"),
        ({"requests_per_trial": 65536, "output_len": 128}, "tokens per trial; at most 4194304"),
        ({"concurrency": 4096, "requests_per_trial": 4096, "input_len": 262144}, "one trial could hold"),
        ({"concurrency": 8, "requests_per_trial": 4}, "requests_per_trial (4) must be >= concurrency (8)"),
        ({"url": "http://127.0.0.1:1/a b"}, "contains a space, a control or a non-ASCII character"),
        ({"url": "http://127.0.0.1:1/\x07"}, "contains a space, a control or a non-ASCII character"),
        ({"url": "http://h\u00e9st:1"}, "non-ASCII"),
        ({"api_key": "k\r\nX-Evil: 1"}, "api_key contains a control character"),
        ({"api_key": "k\u00e9y"}, "api_key contains a control character (such as CR or LF), DEL or a non-ASCII"),
        ({"ready_path": "ready"}, "ready_path must start with '/'"),
        ({"ready_path": ""}, "ready_path must start with '/'"),
        ({"ready_path": "/ready now"}, "ready_path must be printable ASCII without spaces"),
        ({"ready_path": "/ready\r\n"}, "ready_path must be printable ASCII without spaces"),
    ],
)
def test_bad_options_are_named(kw, needle):
    with pytest.raises(gl.GateInputError) as err:
        gr.validate(params(**kw))
    assert needle in str(err.value)
    assert "X-Evil" not in str(err.value)


def test_defaults_and_largest_shapes_are_accepted():
    gr.validate(params())
    gr.validate(params(concurrency=2048, requests_per_trial=6144, input_len=16, output_len=256))
    gr.validate(params(concurrency=64, requests_per_trial=256, input_len=131072, output_len=16384))


@pytest.mark.parametrize(
    ("bound", "value", "ok"),
    [
        (gl.Bound(0, 1, high_open=True), 0.0, True),
        (gl.Bound(0, 1, high_open=True), 1.0, False),
        (gl.Bound(0, 1, low_open=True), 0.0, False),
        (gl.Bound(0, 1), math.nan, False),
        (gl.Bound(0, math.inf), math.inf, False),
    ],
)
def test_bound_edges(bound, value, ok):
    assert bound.holds(value) is ok


def test_deadlines_are_derived_and_finite():
    dl = gr.run_deadlines(
        params(ready_timeout=60, request_timeout=2, output_len=8, concurrency=4, requests_per_trial=8)
    )
    assert dl.request_s == 2 + 8 * gl.REQUEST_S_PER_TOKEN
    assert dl.connect_s == 2
    assert dl.trial_s == (2 + 1) * (dl.request_s + dl.connect_s)  # two waves of 4, plus one
    assert dl.max_trials == 10 + 5  # the sequential cap and the retried invalid trials
    assert dl.run_s > 60 + dl.max_trials * dl.trial_s
    assert all(math.isfinite(v) for v in dl.as_dict().values())
    # the deadline follows the design's most trials
    assert gr.run_deadlines(params(max_trials=30)).max_trials == 30 + 5
    assert gr.run_deadlines(params(trials=7, max_trials=4, min_trials=2)).max_trials == 7 + 7
    assert gr.run_deadlines(params(design="fixed", trials=4, max_trials=30)).max_trials == 2 * 4 + 4


def test_plan_states_the_design():
    seq = gr.plan(params(baseline=[100.0] * 5))["design"]
    assert seq["name"] == "sequential"
    assert seq["valid_trials"] == "3 to 10, stopping at the first clear verdict"
    assert (seq["pass_hypothesis_drop"], seq["fail_hypothesis_drop"]) == (0.05, 0.15)
    assert gr.plan(params())["design"]["valid_trials"] == "5 (one round (no usable baseline))"
    assert "extra round" in gr.plan(params(design="fixed"))["design"]["valid_trials"]


def test_memory_ceiling_formula():
    per_conn = gl.request_body_bytes(1024) + gl.READ_SIZE + 3 * gl.max_event_bytes(256) + gl.CONN_OVERHEAD_BYTES
    assert gl.trial_memory_ceiling(64, 256, 1024, 256) == 64 * per_conn + 8 * (256 + 256 * 256)
    assert gl.check_memory(64, 256, 1024, 256) < 64 << 20


def test_plan_masks_url_password_and_shows_deadlines():
    p = params(url="http://u:pa55word@10.0.0.5:30000", request_timeout=10)
    plan = gr.plan(p)
    assert "pa55word" not in repr(plan)
    assert plan["endpoint"] == "POST http://u:********@10.0.0.5:30000/generate (stream)"
    assert plan["deadlines_s"]["request_idle_s"] == 10
    assert plan["trial_memory_ceiling_bytes"] > 0


@pytest.mark.parametrize(
    "key",
    ["plain-secret-key", "with\r\nnewline-secret", 'quote"and\\backslash-secret', "t\u00e9st-unicode-secret"],
)
def test_every_form_of_the_key_is_masked(key):
    p = params(api_key=key, url="http://user:url-password@h:1")
    hidden = gr.secrets(p)
    leaks = {
        "raw": key,
        "repr": repr(key),
        "json": json_dumps(key),
        "escaped": key.encode("unicode_escape").decode(),
        "pieces": " ".join(key.splitlines()),
        "url": "http://user:url-password@h:1",
    }
    out = mask({"msg": leaks, "list": [leaks["repr"]], leaks["raw"]: 1}, hidden)
    text = repr(out)
    for part in ("plain-secret-key", "newline-secret", "backslash-secret", "unicode-secret", "url-password"):
        assert part not in text, (part, text)
    assert MASK in text


def json_dumps(value: str) -> str:
    return json.dumps({"k": value})


def test_mask_url():
    assert mask_url("http://a:b@h:1/p") == "http://a:********@h:1/p"
    assert mask_url("http://a@h:1") == "http://a@h:1"
    assert mask_url("http://h:1") == "http://h:1"
    assert Target.from_url("http://a:b@h:1").auth_header(None) == "authorization: Basic YTpi\r\n"
    assert Target.from_url("http://a:b@h:1").auth_header("k") == "authorization: Bearer k\r\n"


# --------------------------------------------------------------------------- bounded readiness GET


class Trickler:
    """A TCP server that answers every connection with ``data`` one byte every ``every`` seconds."""

    def __init__(self, data: bytes, every: float) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.data = data
        self.every = every
        self.stop = threading.Event()
        serve_in_thread(self.sock, self._drip, self.stop)

    def _drip(self, conn: socket.socket) -> None:
        with conn:
            for i in range(len(self.data)):
                if self.stop.is_set():
                    return
                try:
                    conn.sendall(self.data[i : i + 1])
                except OSError:
                    return
                time.sleep(self.every)

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


@pytest.mark.parametrize(
    "data",
    [
        b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n",  # trickled head
        b"HTTP/1.1 200 OK\r\ncontent-length: 40\r\n\r\n" + b"x" * 40,  # trickled body
    ],
)
def test_http_get_holds_its_deadline_against_a_trickle(data):
    server = Trickler(data, every=0.2)
    try:
        start = time.monotonic()
        with pytest.raises(TimeoutError):
            gr.http_get(Target.from_url(f"http://127.0.0.1:{server.port}"), "/health_generate", "", start + 1.0)
        # The whole trickle would take about 8 s; the slack is for a loaded 2-core CI machine.
        assert time.monotonic() - start < 3.0
    finally:
        server.close()


def test_wait_ready_fails_at_ready_timeout_against_a_trickle():
    server = Trickler(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n", every=0.5)
    try:
        start = time.monotonic()
        with pytest.raises(TimeoutError, match="not ready after 1s"):
            gr.wait_ready(params(url=f"http://127.0.0.1:{server.port}", ready_timeout=1))
        # The whole trickle would take about 19 s; the slack is for a loaded 2-core CI machine.
        assert time.monotonic() - start < 3.0
    finally:
        server.close()


@pytest.mark.parametrize(
    ("head", "needle"),
    [
        (b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n", "HTTP 401"),
        (b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n", "HTTP 403"),
        (b"HTTP/1.1 307 Temporary Redirect\r\nlocation: http://x:pw@other/\r\ncontent-length: 0\r\n\r\n", "redirect"),
        (b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n", "no SGLang server at this url"),
    ],
)
def test_wait_ready_refusals_fail_at_once(head, needle):
    server = Trickler(head, every=0)
    try:
        start = time.monotonic()
        with pytest.raises(gr.ServerRefused) as err:
            gr.wait_ready(params(url=f"http://127.0.0.1:{server.port}", ready_timeout=60))
        assert needle in str(err.value)
        assert ":pw@" not in str(err.value)
        # ServerRefused, not TimeoutError, already shows it did not poll to the deadline; the bound is
        # half of ready_timeout because CI ran this at 6 s on a loaded machine (stop 40).
        assert time.monotonic() - start < 30
    finally:
        server.close()


def test_invalid_summary():
    records = [
        {"valid": True, "invalid_reason": ""},
        {"valid": False, "invalid_reason": "errors: x (x1)"},
        {"valid": False, "invalid_reason": "errors: x (x1)"},
    ]
    assert gr.invalid_summary(records) == "2 invalid trials retried, not counted: errors: x (x1) (2 trials)"
    assert gr.invalid_summary(records[:1]) == "no invalid trials"
