"""tests/tools/traffic.py: what counts as a failed request (the rolling-upgrade test asserts zero)."""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
import urllib.parse

import pytest
from tools.traffic import Tally, check_json, check_stream, one_request, parse_args


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
    ok, reason, _detail = one_request(target, {}, b"{}", False, 5.0, retry_refused_s=retry_s, tally=tally)
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
