# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""HTTP/1.1 for the throughput gate's load client (stdlib only; runs on the target).

- :class:`Target` (where to send: parsed from the gate's ``url``) and :class:`Shape` (what every
  request of a trial looks like), and :func:`build_request`, the bytes of one request;
- :class:`StreamConnection`, one keep-alive connection as an ``asyncio.Protocol``: it parses the
  response head, decodes chunked transfer encoding and splits server-sent events itself, with no
  per-line or per-event size limit other than the gate's own (:mod:`gate_limits`), and hands every
  event to :class:`gate_sse.StreamChecker` and then to the request's :class:`gate_meter.RequestMeter`.

Every buffer is bounded: a response head, a chunk-size line and an event larger than its limit are
errors, reported to the trial's :class:`gate_meter.Meter`, which stops the trial.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from ansible_collections.gpufleet.sglang.plugins.module_utils.common.secret_mask import mask_url
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.limits import (
    HEAD_MAX_BYTES,
    GateInputError,
    max_event_bytes,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.meter import Meter, RequestMeter
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.sse import (
    SSEError,
    StreamChecker,
    split_events,
)

# ids of synthetic prompt tokens: inside every tokenizer's vocabulary, not special tokens
_PROMPT_ID_BASE = 1000
_PROMPT_ID_SPAN = 20000

__all__ = ["Shape", "StreamConnection", "Target", "bad_header_chars", "build_request"]


def bad_header_chars(value: str) -> bool:
    """True if ``value`` cannot go into an HTTP header as it is (control characters, DEL, non-ASCII)."""
    return any(not 0x20 <= ord(ch) < 0x7F for ch in value)


@dataclass(frozen=True)
class Target:
    host: str
    port: int
    base_path: str
    host_header: str
    basic_auth: str = ""  # "user:password" from the URL, sent as HTTP Basic when no api_key is set

    @classmethod
    def from_url(cls, url: str) -> Target:
        """Parse ``url``. Messages show it with any password masked (the caller masks the whole message too)."""
        shown = mask_url(url)
        if any(ch <= " " or ord(ch) > 0x7E for ch in url):
            raise GateInputError(
                f"url {shown!r} contains a space, a control or a non-ASCII character; write it percent-encoded"
            )
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise GateInputError(f"url {shown!r} is not a valid URL: {exc}") from None
        if parts.scheme != "http":
            raise GateInputError(f"url {shown!r}: only http:// is supported (got scheme {parts.scheme!r})")
        if not parts.hostname:
            raise GateInputError(f"url {shown!r} has no host")
        if parts.query or parts.fragment:
            raise GateInputError(f"url {shown!r} must not have a query or fragment")
        port = port or 80
        userinfo, _at, host_header = parts.netloc.rpartition("@")
        return cls(parts.hostname, port, parts.path.rstrip("/"), host_header, userinfo)

    def auth_header(self, api_key: str | None) -> str:
        """The Authorization header line (with CRLF) for a request, or an empty string."""
        if api_key:
            return f"authorization: Bearer {api_key}\r\n"
        if self.basic_auth:
            return f"authorization: Basic {base64.b64encode(self.basic_auth.encode()).decode()}\r\n"
        return ""


@dataclass(frozen=True)
class Shape:
    """What every request of a trial looks like."""

    api: str  # native | openai
    model: str
    input_len: int
    output_len: int
    api_key: str | None = None

    def validate(self) -> None:
        if self.api not in ("native", "openai"):
            raise GateInputError(f"api must be native or openai, got {self.api!r}")
        if self.input_len < 1:
            raise GateInputError(f"input_len must be >= 1, got {self.input_len}")
        if self.output_len < 1:
            raise GateInputError(f"output_len must be >= 1, got {self.output_len}")
        if self.api == "openai" and not self.model:
            raise GateInputError("api=openai needs model (the served model name)")
        if self.api_key is not None and bad_header_chars(self.api_key):
            raise GateInputError(
                "api_key contains a control character (such as CR or LF), DEL or a non-ASCII character; "
                "it cannot be sent in an HTTP header (value not shown)"
            )

    def path(self) -> str:
        return "/generate" if self.api == "native" else "/v1/completions"


def build_request(target: Target, shape: Shape, serial: int) -> bytes:
    """The HTTP request bytes for request number ``serial``.

    The prompt is ``input_len`` token ids; its first two ids encode ``serial`` so no two requests
    of a run share a prefix (prefix caching would otherwise inflate throughput).
    """
    head_ids = [
        _PROMPT_ID_BASE + serial % _PROMPT_ID_SPAN,
        _PROMPT_ID_BASE + (serial // _PROMPT_ID_SPAN) % _PROMPT_ID_SPAN,
    ]
    ids = (head_ids + [_PROMPT_ID_BASE + (serial * 7 + i) % _PROMPT_ID_SPAN for i in range(shape.input_len)])[
        : shape.input_len
    ]
    if shape.api == "native":
        body: dict[str, object] = {
            "input_ids": ids,
            "sampling_params": {"max_new_tokens": shape.output_len, "ignore_eos": True, "temperature": 0.0},
            "stream": True,
        }
    else:
        body = {
            "model": shape.model,
            "prompt": ids,
            "max_tokens": shape.output_len,
            "ignore_eos": True,
            "temperature": 0.0,
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        }
    payload = json.dumps(body, separators=(",", ":")).encode()
    auth = target.auth_header(shape.api_key)
    head = (
        f"POST {target.base_path}{shape.path()} HTTP/1.1\r\nhost: {target.host_header}\r\n"
        f"content-type: application/json\r\naccept: text/event-stream\r\n{auth}"
        f"content-length: {len(payload)}\r\nconnection: keep-alive\r\n\r\n"
    )
    return head.encode() + payload


def _chunk_size(line: bytes) -> int:
    """The size on a chunk-size line (hex, extensions after ``;`` ignored)."""
    try:
        size = int(line.split(b";", 1)[0], 16)
    except ValueError:
        raise SSEError(f"bad chunked encoding (chunk size {line[:20]!r})") from None
    if size < 0:
        raise SSEError(f"bad chunked encoding (chunk size {line[:20]!r})")
    return size


def _trailers_complete(buf: bytes, i: int) -> bool:
    """After the last chunk's size line (its CRLF at ``i``): whether the optional trailers and the
    empty line that ends them have arrived (an error when they are larger than a response head)."""
    if buf.find(b"\r\n\r\n", i) >= 0:
        return True
    if len(buf) - i > HEAD_MAX_BYTES:
        raise SSEError(f"chunked trailers larger than {HEAD_MAX_BYTES} bytes")
    return False


class StreamConnection(asyncio.Protocol):
    """One keep-alive connection; one streamed request at a time.

    ``request`` is the :class:`RequestMeter` of the request in flight (None before the first).
    """

    def __init__(self, meter: Meter, shape: Shape) -> None:
        self.meter = meter
        self.shape = shape
        self.max_event = max_event_bytes(shape.output_len)
        self.transport: asyncio.Transport | None = None
        self.lost = False
        self.raw = bytearray()
        self.sse = bytearray()
        self.waiter: asyncio.Future[None] | None = None
        self.request: RequestMeter | None = None
        self.reset()

    def reset(self) -> None:
        self.state = "idle"
        self.status = 0
        self.chunked = False
        self.body_left = 0
        self.chunk_left = 0
        self.need_crlf = False
        self.close_after = False
        self.body = bytearray()
        self.checker = StreamChecker(self.shape.api, self.shape.output_len, self.max_event)

    # asyncio callbacks ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if not isinstance(transport, asyncio.Transport):
            raise TypeError(f"expected an asyncio.Transport, got {type(transport).__name__}")
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self.state != "idle" and self.meter.abort:  # closed by us: the trial is already invalid
            self.state = "idle"
            if self.waiter is not None and not self.waiter.done():
                self.waiter.set_result(None)
        elif self.state != "idle":
            self._fail(f"connection closed by the server mid-response{f' ({exc})' if exc else ''}")

    def data_received(self, data: bytes) -> None:
        if self.state == "idle":
            self._fail(f"unexpected bytes from the server between requests: {data[:80]!r}")
            return
        try:
            if self.state == "head":
                self.raw += data
                if not self._parse_head():
                    return
                data = bytes(self.raw)
                self.raw.clear()
            elif self.raw:
                data = bytes(self.raw) + data
                self.raw.clear()
            if self.state == "body":
                self._parse_body(data)
        except SSEError as exc:
            self._fail(str(exc))

    # request lifecycle --------------------------------------------------------------------
    def send(self, request: bytes, first_of_worker: bool) -> asyncio.Future[None]:
        if self.transport is None:
            raise RuntimeError("send() before connection_made()")
        self.reset()
        self.request = RequestMeter(self.meter, first_of_worker, time.perf_counter())
        self.state = "head"
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return self.waiter

    def _resolve(self) -> None:
        self.state = "idle"
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)
        if self.close_after and self.transport is not None:
            self.transport.close()

    def _fail(self, message: str) -> None:
        if self.state == "idle" and self.waiter is not None and self.waiter.done():
            return
        self.state = "idle"
        self.meter.error(message)
        self.close_after = True
        if self.transport is not None:
            self.transport.close()
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def _parse_head(self) -> bool:
        end = self.raw.find(b"\r\n\r\n")
        if end < 0:
            if len(self.raw) > HEAD_MAX_BYTES:
                raise SSEError(f"response head larger than {HEAD_MAX_BYTES} bytes")
            return False
        if end > HEAD_MAX_BYTES:
            raise SSEError(f"response head larger than {HEAD_MAX_BYTES} bytes")
        head = bytes(self.raw[:end]).decode("latin-1")
        del self.raw[: end + 4]
        lines = head.split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise SSEError(f"not an HTTP/1.x response: {lines[0][:80]!r}")
        self.status = int(parts[1])
        length = None
        for line in lines[1:]:
            name, _sep, value = line.partition(":")
            name = name.strip().lower()
            value = value.strip().lower()
            if name == "transfer-encoding" and "chunked" in value:
                self.chunked = True
            elif name == "content-length":
                length = int(value) if value.isdigit() else None
            elif name == "connection" and value == "close":
                self.close_after = True
        if not self.chunked:
            if length is None:
                self.close_after = True
                self.body_left = -1  # until the connection closes
            else:
                self.body_left = length
        self.state = "body"
        self.request.progress(time.perf_counter())
        return True

    def _parse_body(self, buf: bytes) -> None:
        if not self.chunked:
            self._plain_body(buf)
            return
        now = time.perf_counter()  # the events of one read arrived together
        finished = self._decode_chunks(buf, now)
        if self.status != 200:
            self.body += self.sse
            self.sse.clear()
            if finished:
                self._complete_plain(bytes(self.body))
            elif len(self.body) > self.max_event:
                raise SSEError(f"HTTP {self.status} response body larger than {self.max_event} bytes")
            return
        self._stream_events(finished, now)

    def _plain_body(self, buf: bytes) -> None:
        """A body that is not chunked (an error page, not a stream): collected up to its length."""
        self.body += buf
        if self.body_left >= 0 and len(self.body) >= self.body_left:
            self._complete_plain(bytes(self.body[: self.body_left]))
        elif len(self.body) > self.max_event:
            raise SSEError(f"HTTP {self.status} response body larger than {self.max_event} bytes")

    def _decode_chunks(self, buf: bytes, now: float) -> bool:
        """Decode the chunks of ``buf`` into ``sse`` (whole one-event chunks straight to :meth:`_event`);
        an incomplete end is kept in ``raw``. True when the last chunk (and its trailers) arrived."""
        stream = self.status == 200
        sse = self.sse
        pos = 0
        n = len(buf)
        while pos < n:
            if self.chunk_left:
                take = min(self.chunk_left, n - pos)
                sse += buf[pos : pos + take]
                pos += take
                self.chunk_left -= take
                if self.chunk_left:
                    break
                self.need_crlf = True
            if self.need_crlf:
                if n - pos < 2:
                    break
                if buf[pos] != 13 or buf[pos + 1] != 10:
                    raise SSEError("bad chunked encoding (no CRLF after a chunk)")
                pos += 2
                self.need_crlf = False
                continue
            i = buf.find(b"\r\n", pos)
            if i < 0:
                if n - pos > 1024:
                    raise SSEError("bad chunked encoding (chunk size line too long)")
                break
            size = _chunk_size(buf[pos:i])
            if size == 0:  # the last chunk
                if _trailers_complete(buf, i):
                    return True
                break
            start = i + 2
            end = start + size
            # the common case: one whole "data: ...\n\n" event in one whole chunk, no copy to the buffer
            if (
                stream
                and not sse
                and end + 2 <= n
                and buf[end] == 13
                and buf[end + 1] == 10
                and buf.startswith(b"data: ", start)
                and buf.find(b"\n", start, end) == end - 2
                and buf[end - 1] == 10
            ):
                self._event(buf[start + 6 : end - 2], now)
                pos = end + 2
                continue
            pos = start
            self.chunk_left = size
        if pos < n:
            self.raw += buf[pos:]
        return False

    def _stream_events(self, finished: bool, now: float) -> None:
        """Hand the whole events in ``sse`` to :meth:`_event`; at the last chunk, end the request."""
        sse = self.sse
        if sse:
            for payload in split_events(sse):
                self._event(payload, now)
            if len(sse) > self.max_event:
                raise SSEError(f"an event larger than {self.max_event} bytes (no end after {len(sse)} bytes)")
        if finished and self.state == "body":
            if not self.checker.done:
                raise SSEError("stream ended without data: [DONE]")
            self.meter.completed += 1
            self._resolve()

    def _event(self, payload: bytes, now: float) -> None:
        tokens = self.checker.event(payload)
        if not self.checker.done:  # [DONE] counts nothing; anything after it fails in event()
            self.request.event(tokens, now)

    def _complete_plain(self, body: bytes) -> None:
        snippet = body[:200].decode("utf-8", "replace")
        if self.status != 200:
            raise SSEError(f"HTTP {self.status} from the server: {snippet}")
        raise SSEError(f"expected a streamed response (text/event-stream, chunked), got: {snippet}")
