# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The rolling upgrade's rules, as pure functions (stdlib only; no I/O).

- ``max_unavailable``: how many nodes behind the gateway may be out at once (a count or ``N%``),
  and the ``serial`` batches it gives (the canary alone, then batches of that many).
- ``order``: the nodes already out of the gateway go first (rolling them costs no capacity, and
  each one that comes back frees a place for the next), then the others, each in inventory order;
  the steady ones (``steady``: nothing for this run to change) last, all in one batch.
- ``room``: may these nodes leave the gateway now? The floor (nodes already out or unhealthy
  count against ``max_unavailable``) and the load (the nodes that stay must carry what the
  fleet runs and queues, within their running caps times a headroom).
- ``drain``: the node's drain budget (the longest request it accepts at the per-request decode
  rate the gate measured, plus a margin) and the two SGLang gauges the drain waits on.

docs/sglang-gateway.md says where each rule comes from.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# --------------------------------------------------------------------------- errors


class RolloutPlanError(ValueError):
    """A value the rollout cannot work with; the message names it and the fix."""


class MaxUnavailableError(RolloutPlanError):
    """sglang_rollout_max_unavailable is not a positive count or a percentage in (0, 100]."""


class GatewayListError(RolloutPlanError):
    """The gateway's GET /workers answer is not the shape smg 1.13.0 gives."""


class MetricsError(RolloutPlanError):
    """A node's /metrics text lacks a gauge the drain or the load check needs, or holds a bad value."""


class DrainBudgetError(RolloutPlanError):
    """An input of the drain budget is out of range."""


# --------------------------------------------------------------------------- max_unavailable

_PERCENT = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*%\s*$")
_COUNT = re.compile(r"^\s*([0-9]+)\s*$")


@dataclass(frozen=True)
class MaxUnavailable:
    """A parsed ``sglang_rollout_max_unavailable``: ``count`` nodes, or ``percent`` of them."""

    count: int | None = None
    percent: float | None = None

    def resolve(self, n_nodes: int) -> int:
        """The number of nodes, out of ``n_nodes``, that may be out at once: a percentage rounds down
        (as Ansible's ``serial`` and Kubernetes' maxUnavailable do), never below 1 (0 would never let
        a node go); a count above the fleet is the fleet."""
        if n_nodes < 0:
            raise MaxUnavailableError(f"the number of nodes must be >= 0, got {n_nodes}")
        k = math.floor(n_nodes * self.percent / 100.0 + 1e-9) if self.percent is not None else int(self.count or 0)
        return max(1, min(k, max(n_nodes, 1)))


def parse_max_unavailable(value: object) -> MaxUnavailable:
    """``1``, ``"2"``, ``"25%"``, ``"12.5%"``; anything else is a MaxUnavailableError naming it."""
    hint = "set sglang_rollout_max_unavailable to a count >= 1 (e.g. 1) or a percentage in (0, 100] (e.g. 25%)"
    if isinstance(value, bool) or value is None:
        raise MaxUnavailableError(f"sglang_rollout_max_unavailable = {value!r} is not a count or a percentage; {hint}")
    if isinstance(value, int):
        text = str(value)
    elif isinstance(value, str):
        text = value
    else:
        kind = type(value).__name__
        raise MaxUnavailableError(
            f"sglang_rollout_max_unavailable = {value!r} ({kind}) is not a count or a percentage; {hint}"
        )
    m = _PERCENT.match(text)
    if m:
        pct = float(m.group(1))
        if not 0.0 < pct <= 100.0:
            raise MaxUnavailableError(f"sglang_rollout_max_unavailable = {value!r} is outside (0%, 100%]; {hint}")
        return MaxUnavailable(percent=pct)
    m = _COUNT.match(text)
    if m:
        count = int(m.group(1))
        if count < 1:
            raise MaxUnavailableError(
                f"sglang_rollout_max_unavailable = {value!r} would never let a node leave the gateway; {hint}"
            )
        return MaxUnavailable(count=count)
    raise MaxUnavailableError(f"sglang_rollout_max_unavailable = {value!r} is not a count or a percentage; {hint}")


def serial_batches(n_nodes: int, max_unavailable: object, steady: int = 0) -> list[int]:
    """The play's ``serial``: the canary alone, then batches of ``max_unavailable`` nodes (the last one
    what is left). Sums to ``n_nodes``; ``[1]`` for a fleet of 0 or 1 (a ``--limit`` runs out of hosts
    before the list does, and Ansible repeats the last size when the list runs out first).

    ``steady``: how many of the nodes, the last ones of the rollout order, have nothing for this run to
    change (the plan found them so, :func:`steady`). They take one batch of their own after the others:
    none of them leaves the gateway, so the batch costs no capacity, and a no-op converge is one batch
    instead of one per node. ``max_unavailable`` resolves against the whole fleet, as before."""
    for what, value in (("the number of nodes", n_nodes), ("the number of steady nodes", steady)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise MaxUnavailableError(f"{what} must be an integer >= 0, got {value!r}")
    if steady > n_nodes:
        raise MaxUnavailableError(f"{steady} steady nodes of {n_nodes}: there cannot be more steady nodes than nodes")
    k = parse_max_unavailable(max_unavailable).resolve(n_nodes)
    changing = n_nodes - steady
    if changing == 0 and steady > 0:
        return [steady]
    if changing <= 1:
        return [1] + ([steady] if steady else [])
    rest = changing - 1
    return [1] + [k] * (rest // k) + ([rest % k] if rest % k else []) + ([steady] if steady else [])


class RolloutOrderError(RolloutPlanError):
    """The play's hosts or the nodes out of the gateway are not lists of distinct inventory names."""


def _names(value: object, what: str) -> list[str]:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise RolloutOrderError(f"{what} must be a list of inventory names, got {type(value).__name__}")
    for name in value:
        if not isinstance(name, str) or not name:
            raise RolloutOrderError(f"{what} must be a list of inventory names, got the item {name!r}")
    return list(value)


def rollout_order(hosts: object, out_now: object, steady: object = ()) -> list[str]:
    """``hosts`` (the play's, in inventory order) with those in ``out_now`` first: the nodes already
    out of the gateway (held out by an unfinished rollout, unhealthy, not listed) cost no capacity to
    roll, and while one waits in a later batch it counts against max_unavailable and can stop an
    earlier node from leaving. The nodes in ``steady`` (nothing for this run to change) go last, for
    their one batch (:func:`serial_batches`); a node both out and steady is out (it must come back).
    Each part keeps inventory order; a name in ``out_now`` or ``steady`` that is not a host of the
    play is ignored (a --limit left it out)."""
    names = _names(hosts, "the play's hosts")
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise RolloutOrderError(f"the play's hosts name {', '.join(dup)} more than once")
    first = set(_names(out_now, "the nodes out of the gateway"))
    last = set(_names(steady, "the steady nodes")) - first
    return (
        [n for n in names if n in first]
        + [n for n in names if n not in first and n not in last]
        + [n for n in names if n in last]
    )


class SteadyError(RolloutPlanError):
    """The plan of a node is not the shape the rollout's plan play publishes."""


# the plan's parts, each a reason the node changes in this run when it does not hold (docs/sglang-gateway.md,
# "Steady nodes"): the key of the plan, and what the reason says
_STEADY_CHECKS = (
    ("read", "the plan could not read the node"),
    ("in_gateway", "it is out of the gateway"),
    ("release", "its release changes"),
    ("container", "its container's restart is pending"),
    ("restart_mark", "a restart left pending by an earlier run"),
    ("files", "its server's files differ"),
    ("gate", "it has no passing gate of this key"),
)


def steady(plan: object) -> dict[str, Any]:
    """Whether a node has nothing for this run to change, from what the plan read: ``{"steady": bool,
    "reasons": [str]}``, each reason one part that does not hold (with its detail where the plan gave
    one). ``plan`` maps each part of ``_STEADY_CHECKS`` to ``{"ok": bool, "detail": str}``; a part
    that is missing or not that shape counts as not holding (a plan that did not finish never makes a
    node steady). A part ``{"ok": false, "skipped": true}`` was not read because another part already
    decides (the server's files of a release that changes): it does not hold, and it is named only when
    no other part gives a reason. Steady means: nothing to install, nothing to write, nothing pending,
    and a gate that stands, so the node never leaves the gateway in this run."""
    if not isinstance(plan, Mapping):
        raise SteadyError(f"the node's plan must be a mapping of its checks, got {type(plan).__name__}")
    reasons: list[str] = []
    unread: list[str] = []
    for key, why in _STEADY_CHECKS:
        part = plan.get(key)
        if isinstance(part, Mapping) and part.get("ok") is True:
            continue
        if isinstance(part, Mapping) and part.get("skipped") is True:
            unread.append(f"{key} was not read")
            continue
        detail = part.get("detail") if isinstance(part, Mapping) else None
        detail = " ".join(detail.split())[:300] if isinstance(detail, str) else ""
        reasons.append(f"{why} ({detail})" if detail else why)
    reasons = reasons or unread
    return {"steady": not reasons, "reasons": reasons}


# --------------------------------------------------------------------------- the gateway's workers


@dataclass(frozen=True)
class Worker:
    """One entry of smg's ``GET /workers``: its URL, and whether it takes requests."""

    url: str
    healthy: bool
    ready: bool

    @property
    def serving(self) -> bool:
        return self.healthy and self.ready


def _norm_url(url: str) -> str:
    return url.rstrip("/")


def parse_workers(doc: object) -> list[Worker]:
    """``{"workers": [{"url", "is_healthy", "status", ...}], ...}`` (smg 1.13.0) to Workers."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("workers"), list):
        raise GatewayListError(
            f"GET /workers answered {type(doc).__name__} without a 'workers' list; is the gateway smg >= 1.13?"
        )
    out: list[Worker] = []
    for i, entry in enumerate(doc["workers"]):
        if not isinstance(entry, Mapping):
            raise GatewayListError(f"GET /workers: entry {i} is {type(entry).__name__}, not an object")
        url = entry.get("url")
        if not isinstance(url, str) or not url:
            raise GatewayListError(f"GET /workers: entry {i} has no 'url' string")
        healthy = entry.get("is_healthy")
        if not isinstance(healthy, bool):
            raise GatewayListError(f"GET /workers: {url} has no boolean 'is_healthy' (got {healthy!r})")
        status = entry.get("status", "")
        if not isinstance(status, str):
            raise GatewayListError(f"GET /workers: {url} has a 'status' that is not a string (got {status!r})")
        out.append(Worker(_norm_url(url), healthy, status == "ready"))
    return out


def unavailable(members: Mapping[str, str], workers: Sequence[Worker]) -> dict[str, str]:
    """The members (name -> worker URL) the gateway does not route to, each with why: ``not listed``
    (removed, held out, not yet registered) or ``unhealthy`` / ``not ready`` (listed, failing its
    health checks or still registering)."""
    by_url = {w.url: w for w in workers}
    out: dict[str, str] = {}
    for name in sorted(members):
        w = by_url.get(_norm_url(members[name]))
        if w is None:
            out[name] = "not listed"
        elif not w.healthy:
            out[name] = "unhealthy"
        elif not w.ready:
            out[name] = "not ready"
    return out


# --------------------------------------------------------------------------- SGLang's gauges

_SAMPLE = re.compile(
    r"^(sglang:num_running_reqs|sglang:num_queue_reqs)(?:\{[^}\n]*\})?[ \t]+(\S+)(?:[ \t]+\S+)?[ \t]*$"
)
GAUGES = ("sglang:num_running_reqs", "sglang:num_queue_reqs")


@dataclass(frozen=True)
class Load:
    """What a node runs and queues (sums over the gauges' label sets: one per DP rank)."""

    running: int
    queued: int

    @property
    def total(self) -> int:
        return self.running + self.queued


def parse_load(text: object) -> Load:
    """``sglang:num_running_reqs`` and ``sglang:num_queue_reqs`` from a Prometheus text page (SGLang's
    ``/metrics`` with ``--enable-metrics``): the sum of each gauge's samples. Both must be there."""
    if not isinstance(text, str):
        raise MetricsError(f"/metrics: expected the Prometheus text page, got {type(text).__name__}")
    sums: dict[str, float] = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if not m:
            continue
        name, raw = m.group(1), m.group(2)
        try:
            value = float(raw)
        except ValueError:
            raise MetricsError(f"/metrics: {name} has the value {raw[:40]!r}, not a number") from None
        if not math.isfinite(value) or value < 0:
            raise MetricsError(f"/metrics: {name} = {raw[:40]} is not a count >= 0")
        sums[name] = sums.get(name, 0.0) + value
    missing = [g for g in GAUGES if g not in sums]
    if missing:
        raise MetricsError(
            f"/metrics has no {' or '.join(missing)} sample; start the server with enable_metrics "
            "(sglang_server_extra_args) so the rollout can see its running and queued requests"
        )
    return Load(round(sums[GAUGES[0]]), round(sums[GAUGES[1]]))


# --------------------------------------------------------------------------- room to leave


@dataclass(frozen=True)
class Node:
    """A member as the room check sees it: in the gateway or not, its load and its running cap."""

    name: str
    in_gateway: bool
    load: Load | None = None
    capacity: int | None = None


@dataclass
class Room:
    """The answer to "may ``leaving`` leave the gateway now?", with the numbers behind it."""

    allowed: bool
    reason: str  # ok | floor | load | capacity_unknown | no_load
    max_unavailable: int
    out: dict[str, str] = field(default_factory=dict)
    leaving: list[str] = field(default_factory=list)
    would_be_out: list[str] = field(default_factory=list)
    fleet_running: int = 0
    fleet_queued: int = 0
    remaining: list[str] = field(default_factory=list)
    remaining_capacity: float = 0.0
    headroom: float = 1.0
    msg: str = ""

    def as_dict(self) -> dict[str, object]:
        return {
            "allowed": self.allowed,
            "reason": self.reason,
            "max_unavailable": self.max_unavailable,
            "out": dict(self.out),
            "leaving": list(self.leaving),
            "would_be_out": list(self.would_be_out),
            "fleet_running": self.fleet_running,
            "fleet_queued": self.fleet_queued,
            "remaining": list(self.remaining),
            "remaining_capacity": self.remaining_capacity,
            "headroom": self.headroom,
            "msg": self.msg,
        }


def check_headroom(headroom: object) -> float:
    if isinstance(headroom, bool) or not isinstance(headroom, (int, float)):
        raise RolloutPlanError(f"sglang_rollout_capacity_headroom = {headroom!r} is not a number in (0, 1]")
    h = float(headroom)
    if not (math.isfinite(h) and 0.0 < h <= 1.0):
        raise RolloutPlanError(
            f"sglang_rollout_capacity_headroom = {headroom!r} is outside (0, 1]: the share of the staying "
            "nodes' running caps the rollout may fill (e.g. 0.8)"
        )
    return h


def look_deadline(timeout_s: object, deadline_s: object = 0) -> float:
    """The seconds one look at the fleet may take: ``deadline_s``, or with 0 three request timeouts
    (the gateway's list, then a node's ``/metrics`` and ``/server_info``, each within its timeout:
    what one node costs when the nodes are read side by side). A node not read by then counts as one
    that did not answer."""
    for name, value in (("timeout_s", timeout_s), ("deadline_s", deadline_s)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise RolloutPlanError(f"{name} = {value!r} is not a number of seconds")
    if timeout_s <= 0:
        raise RolloutPlanError(f"timeout_s = {timeout_s!r} must be > 0 (each HTTP call's timeout)")
    if deadline_s < 0:
        raise RolloutPlanError(
            f"deadline_s = {deadline_s!r} must be >= 0 (0: three times timeout_s, {3 * timeout_s:g} s)"
        )
    return float(deadline_s) if deadline_s > 0 else 3.0 * float(timeout_s)


def room(
    nodes: Sequence[Node],
    leaving: Sequence[str],
    max_unavailable: int,
    headroom: float,
    out_why: Mapping[str, str] | None = None,
) -> Room:
    """May the members ``leaving`` leave the gateway now (all at once: they are one batch)?

    Floor: the members out of the gateway (``in_gateway`` false) together with ``leaving`` must be
    at most ``max_unavailable``. Load: the requests running and queued on the members in the gateway
    (``leaving`` among them: what they run moves to the others) must fit in the running caps of the
    members that stay, times ``headroom``. A staying member whose load or cap is unknown makes the
    load unknown, which never allows the removal of a node that is serving requests."""
    h = check_headroom(headroom)
    if isinstance(max_unavailable, bool) or not isinstance(max_unavailable, int) or max_unavailable < 1:
        raise MaxUnavailableError(f"max_unavailable must be an integer >= 1, got {max_unavailable!r}")
    names = {n.name for n in nodes}
    unknown = sorted(set(leaving) - names)
    if unknown:
        raise RolloutPlanError(f"leaving names nodes that are not members of the gateway: {', '.join(unknown)}")
    why = dict(out_why or {})
    out = {n.name: why.get(n.name, "out of the gateway") for n in nodes if not n.in_gateway}
    leave = sorted(set(leaving))
    would = sorted(set(out) | set(leave))
    r = Room(False, "floor", max_unavailable, out=out, leaving=leave, would_be_out=would, headroom=h)
    if len(would) > max_unavailable:
        already = sorted(set(out) - set(leave))
        r.msg = f"{len(would)} node(s) would be out of the gateway ({', '.join(would)}), more than max_unavailable " + (
            f"{max_unavailable}: already out " + ", ".join(f"{n} ({out[n]})" for n in already)
            if already
            else f"{max_unavailable}: the batch is larger than max_unavailable (sglang_rollout_serial set by hand?)"
        )
        return r
    serving = [n for n in nodes if n.in_gateway]
    stay = [n for n in serving if n.name not in set(leave)]
    r.remaining = sorted(n.name for n in stay)
    no_load = [n.name for n in serving if n.load is None]
    if no_load:
        r.reason = "no_load"
        r.msg = f"the load of {', '.join(sorted(no_load))} is unknown (no /metrics answer)"
        return r
    r.fleet_running = sum(n.load.running for n in serving if n.load is not None)
    r.fleet_queued = sum(n.load.queued for n in serving if n.load is not None)
    load = r.fleet_running + r.fleet_queued
    no_cap = [n.name for n in stay if n.capacity is None or n.capacity < 1]
    if no_cap and load > 0:
        r.reason = "capacity_unknown"
        r.msg = (
            f"the running cap of {', '.join(sorted(no_cap))} is unknown (no max_running_requests in /server_info); "
            "set max_running_requests in the server's options, or sglang_rollout_node_capacity"
        )
        return r
    r.remaining_capacity = round(sum(n.capacity or 0 for n in stay) * h, 3)
    if load > r.remaining_capacity:
        r.reason = "load"
        r.msg = (
            f"the fleet runs {r.fleet_running} and queues {r.fleet_queued} request(s); without "
            f"{', '.join(leave)} the {len(stay)} staying node(s) carry {r.remaining_capacity:g} "
            f"({h:g} x their running caps)"
        )
        return r
    r.allowed, r.reason = True, "ok"
    r.msg = (
        f"{len(would)} of max_unavailable {max_unavailable} out; load {load} within {r.remaining_capacity:g} "
        f"of the {len(stay)} staying node(s)"
    )
    return r


# --------------------------------------------------------------------------- drain budget


def _positive(name: str, value: object, *, integer: bool = False, zero_ok: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        raise DrainBudgetError(f"{name} = {value!r} is not a number")
    if integer and float(value) != int(value):
        raise DrainBudgetError(f"{name} = {value!r} is not a whole number")
    if float(value) < 0 or (float(value) == 0 and not zero_ok):
        raise DrainBudgetError(f"{name} = {value!r} must be {'>= 0' if zero_ok else '> 0'}")
    return float(value)


def request_rate(record: object) -> float | None:
    """Per-request decode rate (output tokens/s of one stream) from what the gate records: a gate
    result (``throughput_gate_result``) or a baseline document, both with ``median_output_tokens_per_s``
    measured at ``shape.concurrency`` streams. None when the record lacks either or they are not
    positive numbers (a failed or unmeasured run)."""
    if not isinstance(record, Mapping):
        return None
    median = record.get("median_output_tokens_per_s")
    shape = record.get("shape")
    conc = shape.get("concurrency") if isinstance(shape, Mapping) else None
    if isinstance(median, bool) or not isinstance(median, (int, float)) or not math.isfinite(float(median)):
        return None
    if isinstance(conc, bool) or not isinstance(conc, int) or conc < 1 or median <= 0:
        return None
    return float(median) / conc


def pick_record(records: Sequence[object], host: str) -> tuple[float | None, str]:
    """The per-request decode rate of ``host`` from the gate's records, and which record gave it: the
    newest record of this host (``key.host``) with a usable rate, by its ``updated`` (a baseline) or
    ``time`` (a gate result) stamp. A record may be a dict or the JSON text of a baseline file; text
    that is not JSON, and records of other hosts, are passed over."""
    best: tuple[str, float, str] | None = None
    for rec in records:
        doc = rec
        if isinstance(rec, (str, bytes)):
            try:
                doc = json.loads(rec)
            except ValueError:
                continue
        if not isinstance(doc, Mapping) or doc.get("failed") is True:
            continue
        key = doc.get("key")
        if not isinstance(key, Mapping) or key.get("host") != host:
            continue
        rate = request_rate(doc)
        if rate is None:
            continue
        stamp = doc.get("updated") or doc.get("time") or ""
        stamp = stamp if isinstance(stamp, str) else ""
        what = f"{key.get('sglang_version', '?')} at {doc['shape']['concurrency']} streams"
        if best is None or stamp > best[0]:
            best = (stamp, rate, what)
    return (None, "") if best is None else (best[1], best[2])


def drain_budget(
    *,
    budget_s: object = 0,
    max_new_tokens: object = 8192,
    tokens_per_s: object = 0,
    margin_s: object = 30,
    ceiling_s: object = 600,
) -> dict[str, object]:
    """The drain budget of a node, in whole seconds, never above ``ceiling_s`` (the server's stop
    budget, which its unit's TimeoutStopSec is rendered from), and where it comes from:

    - ``set``: ``budget_s`` > 0 (the user's; above the ceiling it is refused);
    - ``gate``: ``max_new_tokens / tokens_per_s + margin_s`` rounded up: the longest request the node
      accepts at the per-request decode rate the gate measured;
    - ``ceiling``: no rate known (no gate record yet), or the sized budget is above the ceiling."""
    b = _positive("sglang_gateway_drain_budget_s", budget_s, integer=True, zero_ok=True)
    n = _positive("sglang_gateway_drain_max_new_tokens", max_new_tokens, integer=True)
    rate = _positive("the per-request decode rate (tokens/s)", tokens_per_s, zero_ok=True)
    margin = _positive("sglang_gateway_drain_margin_s", margin_s, integer=True, zero_ok=True)
    ceiling = _positive("sglang_server_drain_budget_s", ceiling_s, integer=True)
    base = {
        "max_new_tokens": int(n),
        "tokens_per_s": round(rate, 3),
        "margin_s": int(margin),
        "ceiling_s": int(ceiling),
    }
    if b > ceiling:
        raise DrainBudgetError(
            f"sglang_gateway_drain_budget_s = {int(b)} is above the server's stop budget "
            f"sglang_server_drain_budget_s = {int(ceiling)} (its unit's TimeoutStopSec is rendered from it); "
            "raise that one too"
        )
    if b > 0:
        return dict(base, budget_s=int(b), source="set")
    if rate > 0 and n / rate + margin <= ceiling:
        return dict(base, budget_s=math.ceil(n / rate + margin), source="gate")
    return dict(base, budget_s=int(ceiling), source="ceiling")


def drain_line(host: str, drain: Mapping[str, object]) -> str:
    """The line the rollout prints per drained node (the lab's tools grep it; its prefix
    ``<host>: drained in <s> s (`` is the line's older form)."""
    return (
        f"{host}: drained in {drain['seconds']} s ({drain['running_at_start']} running, "
        f"{drain['queued_at_start']} queued at removal; budget {drain['budget_s']} s; "
        f"{drain['stragglers']} straggler(s) {drain['outcome']}), back in the gateway"
    )
