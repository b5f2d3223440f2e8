# Copyright (c) gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Traffic generator: a steady stream of real generation requests through an SGLang endpoint.

A test tool, not a stand-in: it is the client side of a rolling-upgrade test. Each of
``--concurrency`` workers sends ``POST /generate`` requests one after another (closed loop,
optionally paced by ``--interval-s``) to ``--url`` until ``--duration-s`` is over or the file
``--stop-file`` appears. A request is ``ok`` when the answer is HTTP 200 and, for a streamed request,
the stream ends with ``data: [DONE]`` after a final event whose ``meta_info.finish_reason`` is set
and no error event came; everything else (HTTP error, refused connection, timeout, truncated or
broken stream) is ``failed``, with its reason counted.

With ``--retry-refused-s S`` a refused connection (the endpoint's port is closed: nothing of the
request was sent, e.g. while a gateway restarts) is tried again every 0.1 s for up to S seconds,
as HTTP clients do for connection errors (the OpenAI Python client retries them twice with
backoff); each refusal is counted in ``refused_connects`` and the request is ``ok`` or ``failed``
by its final answer. A refused connection past S seconds fails as before.

The API key is read from the environment variable named by ``--api-key-env`` (never from argv).
While running it writes one JSON line of counters per ``--report-every-s`` seconds to stdout; at
the end it prints ``TRAFFIC {json}`` with the totals and writes the same JSON to ``--summary``
(``failures``: the time and reason of each failed request, up to 1,000).
Exit status: 0 when no request failed, 1 when some did, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import threading
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field


@dataclass
class Tally:
    """Counters shared by the client threads (guarded by ``lock``)."""

    sent: int = 0
    ok: int = 0
    failed: int = 0
    refused_connects: int = 0
    reasons: Counter = field(default_factory=Counter)
    first_failures: list = field(default_factory=list)
    failures: list = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, ok: bool, reason: str = "", detail: str = "") -> None:
        with self.lock:
            if ok:
                self.ok += 1
            else:
                self.failed += 1
                self.reasons[reason] += 1
                now = round(time.time(), 3)
                if len(self.first_failures) < 20:
                    self.first_failures.append({"t": now, "reason": reason, "detail": detail[:300]})
                if len(self.failures) < 1000:
                    self.failures.append({"t": now, "reason": reason})

    def refused(self) -> None:
        with self.lock:
            self.refused_connects += 1

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
                "reasons": dict(self.reasons),
                "first_failures": list(self.first_failures),
                "failures": list(self.failures),
            }


def check_stream(body: bytes) -> str:
    """Return '' when an SSE body is a complete, error-free SGLang stream, else the reason."""
    events = [line[5:].strip() for line in body.decode(errors="replace").splitlines() if line.startswith("data:")]
    if not events or events[-1] != "[DONE]":
        return "stream_truncated"
    last: dict = {}
    for raw in events[:-1]:
        try:
            event = json.loads(raw)
        except ValueError:
            return "stream_malformed"
        if "error" in event:
            return "stream_error_event"
        last = event
    if not (last.get("meta_info") or {}).get("finish_reason"):
        return "stream_unfinished"
    return ""


def check_json(body: bytes) -> str:
    """Return '' when a non-streamed /generate body is a finished result, else the reason."""
    try:
        doc = json.loads(body)
    except ValueError:
        return "body_malformed"
    if not isinstance(doc, dict) or not (doc.get("meta_info") or {}).get("finish_reason"):
        return "body_unfinished"
    return ""


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


def one_request(
    target: urllib.parse.SplitResult,
    headers: dict[str, str],
    payload: bytes,
    stream: bool,
    timeout_s: float,
    *,
    retry_refused_s: float = 0.0,
    tally: Tally | None = None,
):
    """Send one request; return (ok, reason, detail)."""
    try:
        conn = connect(target, timeout_s, retry_refused_s, tally or Tally())
    except OSError as exc:
        return False, type(exc).__name__, str(exc)
    try:
        conn.request("POST", (target.path.rstrip("/") or "") + "/generate", body=payload, headers=headers)
        resp = conn.getresponse()
        body = resp.read()
    except (OSError, http.client.HTTPException) as exc:
        return False, type(exc).__name__, str(exc)
    finally:
        conn.close()
    if resp.status != 200:
        return False, f"http_{resp.status}", body.decode(errors="replace")
    reason = check_stream(body) if stream else check_json(body)
    return (not reason), reason, body[-200:].decode(errors="replace") if reason else ""


def client(args: argparse.Namespace, tally: Tally, deadline: float, stop: threading.Event, idx: int) -> None:
    target = urllib.parse.urlsplit(args.url)
    key = os.environ.get(args.api_key_env, "") if args.api_key_env else ""
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    n = 0
    while not stop.is_set() and time.monotonic() < deadline:
        if args.stop_file and os.path.exists(args.stop_file):
            stop.set()
            break
        n += 1
        payload = json.dumps(
            {
                # a shared prefix per client, as a chat session has: cache-aware routing keys on it
                "text": f"client {idx} session prompt; turn {n}",
                "sampling_params": {"max_new_tokens": args.max_new_tokens, "ignore_eos": True},
                "stream": args.stream,
            }
        ).encode()
        tally.start()
        ok, reason, detail = one_request(
            target,
            headers,
            payload,
            args.stream,
            args.request_timeout_s,
            retry_refused_s=args.retry_refused_s,
            tally=tally,
        )
        tally.record(ok, reason, detail)
        # a failed request is retried by the next one after a short pause, as a client would
        pause = args.interval_s if ok else max(args.interval_s, 0.1)
        if pause > 0:
            stop.wait(pause)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", required=True, help="base URL of the gateway (or a server), e.g. http://127.0.0.1:8080")
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--stream", action="store_true", help="streamed requests (SSE)")
    p.add_argument("--interval-s", type=float, default=0.0, help="pause between two requests of one client")
    p.add_argument("--duration-s", type=float, default=3600.0, help="upper bound on the run")
    p.add_argument("--stop-file", default="", help="stop (after the requests in flight) when this file exists")
    p.add_argument("--request-timeout-s", type=float, default=60.0)
    p.add_argument(
        "--retry-refused-s", type=float, default=0.0, help="retry a refused connection for up to this long (0: never)"
    )
    p.add_argument("--report-every-s", type=float, default=5.0)
    p.add_argument("--api-key-env", default="", help="name of the environment variable holding the API key")
    p.add_argument("--summary", default="", help="write the final JSON here too")
    args = p.parse_args(argv)
    if args.retry_refused_s < 0:
        p.error("--retry-refused-s must not be negative")
    if args.concurrency < 1 or args.max_new_tokens < 1 or args.duration_s <= 0 or args.request_timeout_s <= 0:
        p.error("--concurrency, --max-new-tokens, --duration-s and --request-timeout-s must be positive")
    if urllib.parse.urlsplit(args.url).scheme != "http":
        p.error(f"--url {args.url!r}: only http:// URLs are supported")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    tally = Tally()
    stop = threading.Event()
    started = time.monotonic()
    deadline = started + args.duration_s
    threads = [
        threading.Thread(target=client, args=(args, tally, deadline, stop, i), daemon=True)
        for i in range(args.concurrency)
    ]
    for t in threads:
        t.start()
    try:
        next_report = started + args.report_every_s
        while any(t.is_alive() for t in threads):
            time.sleep(0.2)
            if time.monotonic() >= next_report:
                next_report += args.report_every_s
                counters = {k: v for k, v in tally.snapshot().items() if k != "failures"}
                print(json.dumps({"t": round(time.monotonic() - started, 1), **counters}), flush=True)
    except KeyboardInterrupt:
        stop.set()
        for t in threads:
            t.join(timeout=args.request_timeout_s)
    summary = {"elapsed_s": round(time.monotonic() - started, 2), **tally.snapshot()}
    line = json.dumps(summary, sort_keys=True)
    print(f"TRAFFIC {line}", flush=True)
    if args.summary:
        tmp = args.summary + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(line + "\n")
        os.replace(tmp, args.summary)
    return 0 if summary["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
