# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One look of the rollout's capacity check (module ``rollout_room``'s ``look()``) over 10, 50 and
200 fake nodes that answer each GET after a fixed latency: the module's look (the nodes read side by
side) against the sequential reading it replaced (``sequential_look`` below, the module's look before
the change, kept here and nowhere else as the reference), side by side in one run, with the number
of GETs each made and whether their results are the same.

    .venv/bin/python benchmarks/room_look_bench.py [--nodes 10 50 200] [--latency-ms 20] [--repeat 3]

``FakeFleet`` is one in-process HTTP server that answers as the gateway (``GET /workers``) and as
every node (``GET /<name>/metrics``, ``GET /<name>/server_info``); tests/unit/test_rollout_look.py
uses it and ``sequential_look`` too. docs/fleet-scale.md has the figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "collections") not in sys.path:
    sys.path.insert(0, str(REPO / "collections"))

from ansible.module_utils.urls import open_url

from ansible_collections.gpufleet.sglang.plugins.module_utils.common.fan_out import WORKERS
from ansible_collections.gpufleet.sglang.plugins.module_utils.fleet.rollout_plan import (
    Node,
    check_headroom,
    parse_load,
    parse_max_unavailable,
    parse_workers,
    room,
    unavailable,
)
from ansible_collections.gpufleet.sglang.plugins.modules import rollout_room

# --------------------------------------------------------------------------- the reference


def sequential_get(url: str, key: str, timeout: float) -> bytes:
    """The module's GET before the change: open_url, which builds a TLS context for each call."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    with open_url(url, headers=headers, method="GET", timeout=timeout) as resp:
        return resp.read(4 * 1024 * 1024)


def sequential_look(params: dict, get: Callable[[str, str, float], bytes] = sequential_get) -> dict[str, object]:
    """The module's look() before the nodes were read side by side, as it was (``get`` its GET, or a
    test's stand-in for the module's ``_get``): the gateway's list, then every member in the gateway
    one after another, ``/metrics`` then ``/server_info``."""
    members = {str(k): str(v).rstrip("/") for k, v in params["members"].items()}
    key, timeout = params["api_key"], params["timeout_s"]
    k = parse_max_unavailable(params["max_unavailable"]).resolve(len(members))
    headroom = check_headroom(params["headroom"])
    leaving = [str(n) for n in params["leaving"]]
    base: dict[str, object] = {"allowed": False, "max_unavailable": k, "out": {}, "would_be_out": [], "nodes": {}}
    try:
        doc = json.loads(get(params["gateway_url"].rstrip("/") + "/workers", key, timeout))
        workers = parse_workers(doc)
    except (OSError, ValueError) as exc:
        return dict(base, reason="gateway", msg=f"GET {params['gateway_url']}/workers: {exc}")
    out = unavailable(members, workers)
    nodes: list[Node] = []
    detail: dict[str, dict[str, object]] = {}
    for name, url in sorted(members.items()):
        if name in out:
            nodes.append(Node(name, False))
            detail[name] = {"in_gateway": False, "why": out[name]}
            continue
        load, cap, error = None, None, ""
        try:
            load = parse_load(get(url + "/metrics", key, timeout).decode("utf-8", "replace"))
            info = json.loads(get(url + "/server_info", key, timeout))
            cap = rollout_room._capacity(info, params["node_capacity"])
        except (OSError, ValueError) as exc:
            error = f"{url}: {exc}"
            cap = rollout_room._capacity({}, params["node_capacity"]) if load is not None else None
        nodes.append(Node(name, True, load, cap))
        detail[name] = {
            "in_gateway": True,
            "running": load.running if load else None,
            "queued": load.queued if load else None,
            "capacity": cap,
            "error": error,
        }
    decision = room(nodes, leaving, k, headroom, out_why=out).as_dict()
    return dict(decision, nodes=detail)


# --------------------------------------------------------------------------- the fake fleet

HANG_S = 30.0  # the longest a hanging answer waits (close() releases it at once)


@dataclass
class Behaviour:
    """How one node answers. ``gateway``: ``ready``, ``unhealthy``, ``not ready`` or ``not listed``;
    ``metrics`` / ``info``: ``ok``, ``garbage`` (a page without the gauges / not JSON), ``404`` or
    ``hang`` (no answer until the fleet closes); ``info`` also ``no_cap`` (no max_running_requests);
    ``delay``: seconds before each of its answers (the fleet's latency when None)."""

    running: int = 0
    queued: int = 0
    cap: int = 64
    gateway: str = "ready"
    metrics: str = "ok"
    info: str = "ok"
    delay: float | None = None


class FakeFleet:
    """The gateway and N nodes behind one in-process HTTP server, each answer after ``latency`` s
    (a node's own ``delay`` if set). Member URLs are ``<url>/<name>``; ``hits`` counts the GETs by path."""

    def __init__(self, nodes: dict[str, Behaviour], latency: float = 0.0, gateway_delay: float | None = None) -> None:
        self.nodes = nodes
        self.latency = latency
        self.gateway_delay = latency if gateway_delay is None else gateway_delay
        self.hits: Counter[str] = Counter()
        self.release = threading.Event()
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with lock:
                    outer.hits[self.path] += 1
                status, body = outer.answer(self.path)
                if status == 0:
                    outer.release.wait(HANG_S)
                    return
                try:
                    self.send_response(status)
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    return  # the client gave up (its timeout)

            def log_message(self, *args: object) -> None:
                return

        class Server(ThreadingHTTPServer):
            request_queue_size = 256
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def member_url(self, name: str) -> str:
        return f"{self.url}/{name}"

    def members(self) -> dict[str, str]:
        return {name: self.member_url(name) for name in self.nodes}

    def answer(self, path: str) -> tuple[int, bytes]:
        """(status, body) for ``path``, after the latency; status 0: hang."""
        if path == "/workers":
            time.sleep(self.gateway_delay)
            workers = [
                {
                    "url": self.member_url(n),
                    "is_healthy": b.gateway != "unhealthy",
                    "status": "pending" if b.gateway == "not ready" else "ready",
                }
                for n, b in self.nodes.items()
                if b.gateway != "not listed"
            ]
            return 200, json.dumps({"workers": workers, "total": len(workers)}).encode()
        name, sep, what = path.lstrip("/").partition("/")
        b = self.nodes.get(name)
        if b is None or not sep or what not in ("metrics", "server_info"):
            return 404, b"not found"
        time.sleep(self.latency if b.delay is None else b.delay)
        how = b.metrics if what == "metrics" else b.info
        if how in ("hang", "404"):
            return (0, b"") if how == "hang" else (404, b"not found")
        return 200, self.body(b, what, how)

    @staticmethod
    def body(b: Behaviour, what: str, how: str) -> bytes:
        if what == "metrics":
            if how == "garbage":
                return b"# HELP something_else\nsomething_else 1\n"
            return (
                "# TYPE sglang:num_running_reqs gauge\n"
                f'sglang:num_running_reqs{{model_name="m"}} {b.running}.0\n'
                f'sglang:num_queue_reqs{{model_name="m"}} {b.queued}.0\n'
            ).encode()
        if how == "garbage":
            return b"<html>not json</html>"
        return json.dumps({"model_path": "m"} | ({} if how == "no_cap" else {"max_running_requests": b.cap})).encode()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def params(fleet: FakeFleet, leaving: list[str], **kw: object) -> dict[str, object]:
    """rollout_room's parameters for a look at ``fleet`` (the module's defaults unless ``kw`` says)."""
    base = {
        "gateway_url": fleet.url,
        "api_key": "",
        "members": fleet.members(),
        "leaving": leaving,
        "max_unavailable": 1,
        "headroom": 0.8,
        "node_capacity": 0,
        "timeout_s": 5.0,
        "deadline_s": 0.0,
    }
    return base | kw


# --------------------------------------------------------------------------- the figures


def timed(look, p: dict, fleet: FakeFleet) -> tuple[float, int, dict[str, object]]:
    fleet.hits.clear()
    t0 = time.perf_counter()
    result = look(p)
    return time.perf_counter() - t0, sum(fleet.hits.values()), result


def measure(n: int, latency: float, repeat: int) -> dict[str, object]:
    """One look over ``n`` healthy nodes at half load, each GET answered after ``latency`` s: the
    sequential reference as it was (a TLS context per GET), the same with the module's GET (the
    context built once), and the module's look; each ``repeat`` times (the medians)."""
    nodes = {f"node{i:03d}": Behaviour(running=32) for i in range(n)}
    fleet = FakeFleet(nodes, latency)
    looks = {
        "sequential": sequential_look,
        "sequential_one_context": lambda p: sequential_look(p, rollout_room._get),
        "concurrent": rollout_room.look,
    }
    try:
        p = params(fleet, ["node000"])
        runs = {what: [timed(f, p, fleet) for i in range(repeat)] for what, f in looks.items()}
    finally:
        fleet.close()
    reference = runs["sequential"][0][2]
    return {
        "nodes": n,
        "gets": {what: r[0][1] for what, r in runs.items()},
        "seconds": {what: statistics.median(x[0] for x in r) for what, r in runs.items()},
        "same": all(x[2] == reference for r in runs.values() for x in r),
        "allowed": reference["allowed"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, nargs="+", default=[10, 50, 200])
    ap.add_argument("--latency-ms", type=float, default=20.0, help="each GET's answer time")
    ap.add_argument("--repeat", type=int, default=1, help="looks of each kind per size (the medians are printed)")
    a = ap.parse_args(argv)
    print(
        f"one look, each GET answered after {a.latency_ms:g} ms, median of {a.repeat}; at most {WORKERS} reads at once"
    )
    print(
        "| nodes | GETs (before / after) | before: sequential | sequential, TLS context once | after: concurrent "
        "| speed-up | same result |"
    )
    print("|---:|---:|---:|---:|---:|---:|---|")
    ok = True
    for n in a.nodes:
        r = measure(n, a.latency_ms / 1000.0, a.repeat)
        ok = ok and bool(r["same"])
        gets, sec = r["gets"], r["seconds"]
        print(
            f"| {n} | {gets['sequential']} / {gets['concurrent']} | {sec['sequential']:.2f} s "
            f"| {sec['sequential_one_context']:.2f} s | {sec['concurrent']:.2f} s "
            f"| {sec['sequential'] / sec['concurrent']:.0f}x | {'yes' if r['same'] else 'NO'} |"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
