# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Closed-loop load client for SGLang's streaming endpoints (stdlib only, one process, asyncio).

Why it looks like this (docs/measurement.md): the clients of the usual benchmarks lose throughput
to a new connection per request, connection pools capped at 100, 64 KB read buffers and 128 KB
line limits, file-descriptor limits and tokenizer CPU. Here:

- ``concurrency`` workers, each with its own HTTP/1.1 keep-alive connection (no pool cap), send
  one request after another (closed loop at fixed concurrency);
- RLIMIT_NOFILE is raised to fit the connections;
- responses are read by an ``asyncio.Protocol`` that decodes chunked transfer encoding and splits
  events itself, with no per-line or per-event size limit;
- tokens are the server's own running ``completion_tokens``, read from raw event bytes
  (:func:`gate_sse.cheap_completion_tokens`); only the final event is decoded;
- throughput is measured over the steady-state window: from the moment every worker has its first
  token until the first worker finds no request left to send (warmup ramp and drain tail excluded).

A trial with any error (HTTP status, error event, malformed event, dropped connection, timeout,
a token count other than the one asked for) is reported as invalid, never as slow.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from array import array
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ansible_collections.gpufleet.sglang.plugins.module_utils.gate_sse import (
    DONE,
    SSEError,
    cheap_completion_tokens,
    decode_event,
    final_native,
    is_error_event,
    split_events,
    usage_tokens,
)

try:  # not on every platform; the module reports what it could do
    import resource
except ImportError:  # pragma: no cover
    resource = None  # type: ignore[assignment]

# ids of synthetic prompt tokens: inside every tokenizer's vocabulary, not special tokens
_PROMPT_ID_BASE = 1000
_PROMPT_ID_SPAN = 20000
_FD_HEADROOM = 128


class GateInputError(ValueError):
    """An option or a URL that cannot work; the message names it."""


@dataclass(frozen=True)
class Target:
    host: str
    port: int
    base_path: str
    host_header: str

    @classmethod
    def from_url(cls, url: str) -> Target:
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise GateInputError(f"url {url!r} is not a valid URL: {exc}") from None
        if parts.scheme != "http":
            raise GateInputError(f"url {url!r}: only http:// is supported (got scheme {parts.scheme!r})")
        if not parts.hostname:
            raise GateInputError(f"url {url!r} has no host")
        if parts.query or parts.fragment:
            raise GateInputError(f"url {url!r} must not have a query or fragment")
        port = port or 80
        host_header = parts.netloc.rsplit("@", 1)[-1]
        return cls(parts.hostname, port, parts.path.rstrip("/"), host_header)


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
    auth = f"authorization: Bearer {shape.api_key}\r\n" if shape.api_key else ""
    head = (
        f"POST {target.base_path}{shape.path()} HTTP/1.1\r\nhost: {target.host_header}\r\n"
        f"content-type: application/json\r\naccept: text/event-stream\r\n{auth}"
        f"content-length: {len(payload)}\r\nconnection: keep-alive\r\n\r\n"
    )
    return head.encode() + payload


def raise_nofile(needed: int) -> dict[str, int]:
    """Raise the soft RLIMIT_NOFILE to fit ``needed`` descriptors; error if the hard limit cannot."""
    if resource is None:  # pragma: no cover
        return {"soft": -1, "hard": -1}
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = needed + _FD_HEADROOM
    if soft != resource.RLIM_INFINITY and soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            raise GateInputError(
                f"concurrency needs about {want} open files but the hard RLIMIT_NOFILE is {hard}; "
                "raise it (LimitNOFILE / ulimit -Hn) or lower concurrency"
            )
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        soft = want
    return {"soft": int(soft), "hard": int(hard)}


def percentiles(values: array | list[float], points: tuple[int, ...] = (50, 90, 99)) -> dict[str, float | None]:
    """Nearest-rank percentiles in milliseconds of values in seconds."""
    if not len(values):
        return {f"p{p}": None for p in points}
    s = sorted(values)
    out: dict[str, float | None] = {}
    for p in points:
        idx = max(0, min(len(s) - 1, math.ceil(p / 100.0 * len(s)) - 1))
        out[f"p{p}"] = round(s[idx] * 1000.0, 3)
    return out


@dataclass
class Meter:
    """Counters shared by all connections of a trial."""

    concurrency: int
    expected_tokens: int
    tokens: int = 0
    events: int = 0
    completed: int = 0
    first_token_workers: int = 0
    window_start: tuple[float, int, int] | None = None  # (time, tokens, events)
    window_end: tuple[float, int, int] | None = None
    errors: dict[str, int] = field(default_factory=dict)
    ttft: array = field(default_factory=lambda: array("d"))
    itl: array = field(default_factory=lambda: array("d"))
    abort: bool = False
    conns: list = field(default_factory=list)

    def error(self, message: str) -> None:
        """Record an error and stop the trial: no new requests, open streams are closed."""
        self.errors[message] = self.errors.get(message, 0) + 1
        if not self.abort:
            self.abort = True
            for c in self.conns:
                if c.transport is not None:
                    c.transport.close()

    def mark_start(self) -> None:
        self.window_start = (time.perf_counter(), self.tokens, self.events)

    def mark_end(self) -> None:
        if self.window_end is None:
            self.window_end = (time.perf_counter(), self.tokens, self.events)


class _Conn(asyncio.Protocol):
    """One keep-alive connection; one request at a time."""

    def __init__(self, meter: Meter, shape: Shape) -> None:
        self.meter = meter
        self.shape = shape
        self.transport: asyncio.Transport | None = None
        self.lost = False
        self.raw = bytearray()
        self.sse = bytearray()
        self.waiter: asyncio.Future[None] | None = None
        self.reset()

    def reset(self) -> None:
        self.state = "idle"
        self.status = 0
        self.chunked = False
        self.body_left = 0
        self.chunk_left = 0
        self.need_crlf = False
        self.close_after = False
        self.tokens = 0
        self.saw_first = False
        self.t_send = 0.0
        self.t_last = 0.0
        self.t_prev = 0.0
        self.last_payload = b""
        self.body = bytearray()
        self.first_of_worker = False
        self.got_done = False

    # asyncio callbacks ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if not isinstance(transport, asyncio.Transport):
            raise AssertionError(f"expected an asyncio.Transport, got {type(transport).__name__}")
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
        now = time.perf_counter()
        self.t_last = now
        if self.state == "idle":
            self._fail(f"unexpected bytes from the server between requests: {data[:80]!r}")
            return
        self.raw += data
        try:
            if self.state == "head" and not self._parse_head():
                return
            if self.state == "body":
                self._parse_body(now)
        except SSEError as exc:
            self._fail(str(exc))

    # request lifecycle --------------------------------------------------------------------
    def send(self, request: bytes, first_of_worker: bool) -> asyncio.Future[None]:
        if self.transport is None:
            raise AssertionError("send() before connection_made()")
        self.reset()
        self.first_of_worker = first_of_worker
        self.state = "head"
        self.t_send = self.t_last = time.perf_counter()
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
            if len(self.raw) > 1 << 20:
                raise SSEError("response head larger than 1 MiB")
            return False
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
        return True

    def _parse_body(self, now: float) -> None:
        if not self.chunked:
            self.body += self.raw
            self.raw.clear()
            if self.body_left >= 0 and len(self.body) >= self.body_left:
                self._complete_plain(bytes(self.body[: self.body_left]))
            return
        raw = self.raw
        pos = 0
        n = len(raw)
        finished = False
        while pos < n:
            if self.chunk_left:
                take = min(self.chunk_left, n - pos)
                self.sse += raw[pos : pos + take]
                pos += take
                self.chunk_left -= take
                if self.chunk_left:
                    break
                self.need_crlf = True
            if self.need_crlf:
                if n - pos < 2:
                    break
                if raw[pos : pos + 2] != b"\r\n":
                    raise SSEError("bad chunked encoding (no CRLF after a chunk)")
                pos += 2
                self.need_crlf = False
                continue
            i = raw.find(b"\r\n", pos)
            if i < 0:
                if n - pos > 1024:
                    raise SSEError("bad chunked encoding (chunk size line too long)")
                break
            try:
                size = int(bytes(raw[pos:i]).split(b";", 1)[0], 16)
            except ValueError:
                raise SSEError(f"bad chunked encoding (chunk size {bytes(raw[pos:i])[:20]!r})") from None
            if size == 0:
                # last chunk; optional trailers end with an empty line
                j = raw.find(b"\r\n\r\n", i)
                if j < 0 and raw[i : i + 4] != b"\r\n\r\n":
                    break
                pos = (j + 4) if j >= 0 else n
                finished = True
                break
            pos = i + 2
            self.chunk_left = size
        if pos:
            del raw[:pos]
        if self.status != 200:
            self.body += self.sse
            self.sse.clear()
            if finished:
                self._complete_plain(bytes(self.body))
            return
        if self.sse and not self.got_done:
            self._events(now)
        if finished and self.state == "body":
            if not self.got_done:
                raise SSEError("stream ended without data: [DONE]")
            self.meter.completed += 1
            self._resolve()

    def _events(self, now: float) -> None:
        meter = self.meter
        for payload in split_events(self.sse):
            if payload == DONE:
                self._check_final()
                self.got_done = True
                self.sse.clear()
                return
            meter.events += 1
            ct = cheap_completion_tokens(payload)
            if ct is None and is_error_event(payload):  # an error event carries no token count
                decode_event(payload)  # raises SSEError with the server's message
            opens_window = False
            if not self.saw_first:
                self.saw_first = True
                self.t_prev = now
                meter.ttft.append(now - self.t_send)
                if self.first_of_worker:
                    meter.first_token_workers += 1
                    opens_window = meter.first_token_workers == meter.concurrency
            if ct is not None and ct != self.tokens:
                delta = ct - self.tokens
                if delta < 0:
                    raise SSEError(f"completion_tokens went backwards ({self.tokens} -> {ct})")
                if self.tokens:
                    meter.itl.append((now - self.t_prev) / delta)
                self.t_prev = now
                self.tokens = ct
                meter.tokens += delta
            if opens_window:
                meter.mark_start()
            self.last_payload = payload

    def _check_final(self) -> None:
        if not self.last_payload:
            raise SSEError("stream had no events before [DONE]")
        obj = decode_event(self.last_payload)
        if self.shape.api == "native":
            tokens, finish = final_native(obj)
        else:
            tokens = usage_tokens(obj)
            if tokens is None:
                raise SSEError("the server sent no usage (stream_options.include_usage not honoured)")
            finish = None
        if tokens != self.tokens:  # server counted more than the events carried (no continuous usage)
            if tokens < self.tokens:
                raise SSEError(f"final completion_tokens {tokens} below the running count {self.tokens}")
            self.meter.tokens += tokens - self.tokens
            self.tokens = tokens
        if tokens != self.meter.expected_tokens:
            raise SSEError(
                f"wrong token count: asked for {self.meter.expected_tokens} tokens with ignore_eos, "
                f"the server reported {tokens} (finish_reason {finish!r})"
            )

    def _complete_plain(self, body: bytes) -> None:
        snippet = body[:200].decode("utf-8", "replace")
        if self.status != 200:
            raise SSEError(f"HTTP {self.status} from the server: {snippet}")
        raise SSEError(f"expected a streamed response (text/event-stream, chunked), got: {snippet}")


@dataclass
class TrialResult:
    output_tokens_per_s: float
    request_throughput: float
    window_s: float
    window_tokens: int
    total_tokens: int
    completed: int
    events: int
    events_per_s: float
    duration_s: float
    ttft_ms: dict[str, float | None]
    itl_ms: dict[str, float | None]
    errors: dict[str, int]
    started: float
    ended: float

    def as_dict(self) -> dict[str, object]:
        return {
            "output_tokens_per_s": round(self.output_tokens_per_s, 3),
            "request_throughput": round(self.request_throughput, 4),
            "window_s": round(self.window_s, 4),
            "window_tokens": self.window_tokens,
            "total_tokens": self.total_tokens,
            "completed_requests": self.completed,
            "events": self.events,
            "events_per_s": round(self.events_per_s, 1),
            "duration_s": round(self.duration_s, 4),
            "ttft_ms": self.ttft_ms,
            "itl_ms": self.itl_ms,
            "errors": [{"message": m, "count": c} for m, c in sorted(self.errors.items())],
        }


class LoadClient:
    """Runs trials against one server. ``serial`` keeps prompts unique across trials."""

    def __init__(self, url: str, shape: Shape, concurrency: int, request_timeout: float) -> None:
        shape.validate()
        if concurrency < 1:
            raise GateInputError(f"concurrency must be >= 1, got {concurrency}")
        if request_timeout <= 0:
            raise GateInputError(f"request_timeout must be > 0, got {request_timeout}")
        self.target = Target.from_url(url)
        self.shape = shape
        self.concurrency = concurrency
        self.request_timeout = request_timeout
        self.serial = 0

    async def _open(self, meter: Meter) -> _Conn:
        loop = asyncio.get_running_loop()
        try:
            _transport, proto = await asyncio.wait_for(
                loop.create_connection(lambda: _Conn(meter, self.shape), self.target.host, self.target.port),
                timeout=min(30.0, self.request_timeout),
            )
        except (OSError, asyncio.TimeoutError) as exc:
            raise ConnectionError(
                f"cannot connect to {self.target.host}:{self.target.port}: {exc or type(exc).__name__}"
            ) from None
        return proto

    async def run_trial(self, requests: int, concurrency: int | None = None, measure: bool = True) -> TrialResult:
        """Send ``requests`` requests at fixed concurrency; measure the steady-state window.

        With ``measure=False`` (warmup) a missing steady-state window is not an error.
        """
        conc = min(concurrency or self.concurrency, requests)
        if requests < 1:
            raise GateInputError(f"requests must be >= 1, got {requests}")
        meter = Meter(concurrency=conc, expected_tokens=self.shape.output_len)
        remaining = [requests]
        conns: list[_Conn] = meter.conns
        t0 = time.perf_counter()

        async def worker() -> None:
            conn: _Conn | None = None
            first = True
            while not meter.abort:
                if remaining[0] <= 0:
                    meter.mark_end()
                    break
                remaining[0] -= 1
                if conn is None or conn.lost or conn.close_after:
                    try:
                        conn = await self._open(meter)
                    except ConnectionError as exc:
                        meter.error(str(exc))
                        break
                    conns.append(conn)
                self.serial += 1
                await conn.send(build_request(self.target, self.shape, self.serial), first)
                first = False

        async def watchdog() -> None:
            while True:
                await asyncio.sleep(0.25)
                now = time.perf_counter()
                for c in conns:
                    if c.state != "idle" and now - c.t_last > self.request_timeout:
                        c._fail(f"no response data for {self.request_timeout:g}s (request_timeout)")

        dog = asyncio.create_task(watchdog())
        try:
            await asyncio.gather(*(worker() for _worker in range(conc)))
        finally:
            dog.cancel()
            for c in conns:
                if c.transport is not None:
                    c.transport.close()
        t_end = time.perf_counter()
        meter.mark_end()
        start = meter.window_start
        end = meter.window_end
        if end is None:
            raise AssertionError("meter window has no end")
        if start is None or end[0] <= start[0] or end[1] <= start[1]:
            rate = 0.0
            window_s = 0.0
            window_tokens = 0
            events_rate = 0.0
            if measure and not meter.errors:
                meter.errors[
                    "no steady-state window (every worker must get a token before the first one runs out "
                    "of requests): raise requests_per_trial"
                ] = 1
        else:
            window_s = end[0] - start[0]
            window_tokens = end[1] - start[1]
            rate = window_tokens / window_s
            events_rate = (end[2] - start[2]) / window_s
        duration = t_end - t0
        return TrialResult(
            output_tokens_per_s=rate,
            request_throughput=meter.completed / duration if duration > 0 else 0.0,
            window_s=window_s,
            window_tokens=window_tokens,
            total_tokens=meter.tokens,
            completed=meter.completed,
            events=meter.events,
            events_per_s=events_rate,
            duration_s=duration,
            ttft_ms=percentiles(meter.ttft),
            itl_ms=percentiles(meter.itl),
            errors=dict(meter.errors),
            started=t0,
            ended=t_end,
        )
