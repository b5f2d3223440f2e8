# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One look of the rollout's capacity check (module rollout_room's look()) reads the members side by
side: the same result as the sequential reading it replaced (benchmarks/room_look_bench.py keeps it,
``sequential_look``) for healthy, unhealthy, slow, silent and garbage-answering nodes, over real HTTP
(one in-process server standing in for the gateway and every node) and, under hypothesis, over any
mix of answers; far faster than the sequential reading; within its deadline when every node hangs;
each URL read once. And the pool it reads with (module_utils/common/fan_out.py)."""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.error
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

from room_look_bench import Behaviour, FakeFleet, params, sequential_look

from ansible_collections.gpufleet.sglang.plugins.module_utils.common.fan_out import WORKERS, gather
from ansible_collections.gpufleet.sglang.plugins.module_utils.fleet.rollout_plan import RolloutPlanError, look_deadline
from ansible_collections.gpufleet.sglang.plugins.modules import rollout_room
from ansible_collections.gpufleet.sglang.plugins.modules.rollout_room import look


@pytest.fixture
def fleet():
    made: list[FakeFleet] = []

    def make(nodes: dict[str, Behaviour], latency: float = 0.0, **kw: object) -> FakeFleet:
        made.append(FakeFleet(nodes, latency, **kw))
        return made[-1]

    yield make
    for f in made:
        f.close()


def gets(f: FakeFleet) -> dict[str, int]:
    return {path: n for path, n in f.hits.items() if path != "/workers"}


# --------------------------------------------------------------------------- the same result as before


MIX = {
    "a-healthy": Behaviour(running=3, queued=1, cap=8),
    "b-slow": Behaviour(running=2, cap=8, delay=0.3),
    "c-unhealthy": Behaviour(gateway="unhealthy"),
    "d-not-ready": Behaviour(gateway="not ready"),
    "e-not-listed": Behaviour(gateway="not listed"),
    "f-no-cap": Behaviour(running=1, info="no_cap"),
    "g-info-garbage": Behaviour(running=1, info="garbage"),
    "h-info-404": Behaviour(info="404"),
    "i-healthy": Behaviour(cap=4),
}


@pytest.mark.parametrize(
    ("extra", "leaving", "max_unavailable", "reason"),
    [
        ({}, ["a-healthy"], 6, "capacity_unknown"),  # f, g, h have no cap, under load
        ({}, ["a-healthy"], 3, "floor"),  # c, d, e out already
        ({"j-metrics-garbage": Behaviour(metrics="garbage")}, ["i-healthy"], 6, "no_load"),
        ({"j-metrics-404": Behaviour(metrics="404")}, ["b-slow"], 6, "no_load"),
        ({"j-silent": Behaviour(metrics="hang"), "k-silent-info": Behaviour(info="hang")}, ["i-healthy"], 6, "no_load"),
    ],
)
def test_same_result_as_the_sequential_look(fleet, extra, leaving, max_unavailable, reason):
    f = fleet(MIX | extra)
    p = params(f, leaving, max_unavailable=max_unavailable, timeout_s=1.0, deadline_s=30.0)
    before = sequential_look(p, rollout_room._get)
    after = look(p)
    assert after == before
    assert after["reason"] == reason, after["msg"]


def test_same_result_as_the_sequential_look_through_open_url(fleet):
    """The reference as it was to the letter, its GETs through open_url (a TLS context per GET)."""
    f = fleet(MIX | {"j-silent": Behaviour(metrics="hang")})
    p = params(f, ["i-healthy"], max_unavailable=6, timeout_s=1.0, deadline_s=30.0)
    before = sequential_look(p)
    after = look(p)
    assert after == before
    assert after["reason"] == "no_load", after["msg"]


def test_same_numbers_and_names_when_allowed_and_when_the_load_does_not_fit(fleet):
    nodes = {f"n{i}": Behaviour(running=i, queued=i % 2, cap=10, delay=0.05 * (i % 3)) for i in range(12)}
    f = fleet(nodes)
    for leaving, headroom, reason in ((["n3"], 0.8, "ok"), (["n11", "n2"], 0.5, "load")):
        p = params(f, leaving, max_unavailable=2, headroom=headroom)
        before, after = sequential_look(p, rollout_room._get), look(p)
        assert after == before
        assert (after["reason"], after["fleet_running"], after["fleet_queued"]) == (reason, 66, 6)
        assert after["remaining"] == sorted(set(nodes) - set(leaving))


def test_a_silent_node_counts_as_one_that_did_not_answer(fleet):
    f = fleet({"quiet": Behaviour(metrics="hang"), "fine": Behaviour(cap=8), "half": Behaviour(info="hang")})
    r = look(params(f, ["fine"], max_unavailable=1, timeout_s=0.5, node_capacity=4))
    assert r["reason"] == "no_load"
    assert r["msg"] == "the load of quiet is unknown (no /metrics answer)"
    assert r["nodes"]["quiet"]["running"] is None
    assert r["nodes"]["quiet"]["capacity"] is None
    assert "timed out" in r["nodes"]["quiet"]["error"]
    # /metrics answered, /server_info did not: its cap is node_capacity, as when /server_info fails
    assert (r["nodes"]["half"]["running"], r["nodes"]["half"]["capacity"]) == (0, 4)
    assert "timed out" in r["nodes"]["half"]["error"]


def test_members_that_share_a_url_are_read_once(fleet):
    f = fleet({"a": Behaviour(running=2, cap=8), "b": Behaviour(running=1, cap=8)})
    members = {"a": f.member_url("a"), "a-again": f.member_url("a") + "/", "b": f.member_url("b")}
    p = params(f, ["b"], max_unavailable=2) | {"members": members}
    before = sequential_look(p, rollout_room._get)
    f.hits.clear()
    after = look(p)
    assert after == before
    assert after["fleet_running"] == 5  # a counted for both its names, as before
    assert gets(f) == {"/a/metrics": 1, "/a/server_info": 1, "/b/metrics": 1, "/b/server_info": 1}


# --------------------------------------------------------------------------- time


def test_40_nodes_answering_after_200_ms_are_read_side_by_side(fleet):
    """Sequentially 40 x 2 GETs x 0.2 s is 16 s; side by side 16 at a time, 3 rounds of 0.4 s."""
    f = fleet({f"node{i:02d}": Behaviour(running=1, cap=4) for i in range(40)}, latency=0.2)
    t0 = time.monotonic()
    r = look(params(f, ["node00"], max_unavailable=1))
    took = time.monotonic() - t0
    assert (r["allowed"], r["fleet_running"], len(r["remaining"])) == (True, 40, 39), r["msg"]
    assert took < 8.0, f"one look over 40 nodes took {took:.1f} s"
    assert sum(gets(f).values()) == 80


def test_the_deadline_holds_when_every_node_hangs(fleet):
    f = fleet({f"node{i:02d}": Behaviour(metrics="hang") for i in range(40)})
    t0 = time.monotonic()
    r = look(params(f, ["node00"], max_unavailable=1, timeout_s=4.0, deadline_s=1.0))
    took = time.monotonic() - t0
    # 16 at a time against a 4 s request timeout would take 12 s; the slack is for a loaded CI machine.
    assert took < 6.0, f"the look's deadline is 1 s, it took {took:.1f} s"
    assert r["reason"] == "no_load"
    assert r["msg"] == f"the load of {', '.join(f'node{i:02d}' for i in range(40))} is unknown (no /metrics answer)"
    for name, d in r["nodes"].items():
        assert d["running"] is None, name
        assert "no answer within the look's deadline of 1 s" in d["error"] or "timed out" in d["error"], d


def test_the_deadline_holds_when_the_gateway_hangs(fleet):
    f = fleet({"a": Behaviour()}, gateway_delay=10.0)
    t0 = time.monotonic()
    r = look(params(f, ["a"], timeout_s=5.0, deadline_s=0.5))
    assert time.monotonic() - t0 < 4.0  # the request timeout alone would be 5 s
    assert r["reason"] == "gateway"
    assert "timed out" in r["msg"]


@pytest.mark.parametrize(
    ("timeout_s", "deadline_s", "expected"),
    [(5, 0, 15.0), (5.0, 2, 2.0), (0.5, 0, 1.5), (1, 30.5, 30.5)],
)
def test_look_deadline(timeout_s, deadline_s, expected):
    assert look_deadline(timeout_s, deadline_s) == expected


@pytest.mark.parametrize(
    ("timeout_s", "deadline_s", "text"),
    [
        (0, 0, "timeout_s = 0 must be > 0"),
        (-1.0, 5, "timeout_s = -1.0 must be > 0"),
        (5, -1, "deadline_s = -1 must be >= 0 (0: three times timeout_s, 15 s)"),
        (float("nan"), 0, "timeout_s = nan is not a number of seconds"),
        (5, "10", "deadline_s = '10' is not a number of seconds"),
        (True, 0, "timeout_s = True is not a number of seconds"),
    ],
)
def test_look_deadline_refuses(timeout_s, deadline_s, text):
    with pytest.raises(RolloutPlanError) as err:
        look_deadline(timeout_s, deadline_s)
    assert text in str(err.value)


# --------------------------------------------------------------------------- any mix of answers

GATEWAY = "http://gw.test:8080"

METRICS = st.one_of(
    st.tuples(st.integers(0, 500), st.integers(0, 500)).map(
        lambda rq: f'sglang:num_running_reqs{{dp="0"}} {rq[0]}\nsglang:num_queue_reqs {rq[1]}.0\n'.encode()
    ),
    st.just(b"sglang:num_running_reqs -1\nsglang:num_queue_reqs 0\n"),  # a bad count
    st.just(b"sglang:num_running_reqs 1\n"),  # a gauge missing
    st.binary(max_size=40),  # garbage
    st.sampled_from(["timeout", "refused", "http500"]),
)
INFO = st.one_of(
    st.integers(-2, 300).map(lambda cap: json.dumps({"max_running_requests": cap}).encode()),
    st.just(b'{"max_running_requests": "48"}'),
    st.just(b'{"max_running_requests": null}'),
    st.just(b"[1, 2]"),
    st.binary(max_size=20),
    st.sampled_from(["timeout", "refused", "http500"]),
)
NODE = st.tuples(st.sampled_from(["ready", "ready", "ready", "unhealthy", "not ready", "not listed"]), METRICS, INFO)


def fail(what: str, url: str) -> Exception:
    if what == "timeout":
        return TimeoutError("timed out")
    if what == "refused":
        return urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))
    return urllib.error.HTTPError(url, 500, "Internal Server Error", None, None)


@st.composite
def fleets(draw):
    n = draw(st.integers(1, 10))
    answers = draw(st.lists(NODE, min_size=n, max_size=n))
    # members name the nodes' URLs; some share one (with or without a trailing slash)
    urls = [f"http://n{draw(st.integers(0, n - 1))}.test:30000" + draw(st.sampled_from(["", "/"])) for i in range(n)]
    members = {f"m{i}": urls[i] for i in range(n)}
    leaving = draw(st.lists(st.sampled_from(sorted(members)), min_size=1, max_size=n, unique=True))
    p = {
        "gateway_url": GATEWAY,
        "api_key": draw(st.sampled_from(["", "k"])),
        "members": members,
        "leaving": leaving,
        "max_unavailable": draw(st.one_of(st.integers(1, n), st.sampled_from(["50%", "100%"]))),
        "headroom": draw(st.sampled_from([0.5, 0.8, 1.0])),
        "node_capacity": draw(st.sampled_from([0, 16])),
        "timeout_s": 5.0,
        "deadline_s": 0.0,
    }
    return p, answers


def fake_get(answers: list[tuple[str, object, object]], calls: list[str]):
    """The fleet's answers by URL, at once: node i at http://n<i>.test:30000."""
    workers = [
        {
            "url": f"http://n{i}.test:30000",
            "is_healthy": gw != "unhealthy",
            "status": "pending" if gw == "not ready" else "ready",
        }
        for i, (gw, m, s) in enumerate(answers)
        if gw != "not listed"
    ]
    table: dict[str, object] = {GATEWAY + "/workers": json.dumps({"workers": workers}).encode()}
    for i, node in enumerate(answers):
        m, s = node[1], node[2]
        table[f"http://n{i}.test:30000/metrics"] = m
        table[f"http://n{i}.test:30000/server_info"] = s

    def get(url: str, key: str, timeout: float) -> bytes:
        calls.append(url)
        got = table[url]
        if isinstance(got, str):
            raise fail(got, url)
        return got

    return get


@given(fleets())
def test_any_mix_of_answers_gives_the_sequential_verdict(case):
    p, answers = case
    seq_calls: list[str] = []
    new_calls: list[str] = []
    before = sequential_look(p, fake_get(answers, seq_calls))
    with mock.patch.object(rollout_room, "_get", fake_get(answers, new_calls)):
        after = look(p)
    assert after == before
    assert len(new_calls) == len(set(new_calls)), "a URL read twice in one look"
    assert set(new_calls) == set(seq_calls)


# --------------------------------------------------------------------------- the pool


def test_gather_reads_each_key_once_follows_up_and_returns_errors():
    seen: list[str] = []
    lock = threading.Lock()

    def fetch(key: str, left: float) -> bytes:
        assert left > 0
        with lock:
            seen.append(key)
        if key == "bad":
            raise OSError("no")
        return key.encode()

    got = gather(
        ["a", "b", "a", "bad"], fetch, then=lambda k, body: ["a2"] if k == "a" else [], deadline=time.monotonic() + 10
    )
    assert {k: v for k, v in got.items() if k != "bad"} == {"a": b"a", "b": b"b", "a2": b"a2"}
    assert isinstance(got["bad"], OSError)
    assert sorted(seen) == ["a", "a2", "b", "bad"]
    assert gather([], fetch, deadline=time.monotonic() + 1) == {}


def test_gather_is_bounded_and_drops_what_answers_after_the_deadline():
    running = 0
    most = 0
    lock = threading.Lock()
    release = threading.Event()

    def fetch(key: str, left: float) -> bytes:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        if key.startswith("slow"):
            release.wait(5)
        else:
            time.sleep(0.05)
        with lock:
            running -= 1
        return b"x"

    keys = [f"k{i}" for i in range(40)]
    assert set(gather(keys, fetch, deadline=time.monotonic() + 10, workers=4)) == set(keys)
    assert most == 4
    t0 = time.monotonic()
    got = gather(["slow1", "slow2", "fast"], fetch, deadline=time.monotonic() + 0.5)
    assert time.monotonic() - t0 < 3.5  # the slow fetches alone would take 5 s
    assert got == {"fast": b"x"}
    release.set()
    with pytest.raises(ValueError, match="workers must be an integer >= 0"):
        gather(keys, fetch, deadline=time.monotonic() + 1, workers=-1)
    # in the calling thread: the same reads, the same follow-ups, nothing after the deadline
    me = threading.get_ident()
    where: set[int] = set()

    def here(key: str, left: float) -> bytes:
        where.add(threading.get_ident())
        return key.encode()

    def then(key: str, body: bytes) -> list[str]:
        return [key + "-info"] if not key.endswith("-info") else []

    got = gather(["a", "b", "a"], here, then=then, deadline=time.monotonic() + 10, workers=0)
    assert got == {"a": b"a", "b": b"b", "a-info": b"a-info", "b-info": b"b-info"}
    assert where == {me}
    assert gather(["a"], here, deadline=time.monotonic() - 1, workers=0) == {}
    assert WORKERS == 16


def test_a_read_is_told_the_time_left_so_its_timeout_fits_the_deadline():
    lefts: list[float] = []

    def get(url: str, key: str, timeout: float) -> bytes:
        lefts.append(timeout)
        if url.endswith("/workers"):
            return json.dumps({"workers": [{"url": "http://n.test", "is_healthy": True, "status": "ready"}]}).encode()
        raise TimeoutError("timed out")

    p = {
        "gateway_url": GATEWAY,
        "api_key": "",
        "members": {"n": "http://n.test"},
        "leaving": ["n"],
        "max_unavailable": 1,
        "headroom": 0.8,
        "node_capacity": 0,
        "timeout_s": 5.0,
        "deadline_s": 2.0,
    }
    with mock.patch.object(rollout_room, "_get", get):
        r = look(p)
    assert r["reason"] == "no_load"
    assert len(lefts) == 2
    assert all(0 < t <= 2.0 for t in lefts), lefts
