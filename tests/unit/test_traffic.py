"""tests/tools/traffic.py: what counts as a failed request (the rolling-upgrade test asserts zero)."""

from __future__ import annotations

import json

import pytest
from tools.traffic import check_json, check_stream, parse_args


def _sse(*events: object) -> bytes:
    return b"".join(b"data: " + (e if isinstance(e, bytes) else json.dumps(e).encode()) + b"\n\n" for e in events)


FINAL = {"text": " w0 w1", "meta_info": {"finish_reason": {"type": "length", "length": 2}, "completion_tokens": 2}}
PARTIAL = {"text": " w0", "meta_info": {"finish_reason": None, "completion_tokens": 1}}


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (_sse(PARTIAL, FINAL, b"[DONE]"), ""),
        (_sse(PARTIAL, FINAL), "stream_truncated"),
        (_sse(PARTIAL, b"[DONE]"), "stream_unfinished"),
        (_sse(PARTIAL, {"error": {"message": "boom"}}, b"[DONE]"), "stream_error_event"),
        (_sse(PARTIAL, b"{not json", b"[DONE]"), "stream_malformed"),
        (b"", "stream_truncated"),
    ],
)
def test_check_stream(body: bytes, reason: str) -> None:
    assert check_stream(body) == reason


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


@pytest.mark.parametrize(
    "argv",
    [["--url", "https://gw:8080"], ["--url", "http://gw:8080", "--concurrency", "0"]],
)
def test_bad_arguments_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(argv)
    assert exc.value.code == 2
