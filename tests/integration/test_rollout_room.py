# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The rollout's capacity check (module rollout_room) against SGLang stand-ins and a fake gateway
listing, and the stand-in's queue gauge and /abort_request that the drain relies on."""

from __future__ import annotations

import json
import threading
import urllib.request

import pytest
from lib.gateway import FakeGateway, metrics, stream, wait_for

from ansible_collections.gpufleet.sglang.plugins.modules.rollout_room import look


@pytest.fixture
def gateway():
    made: list[FakeGateway] = []

    def make(workers):
        made.append(FakeGateway(workers))
        return made[-1]

    yield make
    for g in made:
        g.close()


def params(gw, members, leaving, **kw):
    base = {"gateway_url": gw.url, "api_key": "", "members": members, "leaving": leaving, "max_unavailable": 1}
    return base | {"headroom": 0.8, "node_capacity": 0, "timeout_s": 5.0} | kw


def test_queue_gauge_abort_and_room(standin, gateway):
    busy = standin("--max-running-requests", "2", STANDIN_TOKENS_PER_S="20")
    idle = standin("--max-running-requests", "2")
    finals: list[str] = []
    threads = [threading.Thread(target=stream, args=(busy.url, 400, finals)) for i in range(4)]
    for t in threads:
        t.start()
    # two run (the cap), two wait: the queue gauge shows them
    load = wait_for(lambda: (m := metrics(busy.url)).running == 2 and m.queued == 2 and m)
    assert load.total == 4

    members = {"busy": busy.url, "idle": idle.url, "gone": "http://127.0.0.1:9"}
    gw = gateway([(busy.url, True), (idle.url + "/", True)])
    # "gone" is not listed: one node is out already, so no other may leave under max_unavailable 1
    r = look(params(gw, members, ["idle"]))
    assert (r["allowed"], r["reason"], r["out"]) == (False, "floor", {"gone": "not listed"})
    assert "already out gone (not listed)" in r["msg"]
    # with room for two out: the load (4) does not fit in what "busy" alone carries (2 x 0.8)
    r = look(params(gw, members, ["idle"], max_unavailable=2))
    assert (r["allowed"], r["reason"], r["fleet_running"], r["fleet_queued"]) == (False, "load", 2, 2)
    assert r["nodes"]["busy"]["capacity"] == 2  # from /server_info's max_running_requests
    # taking "busy" out moves its 4 onto "idle", whose cap is 2
    assert look(params(gw, members, ["busy"], max_unavailable=2))["reason"] == "load"
    # a bigger cap on the staying node (its /server_info says 2; node_capacity only fills in a missing one)
    assert look(params(gw, members, ["idle"], max_unavailable="100%", headroom=1.0))["reason"] == "load"

    # the drain's abort: every request ends at once, finish_reason abort, the gauges go to 0
    req = urllib.request.Request(
        busy.url + "/abort_request", data=b'{"abort_all": true}', headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=5) as resp:
        assert resp.status == 200
    for t in threads:
        t.join(timeout=30)
    assert len(finals) == 4
    reasons = [json.loads(f)["meta_info"]["finish_reason"]["type"] for f in finals]
    assert reasons == ["abort"] * 4
    assert wait_for(lambda: metrics(busy.url).total == 0 or None) is True
    # idle now: "idle" may leave when two may be out
    r = look(params(gw, members, ["idle"], max_unavailable=2))
    assert r["allowed"], r["msg"]


def test_unknown_capacity_blocks_only_under_load(standin, gateway):
    slow = standin(STANDIN_TOKENS_PER_S="20")  # no --max-running-requests: its cap is unknown
    other = standin()
    gw = gateway([(slow.url, True), (other.url, True)])
    members = {"slow": slow.url, "other": other.url}
    assert look(params(gw, members, ["slow"]))["allowed"]  # idle: nothing to carry
    finals: list[str] = []
    t = threading.Thread(target=stream, args=(slow.url, 60, finals))
    t.start()
    wait_for(lambda: metrics(slow.url).running == 1)
    r = look(params(gw, members, ["slow"]))
    assert r["reason"] == "capacity_unknown"
    assert "other" in r["msg"]
    assert look(params(gw, members, ["slow"], node_capacity=8))["allowed"]
    t.join(timeout=30)


def test_unhealthy_worker_counts_as_out(standin, gateway):
    a, b = standin(), standin()
    gw = gateway([(a.url, True), (b.url, False)])
    r = look(params(gw, {"a": a.url, "b": b.url}, ["a"]))
    assert (r["reason"], r["out"]) == ("floor", {"b": "unhealthy"})


def test_gateway_not_answering_is_a_no(standin):
    a = standin()
    r = look(
        {
            "gateway_url": "http://127.0.0.1:9",
            "api_key": "",
            "members": {"a": a.url},
            "leaving": ["a"],
            "max_unavailable": 1,
            "headroom": 0.8,
            "node_capacity": 0,
            "timeout_s": 2.0,
        }
    )
    assert (r["allowed"], r["reason"]) == (False, "gateway")
