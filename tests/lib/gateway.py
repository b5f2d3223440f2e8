# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A fake smg gateway listing (GET /workers) and the SGLang stand-in's client side (a streaming
/generate, the two load gauges from /metrics, a bounded wait), shared by the tests of the rollout's
capacity check, drain and order."""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

from ansible_collections.gpufleet.sglang.plugins.module_utils.fleet.rollout_plan import parse_load


def workers_listing(workers: list[tuple]) -> dict:
    """smg 1.13's answer to GET /workers for ``workers``, ``(url, healthy)`` or ``(url, healthy, status)``
    (default status ``ready``): the fields the rollout reads, and some it does not."""
    entries = [(w[0], w[1], w[2] if len(w) > 2 else "ready") for w in workers]
    return {
        "workers": [
            {"id": f"w{i}", "url": u, "is_healthy": h, "status": st, "model_id": "m", "load": 0}
            for i, (u, h, st) in enumerate(entries)
        ],
        "total": len(entries),
    }


class FakeGateway:
    """GET /workers as smg 1.13.0 answers it, listing ``workers``: ``(url, healthy)`` or ``(url, healthy,
    status)`` (default status ``ready``). ``answer``, when set, is sent instead (bytes: a gateway that
    answers something else); every request's Authorization header is kept in ``auth``."""

    def __init__(self, workers: list[tuple]) -> None:
        self.workers = workers
        self.answer: bytes | None = None
        self.auth: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.auth.append(self.headers.get("Authorization", ""))
                body = outer.answer if outer.answer is not None else json.dumps(outer.listing()).encode()
                self.send_response(200 if self.path == "/workers" else 404)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def listing(self) -> dict:
        return workers_listing(self.workers)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def stream(url: str, max_new: int, out: list[str]) -> None:
    """One streaming /generate; appends the last data event's text to ``out``."""
    u = urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    body = json.dumps(
        {"text": "hi", "sampling_params": {"max_new_tokens": max_new, "ignore_eos": True}, "stream": True}
    )
    conn.request("POST", "/generate", body=body, headers={"content-type": "application/json"})
    last = ""
    for raw in conn.getresponse().read().decode().split("\n\n"):
        if raw.startswith("data: {"):
            last = raw[len("data: ") :]
    out.append(last)
    conn.close()


def metrics(url: str):
    with urllib.request.urlopen(url + "/metrics", timeout=5) as resp:
        return parse_load(resp.read().decode())


def wait_for(cond, timeout=15.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = cond()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not met in time")
