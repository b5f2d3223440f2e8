# Copyright (c) gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Traffic generator: real generation requests through an SGLang endpoint, closed or open loop.

A test tool, not a stand-in: it is the client side of a rolling-upgrade test. Requests are
generation requests to ``--url`` with ``ignore_eos`` (each asks for an exact number of tokens), until
``--duration-s`` is over or the file ``--stop-file`` appears; then the requests in flight finish.

- Closed loop (default): ``--concurrency`` clients, each sends its next request when the last one
  ended (optionally after ``--interval-s``).
- Open loop: requests arrive at ``--rate`` per second (``--arrivals poisson`` or ``fixed``
  intervals, seeded by ``--seed``) whatever the answers do, as independent users do; or at
  ``--load-fraction F`` of the fleet's capacity in tokens/s: ``--capacity-tokens-per-s C`` given, or
  measured first by ``--capacity-probe-s S`` (a closed-loop burst of ``--probe-concurrency`` clients
  asking for ``--probe-max-new-tokens`` each; the capacity is the increase of
  ``sglang:generation_tokens_total`` summed over the ``--metrics-url`` of every node, else the tokens
  the clients received, over S). The rate is then
  ``F * C / mean(--max-new-tokens)``. More than ``--max-in-flight`` requests in flight: an arrival
  fails as ``client_in_flight_cap`` (the client, not the server, is the limit).
- ``--max-new-tokens`` is one count or a comma-separated mix (each request picks one at random).
- ``--api native`` (default): SGLang's ``POST /generate``; ``--api openai``: ``POST /v1/completions``
  for ``--model`` (default: the first of ``GET /v1/models``), streamed with the count in every chunk
  (``stream_options`` ``include_usage`` and ``continuous_usage_stats``), as OpenAI clients do. A
  native stream repeats all text in every event; OpenAI chunks carry deltas, so a long stream
  costs the same per token as a short one.

A request is ``ok`` when the answer is HTTP 200 and, for a streamed request, every event passes
the throughput gate's check (plugins/module_utils/gate/sse.py, ``StreamChecker``: JSON objects, no
error event, a count that never goes backwards, nothing after ``[DONE]``, exactly the tokens asked
for). A stream is read incrementally in bounded memory: the body is read in pieces of at most
64 KiB, only complete events are handed to the checker, which compares a cumulative event with the
previous one instead of decoding it again; a pending event larger than ``--max-event-bytes`` fails
as ``stream_event_too_large`` and the connection is closed. Everything else (HTTP error, refused
connection, timeout, truncated or broken stream) is ``failed``, with its named reason counted.

TTFT (time to first token) is the time from sending a request to the first event that reports a
generated token. Every request is filed under the phase named in ``--phase-file`` when it was sent
(the file's text, ``[A-Za-z0-9_.:-]{1,64}``; ``unmarked`` without the file, ``invalid`` for other
text), so a drill can mark "before" and "during" a rollout. The summary has p50/p99 TTFT and
sent/ok/failed overall and per phase.

With ``--retry-refused-s S`` a refused connection (the endpoint's port is closed: nothing of the
request was sent, e.g. while a gateway restarts) is tried again every 0.1 s for up to S seconds,
as HTTP clients do for connection errors; each refusal is counted in ``refused_connects``.

The API key is read from the environment variable named by ``--api-key-env`` (never from argv).
The gate's stream checker (module_utils/gate/sse.py) is imported from the collection when it is
installed, else as gate/sse.py under the module_utils directory in the environment variable
GPUFLEET_MODULE_UTILS or the repository's plugins/module_utils, else as gate_sse.py beside this file.
While running it writes one JSON line of counters per ``--report-every-s`` seconds to stdout; at the
end it prints ``TRAFFIC {json}`` with the totals and writes the same JSON to ``--summary``
(``failures``: time, phase and reason of each failed request, up to 1,000; ``requests``: with
``--requests-out FILE`` one JSON line per request goes to FILE).
Exit status: 0 when no request failed, 1 when some did, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import http.client
import importlib
import importlib.util
import json
import os
import random
import re
import sys
import threading
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field


def _load_gate_sse():
    """The throughput gate's stream checker module (one rule for what a good stream is)."""
    try:
        return importlib.import_module("ansible_collections.gpufleet.sglang.plugins.module_utils.gate.sse")
    except ImportError:
        pass
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.join(here, "..", "..", "plugins", "module_utils")
    env = os.environ.get("GPUFLEET_MODULE_UTILS", "")
    # under a module_utils directory it is gate/sse.py; lab.sh copies it beside this file as gate_sse.py
    paths = [os.path.join(env, "gate", "sse.py") if env else "", os.path.join(repo, "gate", "sse.py")]
    paths.append(os.path.join(here, "gate_sse.py"))
    for path in paths:
        if path and os.path.isfile(path):
            spec = importlib.util.spec_from_file_location("gpufleet_gate_sse", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    raise SystemExit(
        "traffic.py: cannot find gate/sse.py (plugins/module_utils of the collection); "
        "set GPUFLEET_MODULE_UTILS to the module_utils directory that holds gate/sse.py"
    )


gate_sse = _load_gate_sse()

READ_BYTES = 64 * 1024
DEFAULT_MAX_EVENT = 4 * 1024 * 1024
MAX_BODY = 16 * 1024 * 1024
MAX_RECORDS = 100_000
PHASE_RE = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
API_PATHS = {"native": "/generate", "openai": "/v1/completions"}
# the checker's messages (gate_sse.SSEError) -> the named reasons counted here; first match wins
_SSE_REASONS = (
    ("data after [DONE]", "stream_data_after_done"),
    ("an event of ", "stream_event_too_large"),
    ("server sent an error event", "stream_error_event"),
    ("malformed event", "stream_malformed"),
    ("not a server-sent event", "stream_malformed"),
    ("completion_tokens went backwards", "stream_count_backwards"),
    ("stream had no events", "stream_unfinished"),
    ("wrong token count", "stream_unfinished"),
)


def sse_reason(message: str) -> str:
    """The named reason of a gate_sse.SSEError message (``stream_invalid`` for any other)."""
    if message.startswith("wrong token count") and "'abort'" in message:
        return "stream_aborted"  # the server aborted it (POST /abort_request: finish_reason type abort)
    for prefix, reason in _SSE_REASONS:
        if message.startswith(prefix):
            return reason
    if message.startswith("completion_tokens") and "more than" in message:
        return "stream_count_too_high"
    return "stream_invalid"


class StreamReader:
    """One streamed response body, fed in pieces: bounded buffer, every byte scanned once.

    Events are cut at blank lines as gate_sse.split_events does: a one-line ``data: `` event (what
    SGLang sends) is handed to the checker directly; any other block goes through split_events,
    which has the rules of server-sent events. :meth:`feed` returns False once the stream has
    failed (stop reading); :meth:`close` gives the verdict: '' for a complete, correct stream, else
    the named reason (``detail`` says more).
    """

    __slots__ = ("buf", "checker", "detail", "first_token_t", "max_event", "multi", "reason", "scan", "tokens")

    def __init__(self, expected: int, max_event: int = DEFAULT_MAX_EVENT, api: str = "native") -> None:
        self.checker = gate_sse.StreamChecker(api, expected, max_event)
        self.buf = bytearray()
        self.scan = 0  # where the search for the next newline resumes
        self.multi = False  # the pending block has a newline that does not end it
        self.max_event = max_event
        self.reason = ""
        self.detail = ""
        self.tokens = 0
        self.first_token_t: float | None = None

    def _fail(self, reason: str, detail: str) -> bool:
        self.reason, self.detail = reason, detail[:300]
        self.buf = bytearray()
        return False

    def _payloads(self, start: int, end: int) -> list[bytes]:
        buf = self.buf
        if not self.multi and buf.startswith(b"data: ", start):
            with memoryview(buf) as view:
                return [bytes(view[start + 6 : end])]
        return gate_sse.split_events(bytearray(buf[start : end + 2]))

    def feed(self, data: bytes, now: float) -> bool:
        if self.reason:
            return False
        buf = self.buf
        buf += data
        n = len(buf)
        start, scan, find = 0, self.scan, buf.find
        try:
            while True:
                nl = find(b"\n", scan)
                if nl < 0 or nl + 1 >= n:
                    scan = n if nl < 0 else nl
                    break
                if buf[nl + 1] != 10:  # a newline inside the block
                    self.multi = True
                    scan = nl + 1
                    continue
                for payload in self._payloads(start, nl):
                    self.tokens = self.checker.event(payload)
                    if self.tokens > 0 and self.first_token_t is None:
                        self.first_token_t = now
                start = scan = nl + 2
                self.multi = False
        except gate_sse.SSEError as exc:
            return self._fail(sse_reason(str(exc)), str(exc))
        if start:
            del buf[:start]
            scan -= start
        self.scan = scan
        if len(buf) > self.max_event + 8:  # an unfinished event past the bound ('data: ' and '\n\n')
            return self._fail(
                "stream_event_too_large", f"an unfinished event of {len(buf)} bytes, more than {self.max_event}"
            )
        return True

    def close(self) -> str:
        """The verdict once the body ended."""
        if self.reason:
            return self.reason
        if not self.checker.done:
            tail = bytes(self.buf[-200:]).decode(errors="replace")
            self._fail("stream_truncated", f"the stream ended without data: [DONE] (after {self.tokens} tokens) {tail}")
        elif self.buf.strip():
            self._fail("stream_data_after_done", f"bytes after data: [DONE]: {bytes(self.buf[:80])!r}")
        return self.reason


def check_stream(body: bytes, expected: int, api: str = "native") -> str:
    """Return '' when a whole SSE body is a complete, correct SGLang stream of ``expected`` tokens."""
    reader = StreamReader(expected, api=api)
    reader.feed(body, 0.0)
    return reader.close()


def body_tokens(doc: object, api: str = "native") -> tuple[object, object]:
    """(finish reason, completion tokens) of a decoded non-streamed answer; (None, None) if it has none."""
    if not isinstance(doc, dict):
        return None, None
    if api == "openai":
        choices = doc.get("choices")
        first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
        usage = doc.get("usage") if isinstance(doc.get("usage"), dict) else {}
        return first.get("finish_reason"), usage.get("completion_tokens")
    meta = doc.get("meta_info") if isinstance(doc.get("meta_info"), dict) else {}
    return meta.get("finish_reason"), meta.get("completion_tokens")


def check_json(body: bytes, expected: int | None = None, api: str = "native") -> str:
    """Return '' when a non-streamed answer is a finished result (of ``expected`` tokens), else the reason."""
    try:
        doc = json.loads(body)
    except ValueError:
        return "body_malformed"
    finish, tokens = body_tokens(doc, api)
    if not finish or (expected is not None and tokens != expected):
        return "body_unfinished"
    return ""


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of values; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(min(rank, len(ordered))) - 1]


def ttft_stats(values: list[float]) -> dict[str, object]:
    p50, p99 = percentile(values, 50), percentile(values, 99)
    return {
        "n": len(values),
        "p50_s": None if p50 is None else round(p50, 4),
        "p99_s": None if p99 is None else round(p99, 4),
    }


@dataclass
class Tally:
    """Counters shared by the client threads (guarded by ``lock``)."""

    sent: int = 0
    ok: int = 0
    failed: int = 0
    refused_connects: int = 0
    tokens: int = 0
    reasons: Counter = field(default_factory=Counter)
    first_failures: list = field(default_factory=list)
    failures: list = field(default_factory=list)
    records: list = field(default_factory=list)
    records_dropped: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, ok: bool, reason: str = "", detail: str = "", info: dict | None = None) -> None:
        with self.lock:
            phase = (info or {}).get("phase", "unmarked")
            if ok:
                self.ok += 1
            else:
                self.failed += 1
                self.reasons[reason] += 1
                now = round(time.time(), 3)
                if len(self.first_failures) < 20:
                    self.first_failures.append({"t": now, "phase": phase, "reason": reason, "detail": detail[:300]})
                if len(self.failures) < 1000:
                    self.failures.append({"t": now, "phase": phase, "reason": reason})
            if info is not None:
                if len(self.records) < MAX_RECORDS:
                    self.records.append(dict(info, ok=ok, reason=reason))
                else:
                    self.records_dropped += 1

    def refused(self) -> None:
        with self.lock:
            self.refused_connects += 1

    def add_tokens(self, n: int) -> None:
        with self.lock:
            self.tokens += n

    def start(self) -> None:
        with self.lock:
            self.sent += 1

    def snapshot(self) -> dict[str, object]:
        with self.lock:
            return {
                "sent": self.sent,
                "ok": self.ok,
                "failed": self.failed,
                "refused_connects": self.refused_connects,
                "in_flight": self.sent - self.ok - self.failed,
                "tokens": self.tokens,
                "reasons": dict(self.reasons),
                "first_failures": list(self.first_failures),
                "failures": list(self.failures),
            }

    def by_phase(self) -> dict[str, object]:
        """TTFT percentiles overall and per phase, and sent/ok/failed per phase."""
        with self.lock:
            records = list(self.records)
        phases: dict[str, dict[str, object]] = {}
        ttft: dict[str, list[float]] = {}
        for rec in records:
            p = phases.setdefault(rec["phase"], {"sent": 0, "ok": 0, "failed": 0, "reasons": Counter()})
            p["sent"] += 1
            p["ok" if rec["ok"] else "failed"] += 1
            if not rec["ok"]:
                p["reasons"][rec["reason"]] += 1
            if rec.get("ttft_s") is not None:
                ttft.setdefault(rec["phase"], []).append(rec["ttft_s"])
        for name, p in phases.items():
            p["reasons"] = dict(p["reasons"])
            p["ttft"] = ttft_stats(ttft.get(name, []))
        return {
            "ttft": ttft_stats([v for values in ttft.values() for v in values]),
            "phases": phases,
            "records_dropped": self.records_dropped,
        }


class Phase:
    """The phase named in a file (re-read at most every 0.2 s): the drill marks its steps there."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.value = "unmarked"
        self.read_at = -1.0

    def current(self) -> str:
        if not self.path:
            return "unmarked"
        now = time.monotonic()
        if now - self.read_at >= 0.2:
            self.read_at = now
            self.value = read_phase(self.path)
        return self.value


def read_phase(path: str) -> str:
    """The phase named by the file: its stripped text when it is a short name, else ``invalid``."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(256)
    except OSError:
        return "unmarked"
    text = raw.decode("ascii", errors="replace").strip()
    return text if PHASE_RE.fullmatch(text) else "invalid"


def connect(target: urllib.parse.SplitResult, timeout_s: float, retry_refused_s: float, tally: Tally):
    """An open connection; a refused connect is retried every 0.1 s for up to retry_refused_s."""
    give_up = time.monotonic() + retry_refused_s
    while True:
        conn = http.client.HTTPConnection(target.hostname, target.port or 80, timeout=timeout_s)
        try:
            conn.connect()
            return conn
        except ConnectionRefusedError:
            conn.close()
            if time.monotonic() >= give_up:
                raise
            tally.refused()
            time.sleep(0.1)


def _read_stream(resp: http.client.HTTPResponse, expected: int, max_event: int, tally: Tally, t0: float, *, api: str):
    """(reason, detail, ttft_s) of a streamed body read piece by piece."""
    reader = StreamReader(expected, max_event, api)
    counted = 0
    while True:
        data = resp.read1(READ_BYTES)
        if not data:
            break
        ok = reader.feed(data, time.monotonic())
        if reader.tokens > counted:
            tally.add_tokens(reader.tokens - counted)
            counted = reader.tokens
        if not ok:
            break
    reason = reader.close()
    ttft = None if reader.first_token_t is None else round(reader.first_token_t - t0, 4)
    return reason, reader.detail, ttft


def one_request(
    target: urllib.parse.SplitResult,
    headers: dict[str, str],
    payload: bytes,
    stream: bool,
    timeout_s: float,
    *,
    retry_refused_s: float = 0.0,
    tally: Tally | None = None,
    expected: int | None = None,
    max_event: int = DEFAULT_MAX_EVENT,
    api: str = "native",
):
    """Send one request (``api``: native /generate or openai /v1/completions); return (ok, reason, detail, ttft_s)."""
    tally = tally or Tally()
    if expected is None and stream:
        expected = json.loads(payload or b"{}").get("sampling_params", {}).get("max_new_tokens", 128)
    t0 = time.monotonic()
    try:
        conn = connect(target, timeout_s, retry_refused_s, tally)
    except OSError as exc:
        return False, type(exc).__name__, str(exc), None
    ttft = None
    try:
        t0 = time.monotonic()
        conn.request("POST", (target.path.rstrip("/") or "") + API_PATHS[api], body=payload, headers=headers)
        resp = conn.getresponse()
        if resp.status != 200:
            return False, f"http_{resp.status}", resp.read(4096).decode(errors="replace"), None
        if stream:
            reason, detail, ttft = _read_stream(resp, expected, max_event, tally, t0, api=api)
        else:
            body = resp.read(MAX_BODY + 1)
            reason = "body_too_large" if len(body) > MAX_BODY else check_json(body, expected, api)
            detail = body[-200:].decode(errors="replace") if reason else ""
            if not reason:
                count = body_tokens(json.loads(body), api)[1]
                tally.add_tokens(count if isinstance(count, int) else 0)
    except (OSError, http.client.HTTPException) as exc:
        return False, type(exc).__name__, str(exc), ttft
    finally:
        conn.close()
    return (not reason), reason, detail, ttft


class Client:
    """What every request needs: target, headers, token mix, phase, limits."""

    def __init__(self, args: argparse.Namespace, tally: Tally, phase: Phase) -> None:
        self.args = args
        self.tally = tally
        self.phase = phase
        self.target = urllib.parse.urlsplit(args.url)
        key = os.environ.get(args.api_key_env, "") if args.api_key_env else ""
        self.headers = {"Content-Type": "application/json"}
        if key:
            self.headers["Authorization"] = f"Bearer {key}"
        if args.api == "openai" and not args.model:
            args.model = served_model(self.target, self.headers, args.request_timeout_s)

    def send(self, session: int, turn: int, max_new: int, phase: str = "") -> bool:
        """One request, recorded; True when it was ok."""
        args = self.args
        # a shared prefix per session, as a chat session has: cache-aware routing keys on it
        prompt = f"client {session} session prompt; turn {turn}"
        if args.api == "openai":
            body: dict[str, object] = {
                "model": args.model,
                "prompt": prompt,
                "max_tokens": max_new,
                "ignore_eos": True,
                "stream": args.stream,
            }
            if args.stream:  # the count in every chunk: the first token is seen, the total checked
                body["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
        else:
            body = {
                "text": prompt,
                "sampling_params": {"max_new_tokens": max_new, "ignore_eos": True},
                "stream": args.stream,
            }
        payload = json.dumps(body).encode()
        info = {"t": round(time.time(), 3), "phase": phase or self.phase.current(), "max_new_tokens": max_new}
        self.tally.start()
        ok, reason, detail, ttft = one_request(
            self.target,
            self.headers,
            payload,
            args.stream,
            args.request_timeout_s,
            retry_refused_s=args.retry_refused_s,
            tally=self.tally,
            expected=max_new,
            max_event=args.max_event_bytes,
            api=args.api,
        )
        info["ttft_s"] = ttft
        info["duration_s"] = round(time.time() - info["t"], 3)
        self.tally.record(ok, reason, detail, info)
        return ok


def served_model(target: urllib.parse.SplitResult, headers: dict[str, str], timeout_s: float) -> str:
    """The first model id of GET /v1/models (what an OpenAI client asks for); SystemExit naming the problem."""
    conn = http.client.HTTPConnection(target.hostname, target.port or 80, timeout=timeout_s)
    try:
        conn.request("GET", (target.path.rstrip("/") or "") + "/v1/models", headers=headers)
        resp = conn.getresponse()
        body = resp.read(1024 * 1024)
    except (OSError, http.client.HTTPException) as exc:
        raise SystemExit(f"traffic.py: GET /v1/models failed ({exc}); pass --model NAME") from None
    finally:
        conn.close()
    try:
        data = json.loads(body).get("data") if resp.status == 200 else None
        model = data[0]["id"] if isinstance(data, list) and data and isinstance(data[0], dict) else None
    except (ValueError, AttributeError, KeyError):
        model = None
    if not isinstance(model, str) or not model:
        raise SystemExit(f"traffic.py: GET /v1/models answered {resp.status} without a model id; pass --model NAME")
    return model


def stopped(args: argparse.Namespace, stop: threading.Event, deadline: float) -> bool:
    if args.stop_file and os.path.exists(args.stop_file):
        stop.set()
    return stop.is_set() or time.monotonic() >= deadline


def closed_loop(
    client: Client,
    deadline: float,
    stop: threading.Event,
    idx: int,
    rng: random.Random,
    *,
    phase: str = "",
    tokens: list[int] | None = None,
) -> None:
    args = client.args
    mix = tokens or args.tokens
    n = 0
    while not stopped(args, stop, deadline):
        n += 1
        ok = client.send(idx, n, rng.choice(mix), phase)
        # a failed request is retried by the next one after a short pause, as a client would
        pause = args.interval_s if ok else max(args.interval_s, 0.1)
        if pause > 0:
            stop.wait(pause)


def run_closed(
    client: Client,
    concurrency: int,
    deadline: float,
    stop: threading.Event,
    *,
    phase: str = "",
    tokens: list[int] | None = None,
) -> None:
    threads = [
        threading.Thread(
            target=closed_loop,
            args=(client, deadline, stop, i, random.Random(client.args.seed + i)),
            kwargs={"phase": phase, "tokens": tokens},
            daemon=True,
        )
        for i in range(concurrency)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def run_open(client: Client, rate: float, deadline: float, stop: threading.Event) -> None:
    """Arrivals at ``rate`` per second, each request on its own thread, whatever the answers do."""
    args = client.args
    rng = random.Random(args.seed)
    running: list[threading.Thread] = []
    next_t = time.monotonic()
    n = 0
    while not stopped(args, stop, deadline):
        delay = next_t - time.monotonic()
        if delay > 0:
            stop.wait(min(delay, 0.5))
            continue
        n += 1
        max_new = rng.choice(args.tokens)
        running = [t for t in running if t.is_alive()]
        if len(running) >= args.max_in_flight:
            client.tally.start()
            info = {"t": round(time.time(), 3), "phase": client.phase.current(), "max_new_tokens": max_new}
            client.tally.record(False, "client_in_flight_cap", f"{len(running)} requests in flight", info)
        else:
            t = threading.Thread(target=client.send, args=(rng.randrange(1 << 30), 1, max_new), daemon=True)
            t.start()
            running.append(t)
        next_t += rng.expovariate(rate) if args.arrivals == "poisson" else 1.0 / rate
    for t in running:
        t.join()


def generation_tokens(url: str, timeout_s: float = 5.0) -> float:
    """The sum of ``sglang:generation_tokens_total`` samples on a node's /metrics."""
    target = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(target.hostname, target.port or 80, timeout=timeout_s)
    try:
        conn.request("GET", (target.path.rstrip("/") or "") + "/metrics")
        resp = conn.getresponse()
        body = resp.read(4 * 1024 * 1024)
    finally:
        conn.close()
    if resp.status != 200:
        raise SystemExit(f"traffic.py: GET {url}/metrics answered {resp.status}; start the server with metrics on")
    total, found = 0.0, False
    for line in body.decode(errors="replace").splitlines():
        if line.startswith("sglang:generation_tokens_total"):
            try:
                total += float(line.rsplit(None, 1)[-1])
                found = True
            except ValueError:
                continue
    if not found:
        raise SystemExit(f"traffic.py: {url}/metrics has no sglang:generation_tokens_total sample")
    return total


def measure_capacity(client: Client, stop: threading.Event) -> dict[str, object]:
    """A closed-loop burst that keeps every node busy: the fleet's capacity in tokens/s."""
    args = client.args
    before = sum(generation_tokens(u) for u in args.metrics_url)
    client_before = client.tally.snapshot()["tokens"]
    start = time.monotonic()
    deadline = start + args.capacity_probe_s
    # short requests: the burst's tail, which runs on after the deadline, ends soon
    burst = threading.Thread(
        target=run_closed,
        args=(client, args.probe_concurrency, deadline, stop),
        kwargs={"phase": "capacity_probe", "tokens": [args.probe_max_new_tokens]},
    )
    burst.start()
    # the counts at the deadline, while every client is still busy (the burst's tail runs on after it)
    stop.wait(max(0.0, deadline - time.monotonic()))
    elapsed = time.monotonic() - start
    if args.metrics_url:
        gained, source = sum(generation_tokens(u) for u in args.metrics_url) - before, "metrics"
    else:
        gained, source = client.tally.snapshot()["tokens"] - client_before, "client"
    burst.join()
    return {"tokens_per_s": round(gained / elapsed, 1), "source": source, "probe_s": round(elapsed, 2)}


def parse_tokens(text: str) -> list[int]:
    try:
        tokens = [int(t) for t in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a token count or a comma-separated list of them") from None
    if not tokens or min(tokens) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: every token count must be positive")
    return tokens


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", required=True, help="base URL of the gateway (or a server), e.g. http://127.0.0.1:8080")
    p.add_argument("--concurrency", type=int, default=4, help="closed loop: number of clients")
    p.add_argument(
        "--max-new-tokens", dest="tokens", type=parse_tokens, default=[32], help="a count or a mix: 1000,4000"
    )
    p.add_argument("--stream", action="store_true", help="streamed requests (SSE)")
    p.add_argument(
        "--api", choices=tuple(API_PATHS), default="native", help="native POST /generate or openai POST /v1/completions"
    )
    p.add_argument(
        "--model", default="", help="the model field of OpenAI requests (default: the first of GET /v1/models)"
    )
    p.add_argument("--interval-s", type=float, default=0.0, help="closed loop: pause between two requests of a client")
    p.add_argument("--rate", type=float, default=0.0, help="open loop: arrivals per second")
    p.add_argument("--arrivals", choices=("poisson", "fixed"), default="poisson")
    p.add_argument("--load-fraction", type=float, default=0.0, help="open loop at this fraction of the capacity")
    p.add_argument("--capacity-tokens-per-s", type=float, default=0.0, help="the fleet's capacity, given")
    p.add_argument("--capacity-probe-s", type=float, default=0.0, help="measure the capacity for this long first")
    p.add_argument("--probe-concurrency", type=int, default=12, help="enough to keep every node at its rate")
    p.add_argument("--probe-max-new-tokens", type=int, default=256)
    p.add_argument("--metrics-url", action="append", default=[], help="a node's base URL (its /metrics); repeat")
    p.add_argument("--max-in-flight", type=int, default=512)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--phase-file", default="", help="the current phase's name is this file's text")
    p.add_argument("--max-event-bytes", type=int, default=DEFAULT_MAX_EVENT)
    p.add_argument("--duration-s", type=float, default=3600.0, help="upper bound on the run")
    p.add_argument("--stop-file", default="", help="stop (after the requests in flight) when this file exists")
    p.add_argument("--request-timeout-s", type=float, default=60.0, help="bound on each connect and read")
    p.add_argument(
        "--retry-refused-s", type=float, default=0.0, help="retry a refused connection for up to this long (0: never)"
    )
    p.add_argument("--report-every-s", type=float, default=5.0)
    p.add_argument("--api-key-env", default="", help="name of the environment variable holding the API key")
    p.add_argument("--summary", default="", help="write the final JSON here too")
    p.add_argument("--requests-out", default="", help="one JSON line per request here")
    args = p.parse_args(argv)
    if args.retry_refused_s < 0:
        p.error("--retry-refused-s must not be negative")
    if args.concurrency < 1 or args.duration_s <= 0 or args.request_timeout_s <= 0:
        p.error("--concurrency, --duration-s and --request-timeout-s must be positive")
    if min(args.rate, args.load_fraction, args.capacity_tokens_per_s, args.capacity_probe_s) < 0:
        p.error("--rate, --load-fraction, --capacity-tokens-per-s and --capacity-probe-s must not be negative")
    if args.rate and args.load_fraction:
        p.error("--rate and --load-fraction exclude each other")
    if args.load_fraction and not (args.capacity_tokens_per_s or args.capacity_probe_s):
        p.error("--load-fraction needs the capacity: --capacity-tokens-per-s C or --capacity-probe-s S")
    if args.capacity_tokens_per_s and args.capacity_probe_s:
        p.error("--capacity-tokens-per-s and --capacity-probe-s exclude each other")
    if min(args.max_in_flight, args.probe_concurrency, args.probe_max_new_tokens) < 1 or args.max_event_bytes < 1024:
        p.error(
            "--max-in-flight, --probe-concurrency and --probe-max-new-tokens must be positive,"
            " --max-event-bytes at least 1024"
        )
    for url in [args.url, *args.metrics_url]:
        if urllib.parse.urlsplit(url).scheme != "http":
            p.error(f"{url!r}: only http:// URLs are supported")
    return args


def write_summary(path: str, line: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(line + "\n")
    os.replace(tmp, path)


def write_records(path: str, records: list[dict]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec, sort_keys=True) + "\n")
    os.replace(tmp, path)


def drive(args: argparse.Namespace, client: Client, stop: threading.Event, started: float) -> dict[str, object]:
    """Run the chosen loop; return what the summary says of the mode."""
    deadline = started + args.duration_s
    mode: dict[str, object] = {"mode": "closed", "concurrency": args.concurrency}
    rate = args.rate
    if args.load_fraction:
        if args.capacity_probe_s:
            capacity = measure_capacity(client, stop)
            print("CAPACITY " + json.dumps(capacity, sort_keys=True), flush=True)
        else:
            capacity = {"tokens_per_s": args.capacity_tokens_per_s, "source": "given"}
        rate = args.load_fraction * float(capacity["tokens_per_s"]) / (sum(args.tokens) / len(args.tokens))
        mode = {"mode": "open", "load_fraction": args.load_fraction, "capacity": capacity}
        if rate <= 0:
            raise SystemExit(f"traffic.py: measured capacity {capacity}: no rate to send at")
    if rate:
        mode.update(mode="open", rate_rps=round(rate, 4), arrivals=args.arrivals)
        run_open(client, rate, deadline, stop)
    else:
        run_closed(client, args.concurrency, deadline, stop)
    return mode


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    tally = Tally()
    stop = threading.Event()
    started = time.monotonic()
    client = Client(args, tally, Phase(args.phase_file))
    result: dict[str, object] = {}
    errors: list[BaseException] = []

    def run() -> None:
        try:
            result.update(drive(args, client, stop, started))
        except (SystemExit, OSError, http.client.HTTPException) as exc:
            errors.append(exc)

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    try:
        next_report = started + args.report_every_s
        while runner.is_alive():
            runner.join(0.2)
            if time.monotonic() >= next_report:
                next_report += args.report_every_s
                counters = {k: v for k, v in tally.snapshot().items() if k != "failures"}
                print(json.dumps({"t": round(time.monotonic() - started, 1), **counters}), flush=True)
    except KeyboardInterrupt:
        stop.set()
        runner.join(timeout=args.request_timeout_s)
    if errors:
        raise SystemExit(f"traffic.py: {errors[0]}")
    summary = {"elapsed_s": round(time.monotonic() - started, 2), **result, **tally.snapshot(), **tally.by_phase()}
    line = json.dumps(summary, sort_keys=True)
    print(f"TRAFFIC {line}", flush=True)
    if args.summary:
        write_summary(args.summary, line)
    if args.requests_out:
        write_records(args.requests_out, tally.records)
    return 0 if summary["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
