# Copyright (c) gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A rolling upgrade of a simulated fleet, run through the collection's own rollout rules (issue 27,
part 5): the batches come from ``rollout_plan.serial_batches`` (what the filter ``rollout_serial``
gives the play's ``serial``), every "may these nodes leave?" is answered by the module
``rollout_room``'s ``look()`` with its HTTP calls answered from the simulated fleet (the gateway's
``GET /workers``, each node's ``/metrics`` and ``/server_info``), the drain budget by
``rollout_plan.drain_budget``, and the wait for room paced as roles/sglang_gateway/tasks/room.yml
paces it (an attempt, then ``ceil(timeout / poll)`` retries ``poll`` seconds apart: Ansible's
``until``/``retries``/``delay``).

Nothing here decides: it only keeps the clock, the fleet's load and which nodes are out, and
records every decision so the tests can check the invariants (never more than max_unavailable
out, the canary alone first, no removal the load check would refuse, a failure with numbers at the
deadline). Run it to print a 200-node rollout:

    .venv/bin/python benchmarks/fleet_sim.py [--nodes 200] [--max-unavailable 10%] [--load 0.5]

docs/fleet-scale.md says what it shows.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "collections") not in sys.path:
    sys.path.insert(0, str(REPO / "collections"))

from ansible_collections.gpufleet.sglang.plugins.module_utils.common import fan_out
from ansible_collections.gpufleet.sglang.plugins.module_utils.fleet import rollout_plan
from ansible_collections.gpufleet.sglang.plugins.modules import rollout_room

GATEWAY = "http://gateway.sim:8080"


@dataclass
class Fleet:
    """The simulated fleet: N nodes with a running cap each, a fleet-wide load (requests running or
    queued) that is a function of the clock, spread evenly over the nodes the gateway routes to."""

    n: int
    capacity: int = 64
    load: Callable[[float], int] = lambda t: 0
    unhealthy: set[str] = field(default_factory=set)  # listed by the gateway, failing its health checks
    out: set[str] = field(default_factory=set)
    clock: float = 0.0

    @property
    def names(self) -> list[str]:
        return [f"node{i:03d}" for i in range(self.n)]

    def url(self, name: str) -> str:
        return f"http://{name}.sim:30000"

    def serving(self) -> list[str]:
        return [m for m in self.names if m not in self.out and m not in self.unhealthy]

    def answers(self) -> dict[str, bytes]:
        """What the gateway and every node answer now, by URL (stands in for open_url): the gateway's
        ``GET /workers`` lists the nodes not out, each serving node's ``/metrics`` carries its share of
        the fleet's load (spread evenly, running up to its cap, the rest queued), ``/server_info`` its cap.
        A node out of the gateway, or unhealthy, has no answer (the module never asks it)."""
        serving = self.serving()
        base, extra = divmod(self.load(self.clock), max(len(serving), 1))
        workers = [
            {"url": self.url(m), "is_healthy": m not in self.unhealthy, "status": "ready"}
            for m in self.names
            if m not in self.out
        ]
        out = {GATEWAY + "/workers": json.dumps({"workers": workers, "total": len(workers)}).encode()}
        info = json.dumps({"max_running_requests": self.capacity}).encode()
        for i, m in enumerate(serving):
            mine = base + (1 if i < extra else 0)
            running, queued = min(mine, self.capacity), max(mine - self.capacity, 0)
            out[self.url(m) + "/metrics"] = (
                f'sglang:num_running_reqs{{model_name="m"}} {running}.0\n'
                f'sglang:num_queue_reqs{{model_name="m"}} {queued}.0\n'
            ).encode()
            out[self.url(m) + "/server_info"] = info
        return out


@dataclass
class Timing:
    """Seconds of each step of a node's restart (the lab's and a real node's figures are in docs/fleet-scale.md)."""

    deploy_s: float = 60.0  # the tasks before the detour (release, server files)
    drain_s: float = 3.0  # until the node runs and queues nothing (within its budget)
    cold_start_s: float = 450.0  # restart to ready
    gate_s: float = 60.0  # the throughput gate
    back_s: float = 5.0  # add_worker until the gateway routes to it
    room_timeout_s: int = 600  # sglang_gateway_room_timeout_s
    room_poll_s: int = 5  # sglang_gateway_room_poll_s


@dataclass
class Event:
    t: float
    kind: str  # look | out | back | fail
    nodes: list[str]
    allowed: bool | None = None
    reason: str = ""
    msg: str = ""
    http_calls: int = 0  # the GETs of one look (each node of the batch makes its own look)
    out_after: int = 0  # nodes out of the gateway (the rollout's and the unhealthy ones) after the event
    load: int = 0
    remaining_capacity: float = 0.0


@dataclass
class Result:
    batches: list[int]
    max_unavailable: int
    events: list[Event]
    wall_s: float
    failed: str = ""

    @property
    def removals(self) -> list[Event]:
        return [e for e in self.events if e.kind == "out"]


def _look(fleet: Fleet, leaving: list[str], max_unavailable: object, headroom: float) -> dict[str, object]:
    """One rollout_room look, its HTTP answered by the simulated fleet."""
    params = {
        "gateway_url": GATEWAY,
        "api_key": "",
        "members": {m: fleet.url(m) for m in fleet.names},
        "leaving": leaving,
        "max_unavailable": max_unavailable,
        "headroom": headroom,
        "node_capacity": 0,
        "timeout_s": 5.0,
    }
    answers = fleet.answers()
    calls: list[str] = []

    def get(url: str, key: str, timeout: float) -> bytes:
        calls.append(url)
        if url not in answers:
            raise OSError(f"simulated fleet: {url} does not answer")
        return answers[url]

    # the simulated fleet answers at once: the look reads in this thread (threads would only add their
    # start and wake-up to every one of the thousands of looks a rollout makes)
    in_thread = functools.partial(fan_out.gather, workers=0)
    with mock.patch.object(rollout_room, "_get", get), mock.patch.object(rollout_room, "gather", in_thread):
        decision = rollout_room.look(params)
    return dict(decision, http_calls=len(calls))


def rollout(
    fleet: Fleet,
    max_unavailable: object,
    *,
    headroom: float = 0.8,
    timing: Timing | None = None,
    serial: list[int] | None = None,
) -> Result:
    """Roll the whole fleet out, batch after batch, as playbooks/sglang.yml does with every node
    restarting: deploy, wait for room (the batch as ``leaving``), out, drain, cold start, gate, back.
    Stops at the first batch that finds no room by the deadline
    (max_fail_percentage 0), with the module's message."""
    tm = timing or Timing()
    batches = serial if serial is not None else rollout_plan.serial_batches(fleet.n, max_unavailable)
    k = rollout_plan.parse_max_unavailable(max_unavailable).resolve(fleet.n)
    retries = math.ceil(tm.room_timeout_s / tm.room_poll_s)  # room.yml's retries; Ansible adds the first attempt
    events: list[Event] = []
    names = fleet.names
    todo = names  # an unhealthy node is still a host of the play: it is in its batch like any other
    start = fleet.clock
    pos = 0
    for size in batches:
        batch = todo[pos : pos + size]
        pos += size
        if not batch:
            break  # fewer hosts than the list adds up to (a hand-set serial): Ansible stops there too
        fleet.clock += tm.deploy_s
        for attempt in range(retries + 1):
            # every node of the batch looks with the same inputs at the same instant: one look answers all
            first = _look(fleet, batch, max_unavailable, headroom)
            ok = bool(first["allowed"])
            events.append(
                Event(
                    fleet.clock,
                    "look",
                    list(batch),
                    ok,
                    str(first["reason"]),
                    str(first["msg"]),
                    out_after=len(fleet.out | fleet.unhealthy),
                    load=fleet.load(fleet.clock),
                    remaining_capacity=float(first.get("remaining_capacity", 0.0)),
                    http_calls=int(first["http_calls"]),
                )
            )
            if ok:
                break
            if attempt < retries:
                fleet.clock += tm.room_poll_s
        else:
            msg = f"{', '.join(batch)} may not leave the gateway ({first['reason']}): {first['msg']}"
            events.append(Event(fleet.clock, "fail", list(batch), False, str(first["reason"]), msg))
            return Result(batches, k, events, fleet.clock - start, failed=msg)
        fleet.out |= set(batch)
        events.append(
            Event(
                fleet.clock,
                "out",
                list(batch),
                out_after=len(fleet.out | fleet.unhealthy),
                load=fleet.load(fleet.clock),
                remaining_capacity=float(first["remaining_capacity"]),
            )
        )
        fleet.clock += tm.drain_s + tm.cold_start_s + tm.gate_s + tm.back_s
        fleet.out -= set(batch)
        fleet.unhealthy -= set(batch)  # the restart and its gate put an unhealthy node right
        events.append(Event(fleet.clock, "back", list(batch), out_after=len(fleet.out | fleet.unhealthy)))
    return Result(batches, k, events, fleet.clock - start)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--max-unavailable", default="10%")
    ap.add_argument("--capacity", type=int, default=64, help="each node's max_running_requests")
    ap.add_argument("--load", type=float, default=0.5, help="the fleet's load, a share of its total running caps")
    ap.add_argument("--headroom", type=float, default=0.8)
    ap.add_argument("--unhealthy", type=int, default=0, help="nodes failing the gateway's health checks at the start")
    a = ap.parse_args(argv)
    total = round(a.load * a.nodes * a.capacity)
    sick = {f"node{a.nodes - 1 - i:03d}" for i in range(a.unhealthy)}
    fleet = Fleet(a.nodes, a.capacity, load=lambda t: total, unhealthy=sick)
    res = rollout(fleet, a.max_unavailable, headroom=a.headroom)
    looks = [e for e in res.events if e.kind == "look"]
    peak = max((e.out_after for e in res.events), default=0)
    print(f"{a.nodes} nodes, max_unavailable {a.max_unavailable} -> {res.max_unavailable}, load {total} requests")
    print(f"batches ({len(res.batches)}): {res.batches}")
    gets = max((e.http_calls for e in looks), default=0)
    print(f"looks: {len(looks)} ({sum(1 for e in looks if not e.allowed)} refused), most nodes out at once: {peak}")
    print(f"HTTP GETs per look: up to {gets} (x the batch's nodes per poll: each node looks for itself)")
    print(f"simulated wall time: {res.wall_s:.0f} s ({res.wall_s / 3600:.2f} h)")
    if res.failed:
        print(f"FAILED: {res.failed}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
