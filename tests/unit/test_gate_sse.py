# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""SSE parsing (native cumulative, native incremental, OpenAI with usage) and the client's
HTTP/chunked/SSE state machine fed byte streams cut at every position."""

from __future__ import annotations

import asyncio
import json
import random
import re
import resource

import pytest
from lib.sse import native_event

from ansible_collections.gpufleet.sglang.plugins.module_utils.gate import client as gate_client
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate import http as gate_http
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate import meter as gate_meter
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.sse import (
    SSEError,
    StreamChecker,
    decode_event,
    split_events,
)


def native_events(n: int, incremental: bool, interval: int = 1) -> list[bytes]:
    words = [f" w{i}" for i in range(n)]
    ids = list(range(1000, 1000 + n))
    out = []
    sent = 0
    for k in range(1, n + 1):
        if not (k == 1 or k % interval == 0 or k == n):
            continue
        a = sent if incremental else 0
        event = native_event("".join(words[a:k]), ids[a:k], k, rid="r1", final_length=n if k == n else None)
        out.append(json.dumps(event).encode())
        sent = k
    return out


def openai_events(n: int, usage: bool = True) -> list[bytes]:
    out = []
    for k in range(n):
        chunk = {
            "id": "cmpl-1",
            "object": "text_completion",
            "choices": [{"index": 0, "text": f" w{k}", "finish_reason": "length" if k == n - 1 else None}],
            "usage": None,
        }
        out.append(json.dumps(chunk).encode())
    if usage:
        out.append(
            json.dumps(
                {
                    "id": "cmpl-1",
                    "choices": [],
                    "usage": {"prompt_tokens": 4, "completion_tokens": n, "total_tokens": n + 4},
                }
            ).encode()
        )
    return out


def sse(payloads: list[bytes]) -> bytes:
    return b"".join(b"data: " + p + b"\n\n" for p in payloads) + b"data: [DONE]\n\n"


def test_split_keeps_partial_event_and_has_no_line_limit():
    big = b'{"text":"' + b"x" * 5_000_000 + b'","meta_info":{"completion_tokens":3}}'
    buf = bytearray(b"data: " + big[:1000])
    assert split_events(buf) == []
    buf += big[1000:] + b"\n\n: keepalive comment\n\nevent: x\ndata: [DONE]\n\n"
    out = split_events(buf)
    assert out == [big, b"[DONE]"]


def test_garbage_is_not_an_event():
    with pytest.raises(SSEError, match="not a server-sent event"):
        split_events(bytearray(b"<html>502 Bad Gateway</html>\n\n"))


def test_error_events_and_bad_json():
    with pytest.raises(SSEError, match="server sent an error event: boom"):
        decode_event(b'{"error": {"message": "boom"}}')
    with pytest.raises(SSEError, match="not JSON"):
        decode_event(b'{"text": "a')


# --------------------------------------------------------------------------- client state machine


class FakeTransport:
    def __init__(self) -> None:
        self.written = b""
        self.closed = False

    def write(self, data: bytes) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True


def chunked(body: bytes, sizes: list[int]) -> bytes:
    out = b""
    i = 0
    k = 0
    while i < len(body):
        n = sizes[k % len(sizes)]
        out += b"%x\r\n" % len(body[i : i + n]) + body[i : i + n] + b"\r\n"
        i += n
        k += 1
    return out + b"0\r\n\r\n"


def response(body: bytes, sizes: list[int]) -> bytes:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    return head + chunked(body, sizes)


def feed(raw: bytes, cut: int, api: str = "native", expected: int = 10) -> gate_meter.Meter:
    async def go() -> gate_meter.Meter:
        meter = gate_meter.Meter(concurrency=1, expected_tokens=expected)
        conn = gate_http.StreamConnection(meter, gate_http.Shape(api, "m", 4, expected))
        conn.transport = FakeTransport()  # type: ignore[assignment]
        fut = conn.send(b"GET / HTTP/1.1\r\n\r\n", True)
        for i in range(0, len(raw), cut):
            conn.data_received(raw[i : i + cut])
        assert fut.done(), "response not complete"
        return meter

    return asyncio.run(go())


@pytest.mark.parametrize("cut", [1, 2, 7, 64, 100_000])
@pytest.mark.parametrize("incremental", [False, True])
def test_client_counts_server_tokens_at_any_cut(cut, incremental):
    raw = response(sse(native_events(10, incremental, interval=3)), [50, 7, 300])
    meter = feed(raw, cut)
    assert meter.errors == {}
    assert meter.tokens == 10
    assert meter.completed == 1
    assert meter.events == len(native_events(10, incremental, interval=3))
    assert meter.window_start is not None  # the single worker's first token opened the window
    assert len(meter.ttft) == 1


@pytest.mark.parametrize("cut", [1, 13, 100_000])
def test_client_openai_usage(cut):
    meter = feed(response(sse(openai_events(10)), [40]), cut, api="openai")
    assert meter.errors == {}
    assert meter.tokens == 10


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        (
            b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 28\r\n\r\n" + b'{"error":{"message":"oops"}}',
            "HTTP 500",
        ),
        (response(sse([b'{"error": {"message": "CUDA error"}}']), [1000]), "server sent an error event: CUDA error"),
        (response(sse(native_events(10, False))[:-16], [1000]), "stream ended without data: [DONE]"),
        (response(sse(native_events(5, False)), [1000]), "wrong token count: asked for 10"),
        (response(b'data: {"meta_info": {"completion_tokens": \n\ndata: [DONE]\n\n', [1000]), "malformed event"),
        (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n", "bad chunked encoding"),
        (b"SSH-2.0-OpenSSH\r\n\r\n", "not an HTTP/1.x response"),
    ],
)
def test_client_errors_are_named(raw, needle):
    async def go() -> gate_meter.Meter:
        meter = gate_meter.Meter(concurrency=1, expected_tokens=10)
        conn = gate_http.StreamConnection(meter, gate_http.Shape("native", "m", 4, 10))
        conn.transport = FakeTransport()  # type: ignore[assignment]
        fut = conn.send(b"x", True)
        conn.data_received(raw)
        if not fut.done():
            conn.connection_lost(None)
        assert fut.done()
        return meter

    meter = asyncio.run(go())
    assert meter.abort
    assert any(needle in m for m in meter.errors), meter.errors


@pytest.mark.parametrize(
    ("url", "needle"),
    [
        ("127.0.0.1:30000", "only http://"),
        ("http://", "has no host"),
        ("http://h:99999", "not a valid URL"),
        ("http://h:1/?q=1", "must not have a query"),
    ],
)
def test_bad_urls(url, needle):
    with pytest.raises(gate_http.GateInputError, match=needle.replace("?", r"\?")):
        gate_http.Target.from_url(url)


def body_of(request: bytes) -> bytes:
    return request.split(b"\r\n\r\n", 1)[1]


def test_target_and_request_shape():
    t = gate_http.Target.from_url("http://10.0.0.5:31000/prefix/")
    assert (t.host, t.port, t.base_path) == ("10.0.0.5", 31000, "/prefix")
    req = gate_http.build_request(t, gate_http.Shape("native", "m", 8, 16, api_key="k"), serial=3)
    head, body = req.split(b"\r\n\r\n", 1)
    assert head.startswith(b"POST /prefix/generate HTTP/1.1")
    assert b"authorization: Bearer k" in head
    obj = json.loads(body)
    assert len(obj["input_ids"]) == 8
    assert obj["sampling_params"] == {"max_new_tokens": 16, "ignore_eos": True, "temperature": 0.0}
    other = json.loads(
        gate_http.build_request(t, gate_http.Shape("native", "m", 8, 16), serial=4).split(b"\r\n\r\n")[1]
    )
    assert other["input_ids"][0] != obj["input_ids"][0]  # no shared prefix between requests
    oai = json.loads(gate_http.build_request(t, gate_http.Shape("openai", "m", 8, 16), serial=1).split(b"\r\n\r\n")[1])
    assert oai["stream_options"]["include_usage"] is True
    assert oai["max_tokens"] == 16


def test_raise_nofile_names_the_hard_limit(monkeypatch):
    monkeypatch.setattr(resource, "getrlimit", lambda _r: (1024, 4096))
    with pytest.raises(gate_http.GateInputError, match="hard RLIMIT_NOFILE is 4096"):
        gate_client.raise_nofile(10_000)
    calls = []
    monkeypatch.setattr(resource, "setrlimit", lambda r, v: calls.append(v))
    assert gate_client.raise_nofile(2048)["soft"] == 2048 + 128
    assert calls == [(2048 + 128, 4096)]


# --------------------------------------------------------------------------- every event checked


def compact(payloads: list[bytes]) -> list[bytes]:
    """The events as SGLang writes them (orjson: no spaces), which the fast path accepts."""
    return [json.dumps(json.loads(p), separators=(",", ":")).encode() for p in payloads]


def run_checker(payloads: list[bytes], expected: int, api: str = "native", cls=StreamChecker) -> int:
    c = cls(api, expected, 1 << 20)
    for p in payloads:
        c.event(p)
    return c.tokens


class SlowChecker(StreamChecker):
    """The reference: every event decoded with json (the fast path switched off)."""

    def _fast_native(self, p: bytes) -> int | None:
        return None


@pytest.mark.parametrize("incremental", [False, True])
def test_checker_accepts_good_streams(incremental):
    events = [*compact(native_events(20, incremental, interval=3)), b"[DONE]"]
    assert run_checker(events, 20) == 20
    assert run_checker(events, 20, cls=SlowChecker) == 20
    assert run_checker([*openai_events(6), b"[DONE]"], 6, api="openai") == 6


GOOD = compact(native_events(6, False))


@pytest.mark.parametrize(
    ("payloads", "needle"),
    [
        ([GOOD[0], GOOD[1][:-5] + b"x" + GOOD[1][-4:], *GOOD[2:], b"[DONE]"], "malformed event"),
        ([GOOD[0], b'{"text":" w0 w1,"meta_info":{"completion_tokens":2}}', *GOOD[2:], b"[DONE]"], "malformed"),
        (
            [GOOD[0], b'{"error":{"message":"boom"},"meta_info":{"completion_tokens":2}}', *GOOD[2:]],
            "error event: boom",
        ),
        ([GOOD[0], GOOD[1][:-1] + b',"error":"x"}', *GOOD[2:]], "error event: x"),
        ([*GOOD[:3], GOOD[1], *GOOD[3:]], "went backwards (3 -> 2)"),
        ([*GOOD, b"[DONE]", GOOD[-1]], "data after [DONE]"),
        ([*GOOD, b"[DONE]", b"[DONE]"], "data after [DONE]"),
        ([*GOOD[:4], b"[DONE]"], "wrong token count: asked for 6"),
        ([b"[DONE]"], "no events before [DONE]"),
        ([GOOD[0], b'{"text":"' + b"x" * (1 << 20) + b'"}'], "more than the 1048576 accepted"),
        ([GOOD[0], b'{"text":"a","meta_info":{"completion_tokens":null}}'], "no integer meta_info.completion_tokens"),
        ([GOOD[0], b'{"text":"a","meta_info":{"completion_tokens":true}}'], "no integer meta_info.completion_tokens"),
        ([GOOD[0], b"[1,2]"], "not a JSON object"),
        ([*GOOD[:5], GOOD[5].replace(b'"completion_tokens":6', b'"completion_tokens":7')], "more than the 6 tokens"),
    ],
)
def test_checker_errors_are_named(payloads, needle):
    for cls in (StreamChecker, SlowChecker):
        with pytest.raises(SSEError, match=re.escape(needle)):
            run_checker(payloads, 6, cls=cls)


def test_checker_openai_errors():
    with pytest.raises(SSEError, match="no usage"):
        run_checker([*openai_events(3, usage=False), b"[DONE]"], 3, api="openai")
    with pytest.raises(SSEError, match="error event"):
        run_checker([openai_events(3)[0], b'{"error":{"message":"x"},"usage":{"completion_tokens":3}}'], 3, "openai")
    with pytest.raises(SSEError, match="no choices list"):
        run_checker([b'{"usage":{"completion_tokens":3}}'], 3, api="openai")


def mutations(rng: random.Random, event: bytes, n: int) -> list[bytes]:
    alphabet = b'{}[]",:\\ 0123456789-.eEnulltruefalse\x00\x1f\x7f\xc3\xa9\xff'
    out = []
    for _attempt in range(n):
        b = bytearray(event)
        for _k in range(rng.randint(1, 3)):
            i = rng.randrange(len(b) + 1)
            op = rng.randrange(3)
            if op == 0 and i < len(b):
                b[i] = rng.choice(alphabet)
            elif op == 1:
                b.insert(i, rng.choice(alphabet))
            elif i < len(b):
                del b[i]
        out.append(bytes(b))
    return out


@pytest.mark.parametrize("incremental", [False, True])
def test_fast_path_agrees_with_json_on_mutated_events(incremental):
    """Whatever the fast path accepts, json accepts with the same count; everything else is decoded."""
    rng = random.Random(20261130 + incremental)
    events = compact(native_events(12, incremental, interval=1))
    accepted_fast = 0
    for k in range(1, len(events)):
        for bad in mutations(rng, events[k], 150):
            outcomes = []
            for cls in (StreamChecker, SlowChecker):
                c = cls("native", 12, 1 << 20)
                for p in events[:k]:
                    c.event(p)
                try:
                    outcomes.append(c.event(bad))
                except SSEError:
                    outcomes.append("error")
            assert outcomes[0] == outcomes[1], bad
            c = StreamChecker("native", 12, 1 << 20)
            for p in events[:k]:
                c.event(p)
            accepted_fast += c._fast_native(bad) is not None
    assert accepted_fast > 0  # the comparison covered the fast path, not only the fallback
