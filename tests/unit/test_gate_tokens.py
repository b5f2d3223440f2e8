# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Claimed and carried tokens (issue 22): a server's completion_tokens is bounded by the output_ids,
token_ids or text its events carry (docs/gate-stream-checks.md), on the fast path and the json path
alike; the stand-in's own events pass; the SSE/event parser never raises anything but SSEError."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lib.sse import native_event
from standins import sglang_api

from ansible_collections.gpufleet.sglang.plugins.module_utils.gate import http as gate_http
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate import meter as gate_meter
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.sse import (
    OVER_REPORTED,
    SSEError,
    StreamChecker,
    split_events,
)


class SlowChecker(StreamChecker):
    """Every event decoded with json (the fast path switched off)."""

    def _fast_native(self, p: bytes) -> None:
        return None


CHECKERS = (StreamChecker, SlowChecker)


class CountingChecker(StreamChecker):
    """Counts the events the fast path accepted."""

    fast = 0

    def _fast_native(self, p: bytes) -> tuple[int, int] | None:
        got = super()._fast_native(p)
        self.fast += got is not None
        return got


def native(counts: list[int], ids: list[int], *, spaced: bool = False, final: bool = True) -> list[bytes]:
    """Native events: event k claims counts[k] and carries ids[k] output_ids (ids 1000.., text ' t')."""
    out = []
    for k, (ct, n) in enumerate(zip(counts, ids, strict=True)):
        last = final and k == len(counts) - 1
        obj = native_event(" t" * n, [1000 + i for i in range(n)], ct, final_length=ct if last else None)
        out.append(json.dumps(obj, separators=(", ", ": ") if spaced else (",", ":")).encode())
    return out


def check(payloads: list[bytes], expected: int, api: str = "native", cls=StreamChecker) -> int:
    c = cls(api, expected, 1 << 20)
    for p in payloads:
        c.event(p)
    return c.tokens


# ------------------------------------------------------------------ named cases: honest and over-reporting


HONEST = [
    ("cumulative, one token per event", [1, 2, 3, 4], [1, 2, 3, 4]),
    ("cumulative, stream interval 3", [1, 3, 6, 8], [1, 3, 6, 8]),
    ("cumulative, ids ahead of the count (SGLang passes the id list by reference)", [1, 2, 4, 8], [2, 3, 5, 8]),
    ("incremental, one token per event", [1, 2, 3, 4], [1, 1, 1, 1]),
    ("incremental, coalesced deltas", [1, 3, 4, 8], [1, 2, 1, 4]),
    ("a first event without tokens", [0, 1, 2, 8], [0, 1, 2, 8]),
]


@pytest.mark.parametrize(("name", "counts", "ids"), HONEST, ids=[h[0] for h in HONEST])
@pytest.mark.parametrize("spaced", [False, True])
@pytest.mark.parametrize("cls", CHECKERS)
def test_honest_streams_pass(name, counts, ids, spaced, cls):
    del name
    assert check([*native(counts, ids, spaced=spaced), b"[DONE]"], counts[-1], cls=cls) == counts[-1]


INFLATED = [
    # the reviewer's case: the final event claims every token asked for, its output_ids hold half
    ("cumulative, final event claims double", [1, 2, 3, 8], [1, 2, 3, 4], "claims completion_tokens 8 but carries 4"),
    ("every event claims double", [2, 4, 6, 8], [1, 2, 3, 4], "claims completion_tokens 2 but the stream carried 1"),
    ("cumulative, jump mid-stream", [1, 2, 7, 8], [1, 2, 3, 8], "claims completion_tokens 7 but carries 3"),
    ("incremental, delta claims more", [1, 2, 5, 8], [1, 1, 1, 3], "carried 3 output_ids in all"),
    ("incremental, one event claims all", [1, 8], [1, 1], "carried 2 output_ids in all"),
    ("no ids at all", [1, 2, 8], [0, 0, 0], "claims completion_tokens 1 but"),
]


@pytest.mark.parametrize(("name", "counts", "ids", "needle"), INFLATED, ids=[i[0] for i in INFLATED])
@pytest.mark.parametrize("spaced", [False, True])
@pytest.mark.parametrize("cls", CHECKERS)
def test_over_reporting_streams_fail_with_a_named_reason(name, counts, ids, needle, spaced, cls):  # noqa: PLR0917
    del name
    with pytest.raises(SSEError, match=OVER_REPORTED) as err:
        check([*native(counts, ids, spaced=spaced), b"[DONE]"], 8, cls=cls)
    assert needle in str(err.value)


def test_a_stream_cannot_switch_reading_after_it_has_counted():
    # cumulative for three events (fixed at the second), then deltas: the Sigma reading would allow it
    with pytest.raises(SSEError, match=OVER_REPORTED):
        check(native([1, 2, 3, 6], [1, 2, 3, 3]), 8)
    # incremental first (fixed at the second event), then a cumulative-looking event claiming its length
    with pytest.raises(SSEError, match=OVER_REPORTED):
        check(native([1, 2, 6], [1, 1, 6]), 8)


def test_native_event_without_output_ids_is_bounded_by_its_text():
    ok = [b'{"text":"abc","meta_info":{"completion_tokens":3}}', b"[DONE]"]
    assert check(ok, 3) == 3
    with pytest.raises(SSEError, match=OVER_REPORTED):
        check([b'{"text":"ab","meta_info":{"completion_tokens":3}}'], 3)
    with pytest.raises(SSEError, match="output_ids is not a list of integers"):
        check([b'{"text":"ab","output_ids":[1,"x"],"meta_info":{"completion_tokens":1}}'], 3)
    with pytest.raises(SSEError, match="text is not a string"):
        check([b'{"text":7,"meta_info":{"completion_tokens":1}}'], 3)


def openai_chunk(text: str | None, ct: int | None, token_ids: list[int] | None = None) -> bytes:
    choice: dict[str, object] = {"index": 0, "text": text, "logprobs": None, "finish_reason": None}
    if token_ids is not None:
        choice["token_ids"] = token_ids
    usage = None if ct is None else {"prompt_tokens": 4, "completion_tokens": ct, "total_tokens": ct + 4}
    return json.dumps({"id": "c", "object": "text_completion", "choices": [choice], "usage": usage}).encode()


def test_openai_counts_are_bounded_by_token_ids_or_text():
    assert check([openai_chunk(" a", 1), openai_chunk(" b", 2), b"[DONE]"], 2, api="openai") == 2
    assert check([openai_chunk("", 1, [5]), openai_chunk("", 2, [5]), b"[DONE]"], 2, api="openai") == 2
    with pytest.raises(SSEError, match=OVER_REPORTED):  # 3 tokens claimed, 2 token ids carried
        check([openai_chunk("x", 1, [5]), openai_chunk("yy", 3, [6])], 3, api="openai")
    with pytest.raises(SSEError, match=OVER_REPORTED):  # 4 tokens claimed, 3 bytes of text
        check([openai_chunk("a", 1), openai_chunk("bc", 4)], 4, api="openai")
    final = json.dumps({"id": "c", "choices": [], "usage": {"completion_tokens": 9}}).encode()
    with pytest.raises(SSEError, match=OVER_REPORTED):  # a final usage chunk beyond the text sent
        check([openai_chunk(" a", None), openai_chunk(" b", None), final], 9, api="openai")
    with pytest.raises(SSEError, match="a choice that is not an object"):
        check([b'{"choices":[1],"usage":{"completion_tokens":1}}'], 1, api="openai")


def test_client_marks_an_over_reporting_trial_invalid():
    """The load client's view: the request is an error (so the trial is invalid), and the inflated
    count never reaches the meter's tokens."""
    events = native([1, 2, 3, 8], [1, 2, 3, 4])
    body = b"".join(b"data: " + e + b"\n\n" for e in events) + b"data: [DONE]\n\n"
    raw = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        + b"%x\r\n%b\r\n0\r\n\r\n" % (len(body), body)
    )

    async def go() -> gate_meter.Meter:
        meter = gate_meter.Meter(concurrency=1, expected_tokens=8)
        conn = gate_http.StreamConnection(meter, gate_http.Shape("native", "m", 4, 8))

        class Sink:
            def write(self, data: bytes) -> None:
                pass

            def close(self) -> None:
                pass

        conn.transport = Sink()  # type: ignore[assignment]
        conn.send(b"", False)
        conn.data_received(raw)
        return meter

    meter = asyncio.run(go())
    assert meter.completed == 0
    assert meter.tokens == 3
    assert any(OVER_REPORTED in m for m in meter.errors), meter.errors


# ------------------------------------------------------------------ the stand-in's own events


def standin_events(api: str, incremental: bool, steps: list[int]) -> list[bytes]:
    """What tests/standins/sglang_api.py streams for a request decoded in ``steps`` (cumulative k)."""
    flags: dict[str, object] = {"model_path": "bench/model"}
    if incremental:
        flags["incremental_streaming_output"] = True
    server = sglang_api.Server(sglang_api.Config(flags))
    proto = sglang_api.HTTPProtocol(server)
    req = sglang_api.Request(proto, "rid1", api, prompt_tokens=4, max_new=steps[-1], stream=True)
    req.continuous_usage = req.include_usage = api == "openai"
    out = []
    for k in steps:
        req.k = k
        event = proto._event(req, final=k == steps[-1])
        assert event.startswith(b"data: ")
        assert event.endswith(b"\n\n")
        out.append(event[6:-2])
        req.sent_k = k
    return [*out, b"[DONE]"]


@pytest.mark.parametrize("api", ["native", "openai"])
@pytest.mark.parametrize("incremental", [False, True])
@pytest.mark.parametrize("steps", [list(range(1, 257)), [1, 5, 9, 64, 65, 200, 256], [3, 256]])
def test_the_standins_events_pass_the_check(api, incremental, steps):
    events = standin_events(api, incremental, steps)
    for cls in CHECKERS:
        assert check(events, steps[-1], api=api, cls=cls) == steps[-1]
    if api == "native":  # SGLang's compact format: the fast path takes every event but the final one,
        fast = CountingChecker("native", steps[-1], 1 << 20)  # whose meta_info holds an object (finish_reason)
        for e in events:
            fast.event(e)
        assert fast.fast == len(events) - 2


# ------------------------------------------------------------------ fuzz: arbitrary input, named errors only


@given(data=st.binary(max_size=400), api=st.sampled_from(["native", "openai"]))
def test_arbitrary_bytes_give_a_named_error_or_a_count(data, api):
    buf = bytearray(data + b"\n\n")
    c = StreamChecker(api, 16, 4096)
    try:
        for payload in split_events(buf):
            tokens = c.event(payload)
            assert 0 <= tokens <= 16
    except SSEError:
        pass


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 300) | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
KEYS = st.sampled_from(["text", "output_ids", "meta_info", "completion_tokens", "choices", "usage", "error", "x"])
SHAPED = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 40) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=16,
)


@given(
    events=st.lists(st.one_of(JSON, SHAPED), min_size=1, max_size=5),
    api=st.sampled_from(["native", "openai"]),
    spaced=st.booleans(),
)
def test_arbitrary_json_shapes_give_a_named_error_or_a_count(events, api, spaced):
    seps = (", ", ": ") if spaced else (",", ":")
    c = StreamChecker(api, 40, 1 << 16)
    try:
        for e in events:
            tokens = c.event(json.dumps(e, separators=seps).encode())
            assert 0 <= tokens <= 40
            assert tokens <= c.ids_seen + c.text_seen
    except SSEError:
        pass


@given(
    steps=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=12),
    spaced=st.booleans(),
)
def test_random_native_streams_obey_the_rule_on_both_paths(steps, spaced):
    """Events claiming a running count and carrying some ids: the fast path and json agree, and an
    accepted stream never counted more than it carried under the reading it settled on."""
    counts, ids, total = [], [], 0
    for grow, n in steps:
        total += grow
        counts.append(total)
        ids.append(n)
    events = native(counts, ids, spaced=spaced, final=False)
    outcomes = []
    for cls in CHECKERS:
        c = cls("native", 100, 1 << 20)
        try:
            for e in events:
                c.event(e)
            outcomes.append(("ok", c.tokens, c.mode))
        except SSEError as exc:
            outcomes.append(("error", OVER_REPORTED in str(exc) or "went backwards" in str(exc)))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0] != ("error", False)  # only the two named reasons
    if outcomes[0][0] == "ok":
        carried_cumulative = all(ct <= n for ct, n in zip(counts, ids, strict=True))
        running, carried_incremental, prev = 0, True, 0
        for ct, n in zip(counts, ids, strict=True):
            running += n
            carried_incremental &= ct <= running and n <= ct - prev
            prev = ct
        assert carried_cumulative or carried_incremental
