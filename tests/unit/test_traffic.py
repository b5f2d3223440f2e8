"""tests/tools/traffic.py: what counts as a failed request (the rolling-upgrade drill asserts zero),
streams read in bounded memory, the open loop, TTFT per phase; the stand-in's queue gauge."""

from __future__ import annotations

import http.server
import itertools
import json
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lib.fuzz import examples
from lib.standin import sglang_standin
from tools.traffic import (
    READ_BYTES,
    StreamReader,
    Tally,
    check_json,
    check_stream,
    one_request,
    parse_args,
    percentile,
    read_phase,
)

from tools import traffic

TRAFFIC = Path(traffic.__file__)
# every reason a stream can fail with (the drill reports them by name)
STREAM_REASONS = {
    "stream_truncated",
    "stream_data_after_done",
    "stream_event_too_large",
    "stream_error_event",
    "stream_malformed",
    "stream_count_backwards",
    "stream_count_too_high",
    "stream_unfinished",
    "stream_invalid",
    "stream_aborted",
}


def _sse(*events: object) -> bytes:
    return b"".join(b"data: " + (e if isinstance(e, bytes) else json.dumps(e).encode()) + b"\n\n" for e in events)


FINAL = {"text": " w0 w1", "meta_info": {"finish_reason": {"type": "length", "length": 2}, "completion_tokens": 2}}
PARTIAL = {"text": " w0", "meta_info": {"finish_reason": None, "completion_tokens": 1}}


def _cumulative(n: int) -> bytes:
    """A compact cumulative native stream of n tokens, as SGLang (and the stand-in) sends it."""
    out = []
    for k in range(1, n + 1):
        text = "".join(f" w{i % 97}" for i in range(k))
        ids = ",".join(str(1000 + i % 97) for i in range(k))
        fin = f'{{"type":"length","length":{k}}}' if k == n else "null"
        meta = f'{{"id":"r","finish_reason":{fin},"prompt_tokens":3,"completion_tokens":{k}}}'
        out.append(f'data: {{"text":"{text}","output_ids":[{ids}],"meta_info":{meta}}}\n\n'.encode())
    return b"".join(out) + b"data: [DONE]\n\n"


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (_sse(PARTIAL, FINAL, b"[DONE]"), ""),
        (_sse(PARTIAL, FINAL), "stream_truncated"),
        (_sse(PARTIAL, b"[DONE]"), "stream_unfinished"),
        (_sse(PARTIAL, {"error": {"message": "boom"}}, b"[DONE]"), "stream_error_event"),
        (_sse(PARTIAL, b"{not json", b"[DONE]"), "stream_malformed"),
        (_sse(FINAL, PARTIAL, b"[DONE]"), "stream_count_backwards"),
        (_sse(PARTIAL, FINAL, b"[DONE]", FINAL), "stream_data_after_done"),
        (_sse(PARTIAL, FINAL, b"[DONE]") + b"data: tr", "stream_data_after_done"),
        (b"", "stream_truncated"),
        (_sse(b"[DONE]"), "stream_unfinished"),
    ],
)
def test_check_stream(body: bytes, reason: str) -> None:
    assert check_stream(body, 2) == reason


def test_an_aborted_stream_is_named() -> None:
    aborted = {"text": " w0", "meta_info": {"finish_reason": {"type": "abort", "message": "x"}, "completion_tokens": 1}}
    assert check_stream(_sse(PARTIAL, aborted, b"[DONE]"), 2) == "stream_aborted"


def test_more_tokens_than_asked_is_named() -> None:
    assert check_stream(_sse(PARTIAL, FINAL, b"[DONE]"), 1) == "stream_count_too_high"


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (json.dumps(FINAL).encode(), ""),
        (json.dumps(PARTIAL).encode(), "body_unfinished"),
        (b"<html>", "body_malformed"),
        (b"[]", "body_unfinished"),
    ],
)
def test_check_json(body: bytes, reason: str) -> None:
    assert check_json(body) == reason


def test_check_json_counts_when_asked() -> None:
    assert check_json(json.dumps(FINAL).encode(), 2) == ""
    assert check_json(json.dumps(FINAL).encode(), 3) == "body_unfinished"


def test_a_long_cumulative_stream_is_read_in_bounded_memory() -> None:
    """3,000 tokens (about 26 MB cumulative) fed as 64 KiB reads: the buffer never holds more than
    one event and one read, and the first token is timed at its event."""
    body = _cumulative(3000)
    largest = max(len(e) for e in body.split(b"\n\n"))
    reader = StreamReader(3000)
    peak = 0
    for i, pos in enumerate(range(0, len(body), READ_BYTES)):
        assert reader.feed(body[pos : pos + READ_BYTES], float(i))
        peak = max(peak, len(reader.buf))
    assert reader.close() == ""
    assert reader.tokens == 3000
    assert reader.first_token_t == 0.0
    assert len(body) > 20 * 1024 * 1024
    assert peak <= largest + READ_BYTES


def test_an_event_past_the_bound_fails_by_name_and_frees_the_buffer() -> None:
    reader = StreamReader(5, max_event=4096)
    assert reader.feed(b"data: {" + b"x" * 3000, 0.0)
    assert not reader.feed(b"x" * 2000, 0.0)
    assert reader.reason == "stream_event_too_large"
    assert len(reader.buf) == 0
    assert reader.close() == "stream_event_too_large"
    assert not reader.feed(_sse(PARTIAL), 0.0)


def test_complete_events_over_the_bound_fail_too() -> None:
    big = {"text": "x" * 5000, "meta_info": {"completion_tokens": 1}}
    reader = StreamReader(1, max_event=4096)
    reader.feed(_sse(big, b"[DONE]"), 0.0)
    assert reader.close() == "stream_event_too_large"


@settings(max_examples=examples(50))
@given(n=st.integers(1, 40), cuts=st.lists(st.integers(0, 10_000), max_size=12))
def test_a_correct_stream_is_ok_however_it_is_cut(n: int, cuts: list[int]) -> None:
    body = _cumulative(n)
    points = sorted({c % (len(body) + 1) for c in cuts} | {0, len(body)})
    reader = StreamReader(n)
    for a, b in itertools.pairwise(points):
        assert reader.feed(body[a:b], 0.0)
    assert reader.close() == ""
    assert reader.tokens == n


_LINES = st.sampled_from(
    [
        b"data: [DONE]",
        b"data: " + json.dumps(PARTIAL).encode(),
        b"data: " + json.dumps(FINAL).encode(),
        b'data: {"error": {"message": "x"}}',
        b"data: {",
        b": keep-alive",
        b"event: x",
        b"",
        b"data:",
        b"\r",
        b"data: " + b"y" * 3000,
    ]
)


@given(
    parts=st.lists(st.one_of(st.binary(max_size=200), _LINES.map(lambda line: line + b"\n")), max_size=30),
    cuts=st.lists(st.integers(0, 1 << 16), max_size=8),
)
def test_any_bytes_are_a_named_failure_or_a_correct_stream(parts: list[bytes], cuts: list[int]) -> None:
    """Arbitrary bytes and SSE lines, cut anywhere: never an exception, the buffer stays bounded,
    the verdict is '' or a named reason, and it does not depend on where the reads were cut."""
    body = b"".join(parts)
    whole = check_stream(body, 2)
    assert whole == "" or whole in STREAM_REASONS
    reader = StreamReader(2, max_event=2048)
    points = sorted({c % (len(body) + 1) for c in cuts} | {0, len(body)})
    for a, b in itertools.pairwise(points):
        reader.feed(body[a:b], 0.0)
        assert len(reader.buf) <= 2048 + 8
    verdict = reader.close()
    assert verdict == "" or verdict in STREAM_REASONS
    if whole == "":
        # an accepted stream holds no event over 2,048 bytes unless it was rejected as too large
        assert verdict in ("", "stream_event_too_large")
    if verdict == "":
        assert whole == ""


@given(raw=st.binary(max_size=300))
def test_a_phase_file_names_a_phase_or_is_invalid(tmp_path_factory: pytest.TempPathFactory, raw: bytes) -> None:
    path = tmp_path_factory.mktemp("phase") / "phase"
    path.write_bytes(raw)
    phase = read_phase(str(path))
    assert phase == "invalid" or traffic.PHASE_RE.fullmatch(phase)
    if phase != "invalid":
        assert phase == raw.decode("ascii").strip()


def test_a_missing_phase_file_is_unmarked(tmp_path: Path) -> None:
    assert read_phase(str(tmp_path / "nope")) == "unmarked"
    (tmp_path / "p").write_text("during/../x\n")
    assert read_phase(str(tmp_path / "p")) == "invalid"
    (tmp_path / "p").write_text(" rollout\n")
    assert read_phase(str(tmp_path / "p")) == "rollout"


@given(values=st.lists(st.floats(0, 1e6), min_size=1, max_size=60), q=st.sampled_from([50, 99, 100]))
def test_percentile_is_a_nearest_rank(values: list[float], q: int) -> None:
    p = percentile(values, q)
    ordered = sorted(values)
    assert p in values
    assert sum(v <= p for v in ordered) >= q / 100 * len(values)
    assert sum(v < p for v in ordered) < q / 100 * len(values) or p == ordered[0]


def test_percentile_of_nothing_is_none() -> None:
    assert percentile([], 50) is None
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([float(i) for i in range(1, 101)], 99) == 99.0


@pytest.mark.parametrize(
    "argv",
    [
        ["--url", "https://gw:8080"],
        ["--url", "http://gw:8080", "--concurrency", "0"],
        ["--url", "http://gw:8080", "--max-new-tokens", "100,0"],
        ["--url", "http://gw:8080", "--max-new-tokens", "many"],
        ["--url", "http://gw:8080", "--load-fraction", "0.6"],
        ["--url", "http://gw:8080", "--load-fraction", "0.6", "--rate", "2", "--capacity-tokens-per-s", "9"],
        ["--url", "http://gw:8080", "--rate", "-1"],
        ["--url", "http://gw:8080", "--capacity-probe-s", "3", "--metrics-url", "ftp://x"],
        ["--url", "http://gw:8080", "--max-event-bytes", "10"],
    ],
)
def test_bad_arguments_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(argv)
    assert exc.value.code == 2


def test_a_token_mix_is_parsed() -> None:
    assert parse_args(["--url", "http://gw:1", "--max-new-tokens", "1000,4000"]).tokens == [1000, 4000]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Generate(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        body = json.dumps(FINAL).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize("retry_s", [0.0, 5.0])
def test_refused_connection_retried_only_when_asked(retry_s: float) -> None:
    """A port that opens 0.5 s later: without --retry-refused-s the request fails, with it it is ok."""
    port = _free_port()
    servers: list[http.server.HTTPServer] = []

    def open_later() -> None:
        time.sleep(0.5)
        servers.append(http.server.HTTPServer(("127.0.0.1", port), _Generate))
        servers[0].serve_forever()

    threading.Thread(target=open_later, daemon=True).start()
    tally = Tally()
    target = urllib.parse.urlsplit(f"http://127.0.0.1:{port}")
    ok, reason, _detail, _ttft = one_request(target, {}, b"{}", False, 5.0, retry_refused_s=retry_s, tally=tally)
    try:
        if retry_s:
            assert (ok, reason) == (True, "")
            assert tally.refused_connects >= 1
        else:
            assert (ok, reason) == (False, "ConnectionRefusedError")
            assert tally.refused_connects == 0
    finally:
        while not servers:
            time.sleep(0.05)
        servers[0].shutdown()
        servers[0].server_close()


def test_retry_refused_must_not_be_negative() -> None:
    with pytest.raises(SystemExit):
        parse_args(["--url", "http://127.0.0.1:1", "--retry-refused-s", "-1"])


@pytest.fixture
def standin(tmp_path: Path):
    """The SGLang stand-in at 20,000 tok/s with metrics, at most 2 requests running."""
    env = {"STANDIN_TOKENS_PER_S": "20000", "STANDIN_MAX_RUNNING": "2"}
    with sglang_standin(tmp_path, "--enable-metrics", env=env) as running:
        yield running.url


def test_the_standin_caps_one_requests_rate(tmp_path: Path) -> None:
    """STANDIN_REQUEST_TOKENS_PER_S=1000 at 20,000 tok/s: 400 tokens take 0.4 s alone and about as long
    with 4 running (the aggregate rate is not reached), as a batching GPU decodes."""
    env = {"STANDIN_TOKENS_PER_S": "20000", "STANDIN_REQUEST_TOKENS_PER_S": "1000"}
    payload = json.dumps({"text": "x", "sampling_params": {"max_new_tokens": 400, "ignore_eos": True}}).encode()
    with sglang_standin(tmp_path, "--enable-metrics", env=env) as running:
        target = urllib.parse.urlsplit(running.url)
        took = []
        for clients in (1, 4):
            t0 = time.monotonic()
            threads = [
                threading.Thread(target=one_request, args=(target, {}, payload, False, 30.0)) for _c in range(clients)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            took.append(time.monotonic() - t0)
        assert 0.38 < took[0] < 3
        assert 0.38 < took[1] < 3


def _run_traffic(*argv: str, timeout: float = 60) -> dict:
    out = subprocess.run(
        [sys.executable, str(TRAFFIC), *argv, "--report-every-s", "100"],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("TRAFFIC ")]
    assert lines, out.stderr[-2000:]
    return json.loads(lines[-1][8:])


def test_open_loop_at_a_fixed_rate_with_phases(standin: str, tmp_path: Path) -> None:
    """20 arrivals/s for 2 s, the phase file switched once 8 requests were sent: every request ok,
    each filed under the phase it was sent in, TTFT per phase."""
    phase = tmp_path / "phase"
    phase.write_text("before\n")
    argv = [sys.executable, str(TRAFFIC), "--url", standin, "--rate", "20", "--arrivals", "fixed", "--stream"]
    argv += ["--max-new-tokens", "20,60", "--duration-s", "2", "--phase-file", str(phase), "--report-every-s", "0.1"]
    proc = subprocess.Popen([*argv, "--requests-out", str(tmp_path / "req.jsonl")], stdout=subprocess.PIPE, text=True)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("{") and json.loads(line)["sent"] >= 8 and phase.read_text() == "before\n":
            phase.write_text("during\n")
    proc.wait(timeout=60)
    summary = json.loads(lines[-1][8:])
    assert summary["mode"] == "open"
    assert summary["failed"] == 0
    assert 35 <= summary["sent"] <= 42
    assert summary["ok"] == summary["sent"]
    phases = summary["phases"]
    assert set(phases) == {"before", "during"}
    assert all(p["sent"] >= 5 and p["ttft"]["n"] == p["ok"] for p in phases.values())
    assert summary["ttft"]["n"] == summary["sent"]
    assert 0 < summary["ttft"]["p50_s"] <= summary["ttft"]["p99_s"]
    records = [json.loads(line) for line in (tmp_path / "req.jsonl").read_text().splitlines()]
    assert len(records) == summary["sent"]
    assert {r["max_new_tokens"] for r in records} == {20, 60}


def test_load_fraction_of_a_given_capacity(standin: str) -> None:
    summary = _run_traffic(
        *("--url", standin, "--load-fraction", "0.5", "--capacity-tokens-per-s", "2000"),
        *("--max-new-tokens", "50", "--stream", "--duration-s", "1"),
    )
    assert summary["rate_rps"] == 20.0
    assert summary["capacity"] == {"source": "given", "tokens_per_s": 2000.0}
    assert summary["failed"] == 0


def test_load_fraction_of_a_probed_capacity(tmp_path: Path) -> None:
    """The probe reads sglang:generation_tokens_total while 4 clients keep the stand-in (4,000 tok/s,
    2 running) busy: its rate, roughly; the open loop then runs at the fraction of it."""
    env = {"STANDIN_TOKENS_PER_S": "4000", "STANDIN_MAX_RUNNING": "2"}
    with sglang_standin(tmp_path, "--enable-metrics", env=env) as running:
        url = running.url
        summary = _run_traffic(
            *("--url", url, "--load-fraction", "0.1", "--capacity-probe-s", "1.5", "--probe-concurrency", "4"),
            *("--metrics-url", url, "--max-new-tokens", "2000", "--stream", "--duration-s", "3"),
        )
    cap = summary["capacity"]
    assert cap["source"] == "metrics"
    # 4,000 configured: never more (a probe that counted a token twice, or used too short a window, reads
    # more); a loaded machine runs the stand-in slower (at load average 40 it read under 1,500), so the
    # lower bound only rules out a probe that read nothing or the wrong counter
    assert 400 < cap["tokens_per_s"] < 4400
    assert summary["rate_rps"] == pytest.approx(0.1 * cap["tokens_per_s"] / 2000, rel=1e-3)
    assert summary["phases"]["capacity_probe"]["sent"] >= 4
    assert summary["failed"] == 0


def test_the_standin_reports_its_queue(standin: str) -> None:
    """Past its running cap (2) requests wait, and /metrics says how many (the drain waits for both)."""
    threads = [
        threading.Thread(
            target=one_request,
            args=(
                urllib.parse.urlsplit(standin),
                {},
                json.dumps({"text": "x", "sampling_params": {"max_new_tokens": 20000, "ignore_eos": True}}).encode(),
                False,
                30.0,
            ),
            daemon=True,
        )
        for _round in range(5)
    ]
    for t in threads:
        t.start()
    time.sleep(0.5)
    text = urllib.request.urlopen(f"{standin}/metrics", timeout=5).read().decode()
    gauges = {
        line.split("{")[0]: float(line.rsplit(None, 1)[-1]) for line in text.splitlines() if line.startswith("sglang:")
    }
    assert gauges["sglang:num_running_reqs"] == 2
    assert gauges["sglang:num_queue_reqs"] == 3


def test_an_in_flight_cap_is_a_named_failure(standin: str) -> None:
    summary = _run_traffic(
        *("--url", standin, "--rate", "40", "--arrivals", "fixed", "--max-in-flight", "2"),
        *("--max-new-tokens", "4000", "--stream", "--duration-s", "0.5"),
    )
    assert summary["reasons"].get("client_in_flight_cap", 0) > 0
    assert summary["failed"] == summary["reasons"]["client_in_flight_cap"]


@pytest.mark.parametrize("stream", [True, False])
def test_openai_requests_for_the_served_model(standin: str, stream: bool) -> None:
    """--api openai: /v1/completions for the model /v1/models names; streamed with the count in every
    chunk, so TTFT is measured and the total checked."""
    summary = _run_traffic(
        *("--url", standin, "--api", "openai", "--concurrency", "2", "--max-new-tokens", "30,90"),
        *(["--stream"] if stream else []),
        *("--duration-s", "0.5"),
    )
    assert summary["failed"] == 0
    assert summary["sent"] >= 2
    assert summary["ttft"]["n"] == (summary["sent"] if stream else 0)
    assert summary["tokens"] >= 60


def test_an_openai_stream_short_of_its_count_is_named() -> None:
    chunk = {"choices": [{"text": " w", "finish_reason": None}], "usage": {"completion_tokens": 1}}
    last = {"choices": [{"text": " w", "finish_reason": "length"}], "usage": {"completion_tokens": 2}}
    assert check_stream(_sse(chunk, last, b"[DONE]"), 2, api="openai") == ""
    assert check_stream(_sse(chunk, b"[DONE]"), 2, api="openai") == "stream_unfinished"
    assert check_json(json.dumps(last).encode(), 2, api="openai") == ""
    assert check_json(json.dumps(last).encode(), 3, api="openai") == "body_unfinished"
    assert check_json(b'{"choices": "x"}', None, api="openai") == "body_unfinished"


def test_no_served_model_is_refused_by_name() -> None:
    port = _free_port()
    server = http.server.HTTPServer(("127.0.0.1", port), _Generate)  # answers 501 to GET
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(SystemExit, match="pass --model NAME"):
            traffic.served_model(urllib.parse.urlsplit(f"http://127.0.0.1:{port}"), {}, 5.0)
    finally:
        server.shutdown()
        server.server_close()
