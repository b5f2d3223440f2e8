# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""rollout_plan: max_unavailable and the serial batches, the floor and load check, SGLang's gauges,
the drain budget and line; and the filter shells around them."""

from __future__ import annotations

import json

import pytest
from ansible.errors import AnsibleFilterError
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpufleet.sglang.plugins.filter.drain_budget import drain_budget_filter
from ansible_collections.gpufleet.sglang.plugins.filter.drain_line import drain_line_filter
from ansible_collections.gpufleet.sglang.plugins.filter.rollout_serial import rollout_serial
from ansible_collections.gpufleet.sglang.plugins.filter.sglang_load import sglang_load
from ansible_collections.gpufleet.sglang.plugins.module_utils.fleet.rollout_plan import (
    DrainBudgetError,
    GatewayListError,
    Load,
    MaxUnavailableError,
    MetricsError,
    Node,
    RolloutPlanError,
    Worker,
    drain_budget,
    drain_line,
    parse_load,
    parse_max_unavailable,
    parse_workers,
    pick_record,
    request_rate,
    room,
    serial_batches,
    unavailable,
)

# --------------------------------------------------------------------------- max_unavailable / serial


@pytest.mark.parametrize(
    ("n", "mu", "want"),
    [
        (3, 1, [1, 1, 1]),  # the lab: canary, then one at a time
        (20, 1, [1] * 20),  # the default on a 20-node fleet
        (20, "25%", [1, 5, 5, 5, 4]),
        (20, "100%", [1, 19]),
        (3, "100%", [1, 2]),
        (3, "50%", [1, 1, 1]),  # 1.5 rounds down
        (3, "10%", [1, 1, 1]),  # 0.3 rounds down to 0, then up to the floor of 1
        (3, 5, [1, 2]),  # a count above the fleet is the fleet
        (10, "2", [1, 2, 2, 2, 2, 1]),
        (1, 1, [1]),
        (0, 1, [1]),
        (8, "12.5%", [1, 1, 1, 1, 1, 1, 1, 1]),
    ],
)
def test_serial_batches(n, mu, want):
    assert serial_batches(n, mu) == want


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ("0", "would never let a node leave"),
        (0, "would never let a node leave"),
        ("-1", "is not a count or a percentage"),
        (-1, "is not a count or a percentage"),
        ("150%", r"outside \(0%, 100%\]"),
        ("0%", r"outside \(0%, 100%\]"),
        ("abc", "is not a count or a percentage"),
        ("", "is not a count or a percentage"),
        ("1.5", "is not a count or a percentage"),
        (1.5, r"\(float\) is not a count"),
        (True, "is not a count or a percentage"),
        (None, "is not a count or a percentage"),
        ([1], r"\(list\) is not a count"),
    ],
)
def test_bad_max_unavailable_is_named(value, match):
    with pytest.raises(MaxUnavailableError, match=match) as err:
        parse_max_unavailable(value)
    assert "sglang_rollout_max_unavailable" in str(err.value)
    assert "e.g. 25%" in str(err.value)  # the fix


def test_filter_rollout_serial_names_the_error():
    assert rollout_serial("20", "25%") == [1, 5, 5, 5, 4]
    with pytest.raises(AnsibleFilterError, match="rollout_serial: sglang_rollout_max_unavailable = '150%'"):
        rollout_serial(3, "150%")
    with pytest.raises(AnsibleFilterError, match="is not an integer"):
        rollout_serial("three", 1)


@given(
    n=st.integers(min_value=0, max_value=500),
    mu=st.one_of(
        st.integers(min_value=1, max_value=600),
        st.integers(min_value=1, max_value=100).map(lambda p: f"{p}%"),
    ),
)
def test_serial_batches_property(n, mu):
    """Canary first, every later batch at most max_unavailable, the sizes add up to the fleet."""
    batches = serial_batches(n, mu)
    k = parse_max_unavailable(mu).resolve(n)
    assert batches[0] == 1
    assert all(1 <= b <= k for b in batches)
    assert sum(batches) == max(n, 1)
    assert 1 <= k <= max(n, 1)


@given(st.one_of(st.text(max_size=12), st.integers(), st.floats(), st.none(), st.booleans()))
def test_parse_max_unavailable_never_crashes(value):
    try:
        mu = parse_max_unavailable(value)
    except MaxUnavailableError as exc:
        message = str(exc)
    else:
        message = ""
    if message:
        assert "sglang_rollout_max_unavailable" in message
        return
    assert (mu.count or 0) >= 1 or 0 < (mu.percent or 0) <= 100


# --------------------------------------------------------------------------- the gateway's workers

MEMBERS = {"node1": "http://10.0.0.1:30000", "node2": "http://10.0.0.2:30000", "node3": "http://10.0.0.3:30000"}


def workers_doc(*entries):
    return {"workers": [{"id": f"w{i}", "url": u, "is_healthy": h, "status": s} for i, (u, h, s) in enumerate(entries)]}


def test_unavailable_names_why():
    doc = workers_doc(("http://10.0.0.1:30000/", True, "ready"), ("http://10.0.0.2:30000", False, "ready"))
    assert unavailable(MEMBERS, parse_workers(doc)) == {"node2": "unhealthy", "node3": "not listed"}
    doc = workers_doc(("http://10.0.0.3:30000", True, "pending"))
    assert unavailable(MEMBERS, parse_workers(doc))["node3"] == "not ready"


@pytest.mark.parametrize(
    ("doc", "match"),
    [
        ([], "without a 'workers' list"),
        ({"workers": "x"}, "without a 'workers' list"),
        ({"workers": [3]}, "entry 0 is int"),
        ({"workers": [{"is_healthy": True}]}, "no 'url' string"),
        ({"workers": [{"url": "http://a:1", "is_healthy": "yes"}]}, "no boolean 'is_healthy'"),
        ({"workers": [{"url": "http://a:1", "is_healthy": True, "status": 1}]}, "'status' that is not a string"),
    ],
)
def test_bad_worker_list_is_named(doc, match):
    with pytest.raises(GatewayListError, match=match):
        parse_workers(doc)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda c: st.lists(c) | st.dictionaries(st.sampled_from(["workers", "url", "is_healthy", "status", "id"]), c),
        max_leaves=12,
    )
)
def test_parse_workers_never_crashes(doc):
    try:
        ws = parse_workers(doc)
    except GatewayListError:
        return
    assert all(isinstance(w, Worker) and isinstance(w.url, str) for w in ws)


# --------------------------------------------------------------------------- gauges

PAGE = """# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m",dp_rank="0"} 3.0
sglang:num_running_reqs{model_name="m",dp_rank="1"} 2.0
sglang:num_running_reqs_total{model_name="m"} 99
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m"} 4.0 1700000000000
sglang:gen_throughput{model_name="m"} 1234.5
"""


def test_parse_load_sums_the_label_sets():
    assert parse_load(PAGE) == Load(running=5, queued=4)
    assert sglang_load(PAGE) == {"running": 5, "queued": 4}


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("sglang:num_running_reqs 1\n", "no sglang:num_queue_reqs sample; start the server with enable_metrics"),
        ("", "no sglang:num_running_reqs or sglang:num_queue_reqs"),
        ("sglang:num_running_reqs x\nsglang:num_queue_reqs 0\n", "'x', not a number"),
        ("sglang:num_running_reqs -1\nsglang:num_queue_reqs 0\n", "not a count >= 0"),
        ("sglang:num_running_reqs NaN\nsglang:num_queue_reqs 0\n", "not a count >= 0"),
        (b"bytes", "expected the Prometheus text page"),
    ],
)
def test_bad_metrics_are_named(text, match):
    with pytest.raises(MetricsError, match=match):
        parse_load(text)


@given(
    st.text(alphabet=st.sampled_from(list('sglang:num_running_reqs queue{}="0123456789.eE-+ \nNaInf')), max_size=200)
)
def test_parse_load_never_crashes(text):
    try:
        load = parse_load(text)
    except MetricsError:
        return
    assert load.running >= 0
    assert load.queued >= 0


# --------------------------------------------------------------------------- room


def nodes(*spec):
    """(name, in_gateway, running, queued, capacity)"""
    return [Node(n, g, Load(r, q) if r is not None else None, c) for n, g, r, q, c in spec]


def test_room_allows_one_out_under_light_load():
    r = room(nodes(("a", True, 4, 0, 64), ("b", True, 4, 0, 64), ("c", True, 4, 0, 64)), ["b"], 1, 0.8)
    assert r.allowed
    assert r.reason == "ok"
    assert r.remaining == ["a", "c"]
    assert r.remaining_capacity == pytest.approx(102.4)
    assert r.fleet_running == 12


def test_room_floor_counts_nodes_already_out():
    r = room(
        nodes(("a", True, 0, 0, 64), ("b", True, 0, 0, 64), ("c", False, None, None, None)),
        ["a"],
        1,
        0.8,
        out_why={"c": "unhealthy"},
    )
    assert not r.allowed
    assert r.reason == "floor"
    assert r.would_be_out == ["a", "c"]
    assert "already out c (unhealthy)" in r.msg


def test_room_floor_a_node_already_out_may_go_again():
    # a node held out by an unfinished rollout does not count twice
    r = room(nodes(("a", False, None, None, None), ("b", True, 1, 0, 64)), ["a"], 1, 0.8)
    assert r.allowed, r.msg


def test_room_floor_batch_larger_than_budget():
    r = room(nodes(("a", True, 0, 0, 64), ("b", True, 0, 0, 64), ("c", True, 0, 0, 64)), ["a", "b"], 1, 0.8)
    assert r.reason == "floor"
    assert "the batch is larger than max_unavailable" in r.msg


def test_room_load_refuses_with_the_numbers():
    r = room(nodes(("a", True, 60, 10, 64), ("b", True, 60, 5, 64), ("c", True, 10, 0, 64)), ["c"], 1, 0.8)
    assert not r.allowed
    assert r.reason == "load"
    assert "runs 130 and queues 15" in r.msg
    assert "carry 102.4" in r.msg


def test_room_unknown_cap_blocks_only_under_load():
    idle = room(nodes(("a", True, 0, 0, None), ("b", True, 0, 0, None)), ["b"], 1, 0.8)
    assert idle.allowed
    busy = room(nodes(("a", True, 1, 0, None), ("b", True, 0, 0, None)), ["b"], 1, 0.8)
    assert busy.reason == "capacity_unknown"
    assert "sglang_rollout_node_capacity" in busy.msg


def test_room_unknown_load_blocks():
    r = room(nodes(("a", True, None, None, 64), ("b", True, 0, 0, 64)), ["b"], 1, 0.8)
    assert r.reason == "no_load"
    assert "a" in r.msg


@pytest.mark.parametrize("headroom", [0, -0.1, 1.5, float("nan"), "0.8", True])
def test_room_bad_headroom_is_named(headroom):
    with pytest.raises(RolloutPlanError, match="sglang_rollout_capacity_headroom"):
        room(nodes(("a", True, 0, 0, 1)), ["a"], 1, headroom)


def test_room_leaving_must_be_members():
    with pytest.raises(RolloutPlanError, match="not members of the gateway: x"):
        room(nodes(("a", True, 0, 0, 1)), ["x"], 1, 0.5)


node_st = st.tuples(
    st.booleans(),
    st.one_of(st.none(), st.tuples(st.integers(0, 300), st.integers(0, 300))),
    st.one_of(st.none(), st.integers(0, 256)),
)


@given(
    spec=st.lists(node_st, min_size=1, max_size=8),
    leave_mask=st.lists(st.booleans(), min_size=8, max_size=8),
    k=st.integers(1, 8),
    headroom=st.floats(min_value=0.05, max_value=1.0),
)
def test_room_never_allows_more_out_or_more_load_than_fits(spec, leave_mask, k, headroom):
    """The decision never lets more than max_unavailable out, nor load exceed what the staying nodes carry."""
    ns = [Node(f"n{i}", g, Load(*lq) if lq else None, c) for i, (g, lq, c) in enumerate(spec)]
    leaving = [n.name for n, m in zip(ns, leave_mask, strict=False) if m] or [ns[0].name]
    r = room(ns, leaving, k, headroom)
    if not r.allowed:
        assert r.reason in {"floor", "load", "capacity_unknown", "no_load"}
        assert r.msg
        return
    out_after = {n.name for n in ns if not n.in_gateway} | set(leaving)
    assert len(out_after) <= k
    serving = [n for n in ns if n.in_gateway]
    assert all(n.load is not None for n in serving)
    load = sum(n.load.running + n.load.queued for n in serving)
    stay_caps = [n.capacity for n in serving if n.name not in leaving]
    if load > 0:
        assert all(c is not None and c >= 1 for c in stay_caps)
        assert load <= sum(stay_caps) * headroom + 1e-6


# --------------------------------------------------------------------------- drain budget

BASELINE = {
    "format": "gpufleet.sglang/throughput_gate-baseline/1",
    "key": {"host": "node1", "sglang_version": "0.5.23"},
    "shape": {"api": "native", "concurrency": 64, "output_len": 256},
    "median_output_tokens_per_s": 1000.0,
    "updated": "2026-11-30T10:00:00Z",
}


def test_request_rate_is_tokens_per_s_per_stream():
    assert request_rate(BASELINE) == pytest.approx(15.625)
    assert request_rate({"median_output_tokens_per_s": None, "shape": {"concurrency": 4}}) is None
    assert request_rate({"median_output_tokens_per_s": 10.0, "shape": {"concurrency": 0}}) is None
    assert request_rate("x") is None


def test_pick_record_newest_of_this_host():
    older = dict(BASELINE, median_output_tokens_per_s=640.0, updated="2026-11-01T00:00:00Z")
    other = dict(BASELINE, key={"host": "node2"}, median_output_tokens_per_s=6400.0, updated="2026-12-01T00:00:00Z")
    failed = {
        "key": {"host": "node1"},
        "failed": True,
        "time": "2026-12-01T00:00:00Z",
        "median_output_tokens_per_s": 64.0,
        "shape": {"concurrency": 64},
    }
    rate, what = pick_record([older, json.dumps(BASELINE), other, failed, "not json", None], "node1")
    assert rate == pytest.approx(15.625)
    assert what == "0.5.23 at 64 streams"
    assert pick_record([other], "node1") == (None, "")


def test_drain_budget_sources():
    assert drain_budget(budget_s=0, max_new_tokens=8192, tokens_per_s=15.625, margin_s=30, ceiling_s=600) == {
        "budget_s": 555,
        "source": "gate",
        "max_new_tokens": 8192,
        "tokens_per_s": 15.625,
        "margin_s": 30,
        "ceiling_s": 600,
    }  # 8192 / 15.625 = 524.3 + 30, rounded up
    assert (
        drain_budget(budget_s=0, max_new_tokens=32768, tokens_per_s=15.625, margin_s=30, ceiling_s=600)["source"]
        == "ceiling"
    )
    assert drain_budget(budget_s=0, max_new_tokens=8192, tokens_per_s=0, margin_s=30, ceiling_s=600)["budget_s"] == 600
    assert (
        drain_budget(budget_s=90, max_new_tokens=8192, tokens_per_s=15.6, margin_s=30, ceiling_s=600)["source"] == "set"
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"budget_s": 700}, "above the server's stop budget sglang_server_drain_budget_s = 600"),
        ({"budget_s": -1}, "sglang_gateway_drain_budget_s = -1 must be >= 0"),
        ({"max_new_tokens": 0}, "sglang_gateway_drain_max_new_tokens = 0 must be > 0"),
        ({"max_new_tokens": 1.5}, "not a whole number"),
        ({"margin_s": "30"}, "sglang_gateway_drain_margin_s = '30' is not a number"),
        ({"ceiling_s": 0}, "sglang_server_drain_budget_s = 0 must be > 0"),
        ({"tokens_per_s": float("inf")}, "is not a number"),
    ],
)
def test_bad_drain_inputs_are_named(kwargs, match):
    args = {"budget_s": 0, "max_new_tokens": 8192, "tokens_per_s": 10.0, "margin_s": 30, "ceiling_s": 600} | kwargs
    with pytest.raises(DrainBudgetError, match=match):
        drain_budget(**args)


@given(
    budget=st.integers(0, 5000),
    max_new=st.integers(1, 200_000),
    rate=st.floats(min_value=0, max_value=1e5),
    margin=st.integers(0, 600),
    ceiling=st.integers(1, 5000),
)
def test_drain_budget_never_above_the_ceiling(budget, max_new, rate, margin, ceiling):
    message = ""
    try:
        d = drain_budget(budget_s=budget, max_new_tokens=max_new, tokens_per_s=rate, margin_s=margin, ceiling_s=ceiling)
    except DrainBudgetError as exc:
        message = str(exc)
        d = None
    if d is None:
        assert budget > ceiling
        assert "sglang_server_drain_budget_s" in message
        return
    assert 1 <= d["budget_s"] <= ceiling
    if d["source"] == "gate":
        assert d["budget_s"] >= max_new / rate + margin - 1e-6


def test_drain_budget_filter_reads_templated_strings():
    got = drain_budget_filter(
        [BASELINE], "node1", {"budget_s": "0", "max_new_tokens": "8192", "margin_s": "30", "ceiling_s": "600"}
    )
    assert got["budget_s"] == 555
    assert got["record"] == "0.5.23 at 64 streams"
    with pytest.raises(AnsibleFilterError, match="drain_budget: sglang_gateway_drain_margin_s = 'x'"):
        drain_budget_filter([], "node1", {"max_new_tokens": 1, "margin_s": "x", "ceiling_s": 1})


# --------------------------------------------------------------------------- the line


def test_drain_line_is_the_published_format():
    d = {
        "seconds": 3.2,
        "running_at_start": 4,
        "queued_at_start": 1,
        "budget_s": 555,
        "stragglers": 0,
        "outcome": "drained",
        "url": "http://10.0.0.1:30000",
    }
    line = (
        "node1: drained in 3.2 s (4 running, 1 queued at removal; budget 555 s; 0 straggler(s) drained),"
        " back in the gateway"
    )
    assert drain_line("node1", d) == line
    assert drain_line_filter(d, "node1") == line
    assert line.startswith("node1: drained in 3.2 s (")  # the older line's prefix
    with pytest.raises(AnsibleFilterError, match="has no 'outcome'"):
        drain_line_filter({k: v for k, v in d.items() if k != "outcome"}, "node1")


json_st = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda c: (
        st.lists(c, max_size=4)
        | st.dictionaries(
            st.sampled_from(["key", "host", "shape", "concurrency", "median_output_tokens_per_s", "updated", "failed"]),
            c,
            max_size=6,
        )
    ),
    max_leaves=16,
)


@given(st.lists(st.one_of(json_st, json_st.map(json.dumps), st.text(max_size=30)), max_size=6))
def test_pick_record_never_crashes_on_outside_files(records):
    """Baseline files are outside data: anything is passed over, a rate is a positive finite number."""
    rate, what = pick_record(records, "node1")
    if rate is None:
        assert what == ""
    else:
        assert rate > 0
        assert what.endswith(" streams")
