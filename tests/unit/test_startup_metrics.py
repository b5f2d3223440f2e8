# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A cold start's phases: SGLang's startup gauges parsed from /metrics, the cold_start record checked,
the stand-in's gauges (the seconds it spent) and the module's read of /metrics that never fails the wait."""

from __future__ import annotations

import http.server
import math
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lib.standin import sglang_standin
from lib.startup import COLD_START

from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.startup_metrics import (
    CUDA_GRAPH_PHASES,
    MAX_SECONDS,
    STARTUP_PHASES,
    ColdStartError,
    check_cold_start,
    parse_startup,
)
from ansible_collections.gpufleet.sglang.plugins.modules import sglang_server_ready

# What SGLang 0.5.23's prometheus_client writes after a start (labels as tokenizer_metric_labels gives them)
REAL = """# HELP sglang:startup_time_seconds Engine startup duration by phase in seconds.
# TYPE sglang:startup_time_seconds gauge
sglang:startup_time_seconds{engine_type="unified",model_name="glm",phase="load_weight"} 41.25
sglang:startup_time_seconds{engine_type="unified",model_name="glm",phase="kv_cache_allocation"} 3.5
sglang:startup_time_seconds{engine_type="unified",model_name="glm",phase="scheduler_e2e"} 260.0
sglang:startup_time_seconds{engine_type="unified",model_name="glm",phase="tokenizer_e2e"} 262.75
# HELP sglang:startup_cuda_graph_time_seconds CUDA graph capture duration by phase in seconds.
# TYPE sglang:startup_cuda_graph_time_seconds gauge
sglang:startup_cuda_graph_time_seconds{engine_type="unified",model_name="glm",phase="prefill"} 0.0
sglang:startup_cuda_graph_time_seconds{engine_type="unified",model_name="glm",phase="decode"} 210.5
sglang:startup_cuda_graph_time_seconds{engine_type="unified",model_name="glm",phase="target_verify"} 0.0
sglang:startup_cuda_graph_time_seconds{engine_type="unified",model_name="glm",phase="draft_prefill"} 0.0
sglang:startup_cuda_graph_time_seconds{engine_type="unified",model_name="glm",phase="draft_decode"} 0.0
sglang:startup_cuda_graph_time_seconds{engine_type="unified",model_name="glm",phase="draft_extend"} 0.0
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{engine_type="unified",model_name="glm"} 0.0
"""


def test_real_text() -> None:
    got = parse_startup(REAL)
    assert got["problems"] == []
    assert got["phases"] == {
        "load_weight": 41.25,
        "kv_cache_allocation": 3.5,
        "scheduler_e2e": 260.0,
        "tokenizer_e2e": 262.75,
    }
    assert got["cuda_graph"] == dict.fromkeys(CUDA_GRAPH_PHASES, 0.0) | {"decode": 210.5}


def test_without_the_gauges_says_why() -> None:
    got = parse_startup("sglang:num_running_reqs 0.0\n")
    assert got["phases"] == {}
    assert got["cuda_graph"] == {}
    assert "no sglang:startup_time_seconds samples" in got["problems"][0]


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('sglang:startup_time_seconds{phase="load_weight"} NaN', "phase load_weight is not finite"),
        ('sglang:startup_time_seconds{phase="load_weight"} +Inf', "phase load_weight is not finite"),
        ('sglang:startup_time_seconds{phase="load_weight"} 1e400', "phase load_weight is not finite"),
        ('sglang:startup_time_seconds{phase="load_weight"} -2.0', "phase load_weight is negative"),
        ('sglang:startup_time_seconds{phase="load_weight"} 1e12', "phase load_weight is more than"),
        ('sglang:startup_time_seconds{phase="load_weight"} 1_000', "is not a number"),
        ('sglang:startup_time_seconds{phase="load_weight"} 0x10', "is not a number"),
        ('sglang:startup_time_seconds{phase="load_weight",phase="decode"} 1.0', "label 'phase' given twice"),
        ('sglang:startup_time_seconds{phase="load_weight" 1.0', "labels are not closed"),
        ("sglang:startup_time_seconds{phase=load_weight} 1.0", "labels cannot be read"),
        ('sglang:startup_time_seconds{model_name="m"} 1.0', "no phase label"),
        ('sglang:startup_time_seconds{phase="<script>"} 1.0', "no phase label"),
        ('sglang:startup_time_seconds{phase="load_weight"} 1.0 soon', "timestamp"),
        ('sglang:startup_time_seconds{phase="load_weight"}1.0', "not 'name{labels} value"),
    ],
)
def test_hostile_lines_are_named_and_left_out(line: str, problem: str) -> None:
    got = parse_startup(REAL.replace(REAL.splitlines()[2], line))
    assert "load_weight" not in got["phases"]
    assert got["phases"]["scheduler_e2e"] == 260.0  # the rest is kept
    assert any(problem in p for p in got["problems"]), got["problems"]


def test_a_phase_given_twice_is_left_out() -> None:
    twice = REAL + 'sglang:startup_time_seconds{engine_type="unified",model_name="other",phase="load_weight"} 1.0\n'
    got = parse_startup(twice + twice.splitlines()[-1] + "\n")
    assert "load_weight" not in got["phases"]
    assert got["phases"]["tokenizer_e2e"] == 262.75
    assert sum("phase load_weight given twice" in p for p in got["problems"]) == 1


def test_escaped_label_values_and_a_timestamp_are_read() -> None:
    line = r'sglang:startup_time_seconds{model_name="a\"b\\c}{",phase="load_weight"} 7 1700000000000'
    assert parse_startup(line)["phases"] == {"load_weight": 7.0}


def test_problems_are_capped() -> None:
    got = parse_startup("\n".join(f'sglang:startup_time_seconds{{phase="p{i}"}} NaN' for i in range(500)))
    assert len(got["problems"]) <= 22
    assert "more problems left out" in got["problems"]


_hostile_value = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["NaN", "+Inf", "-Inf", "1e999", "-0", "1_0", "", "0x1", "\uff11"]),
    st.text(max_size=12),
)
_hostile_line = st.one_of(
    st.builds(
        lambda metric, labels, value: f"{metric}{{{labels}}} {value}",
        st.sampled_from(["sglang:startup_time_seconds", "sglang:startup_cuda_graph_time_seconds"]),
        st.one_of(
            st.builds(lambda p: f'phase="{p}"', st.one_of(st.sampled_from(STARTUP_PHASES), st.text(max_size=10))),
            st.text(max_size=40),
        ),
        _hostile_value,
    ),
    st.text(max_size=80),
)


@given(st.lists(_hostile_line, max_size=30))
def test_any_text_gives_finite_phases_in_range_or_problems(lines: list[str]) -> None:
    got = parse_startup("\n".join(lines))
    assert set(got) == {"phases", "cuda_graph", "problems"}
    for group in ("phases", "cuda_graph"):
        for phase, seconds in got[group].items():
            assert isinstance(phase, str)
            assert phase.isascii()
            assert phase.replace("_", "").isalnum()
            assert isinstance(seconds, float)
            assert math.isfinite(seconds)
            assert 0 <= seconds <= MAX_SECONDS
    assert all(isinstance(p, str) for p in got["problems"])
    if not got["phases"]:
        assert got["problems"]


@given(st.dictionaries(st.sampled_from(STARTUP_PHASES), st.floats(0, MAX_SECONDS), min_size=1))
def test_what_the_gauges_say_is_read_back(phases: dict[str, float]) -> None:
    text = "\n".join(f'sglang:startup_time_seconds{{phase="{p}"}} {v!r}' for p, v in phases.items())
    got = parse_startup(text)
    assert got["phases"] == phases
    assert got["problems"] == []


def test_check_cold_start_keeps_a_good_record() -> None:
    assert check_cold_start(COLD_START) == COLD_START
    assert check_cold_start({k: v for k, v in COLD_START.items() if k != "cuda_graph"})["cuda_graph"] == {}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"ready_s": None}, "cold_start.ready_s is not a number"),
        ({"ready_s": float("nan")}, "cold_start.ready_s is not finite"),
        ({"ready_s": -1}, "cold_start.ready_s is negative"),
        ({"ready_s": True}, "cold_start.ready_s is not a number"),
        ({"release": ""}, "cold_start.release"),
        ({"release": "x" * 201}, "cold_start.release"),
        ({"sglang_version": 5}, "cold_start.sglang_version"),
        ({"phases": {}}, "cold_start.phases is empty"),
        ({"phases": []}, "cold_start.phases is not a mapping"),
        ({"phases": {"<b>": 1.0}}, "cold_start.phases has a phase name"),
        ({"phases": {"load_weight": "1"}}, "cold_start.phases.load_weight is not a number"),
        ({"cuda_graph": {"decode": 1e300}}, "cold_start.cuda_graph.decode is more than"),
        ({"cuda_graph": {f"p{i}": 1.0 for i in range(40)}}, "cold_start.cuda_graph has more than 32 phases"),
    ],
)
def test_check_cold_start_names_the_wrong_field(change: dict, field: str) -> None:
    with pytest.raises(ColdStartError, match="^" + field.replace(".", r"\.")):
        check_cold_start(COLD_START | change)


@given(
    st.recursive(
        st.none() | st.booleans() | st.floats() | st.text(max_size=5),
        lambda c: st.dictionaries(st.text(max_size=5), c, max_size=4) | st.lists(c, max_size=3),
    )
)
def test_check_cold_start_of_anything_is_a_record_or_a_named_error(value: object) -> None:
    try:
        out = check_cold_start(value)
    except ColdStartError as exc:
        out = {"error": str(exc)}
    assert out["error"].startswith("cold_start") if "error" in out else check_cold_start(out) == out


@given(
    st.fixed_dictionaries(
        {
            "ready_s": st.floats(0, MAX_SECONDS),
            "release": st.text(min_size=1, max_size=200),
            "sglang_version": st.just("0.5.23"),
            "phases": st.dictionaries(st.sampled_from(STARTUP_PHASES), st.floats(0, MAX_SECONDS), min_size=1),
        }
    )
)
def test_check_cold_start_keeps_every_good_record(rec: dict) -> None:
    assert check_cold_start(rec) == rec | {"cuda_graph": {}}


# ------------------------------------------------------------------ the stand-in and the module's read


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""


def test_standin_reports_the_phases_it_spent(tmp_path: Path) -> None:
    with sglang_standin(tmp_path, "--enable-metrics", env={"STANDIN_STARTUP_DELAY_S": "1.0"}) as standin:
        base = standin.url
        status, text = _get(base + "/metrics")
        assert status == 200
        assert parse_startup(text)["phases"] == {}  # not started yet: HELP and TYPE only, as prometheus_client
        assert "# TYPE sglang:startup_time_seconds gauge" in text
        ready_by = time.monotonic() + 30
        while _get(base + "/ready")[0] != 200:
            assert time.monotonic() < ready_by, "the stand-in was not ready within 30 s"
            time.sleep(0.05)
        got = sglang_server_ready._startup(base + "/metrics", 1.5)["startup"]
    assert got["problems"] == []
    assert got["ready_s"] == 1.5
    phases, graphs = got["phases"], got["cuda_graph"]
    assert set(phases) == set(STARTUP_PHASES)
    assert set(graphs) == set(CUDA_GRAPH_PHASES)
    # the shares of the 1 s delay (sglang_api.START_SHARES), as spent: sleeps last at least as long
    assert 0.5 <= phases["load_weight"] < 0.9
    assert 0.1 <= phases["kv_cache_allocation"] < 0.5
    assert 0.3 <= graphs["decode"] < 0.7
    assert graphs["prefill"] == 0.0
    assert phases["scheduler_e2e"] >= phases["load_weight"] + phases["kv_cache_allocation"] + graphs["decode"]
    assert phases["tokenizer_e2e"] >= phases["scheduler_e2e"]


def test_module_read_without_enable_metrics_is_a_problem(tmp_path: Path) -> None:
    with sglang_standin(tmp_path, env={"STANDIN_STARTUP_DELAY_S": "0.0"}) as standin:
        base = standin.url
        got = sglang_server_ready._startup(base + "/metrics", 1.0)["startup"]
    assert got["phases"] == {}
    assert got["problems"] == [f"GET {base}/metrics answered 404: no phases read"]


class _Garbage(http.server.BaseHTTPRequestHandler):
    body = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        del args


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"\xff\xfe garbage\x00\nsglang:startup_time_seconds{phase=\xff} 1\n", "labels cannot be read"),
        (b"x" * (4 << 20) + b"x", "sent more than 4194304 bytes"),
    ],
)
def test_module_read_of_garbage_is_a_problem(body: bytes, problem: str) -> None:
    handler = type("Handler", (_Garbage,), {"body": body})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        got = sglang_server_ready._startup(f"http://127.0.0.1:{server.server_address[1]}/metrics", 1.0)["startup"]
    finally:
        server.shutdown()
        server.server_close()
    assert got["phases"] == {}
    assert any(problem in p for p in got["problems"]), got["problems"]


def test_module_read_of_nothing_listening_is_a_problem() -> None:
    got = sglang_server_ready._startup("http://127.0.0.1:9/metrics", 1.0)["startup"]
    assert got["phases"] == {}
    assert got["problems"][0].startswith("GET http://127.0.0.1:9/metrics failed (")


def test_module_without_metrics_url_reads_nothing() -> None:
    assert sglang_server_ready._startup("", 1.0) == {}


def test_module_documents_metrics_url_and_startup() -> None:
    import yaml  # noqa: PLC0415 - only this test reads the module's documentation

    doc = yaml.safe_load(sglang_server_ready.DOCUMENTATION)["options"]["metrics_url"]
    assert doc["default"] == ""
    assert "startup" in yaml.safe_load(sglang_server_ready.RETURN)


def test_gate_documents_cold_start() -> None:
    import yaml  # noqa: PLC0415

    from ansible_collections.gpufleet.sglang.plugins.modules import throughput_gate  # noqa: PLC0415

    assert yaml.safe_load(throughput_gate.DOCUMENTATION)["options"]["cold_start"]["type"] == "dict"
