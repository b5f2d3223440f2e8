# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The rollout's plan: steady nodes (rollout_plan.steady, the filter rollout_steady), their place in the
order (rollout_order's ``steady``) and their one batch (serial_batches' ``steady``, the filter
rollout_serial), and the release manifest the plan reads from a node (sglang_release_manifest)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpufleet.sglang.plugins.filter.rollout_order import rollout_order as order_filter
from ansible_collections.gpufleet.sglang.plugins.filter.rollout_serial import rollout_serial
from ansible_collections.gpufleet.sglang.plugins.filter.rollout_steady import rollout_steady
from ansible_collections.gpufleet.sglang.plugins.module_utils.fleet.rollout_plan import (
    _STEADY_CHECKS,
    MaxUnavailableError,
    RolloutOrderError,
    SteadyError,
    parse_max_unavailable,
    rollout_order,
    serial_batches,
    steady,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.release_manifest import (
    MAX_MANIFEST_BYTES,
    parse_release_manifest,
)

PARTS = [check[0] for check in _STEADY_CHECKS]
ALL_OK = {key: {"ok": True} for key in PARTS}

# --------------------------------------------------------------------------- serial with steady nodes


@pytest.mark.parametrize(
    ("n", "mu", "steady_n", "want"),
    [
        (3, 1, 3, [3]),  # the lab's no-op: one batch instead of three
        (3, 1, 2, [1, 2]),  # one node changes: it is the canary, the two others go together
        (3, 1, 1, [1, 1, 1]),
        (3, 1, 0, [1, 1, 1]),  # nothing steady: the batches as without a plan
        (200, 1, 200, [200]),
        (200, 1, 195, [1, 1, 1, 1, 1, 195]),
        (20, "25%", 10, [1, 5, 4, 10]),  # max_unavailable resolves against the whole fleet (5)
        (1, 1, 1, [1]),
        (0, 1, 0, [1]),
    ],
)
def test_the_steady_nodes_take_one_batch_after_the_others(n, mu, steady_n, want):
    assert serial_batches(n, mu, steady_n) == want


@given(
    n=st.integers(min_value=0, max_value=400),
    mu=st.one_of(
        st.integers(min_value=1, max_value=50), st.integers(min_value=1, max_value=100).map(lambda p: f"{p}%")
    ),
    data=st.data(),
)
def test_steady_batches_add_up_and_only_the_last_one_is_larger_than_the_floor(n, mu, data):
    steady_n = data.draw(st.integers(min_value=0, max_value=n))
    got = serial_batches(n, mu, steady_n)
    k = parse_max_unavailable(mu).resolve(n)
    if n == 0:
        assert got == [1], "an empty fleet (a --limit) still gives serial a batch size"
        return
    assert sum(got) == n, "every node in exactly one batch"
    if steady_n:
        assert got[-1] == steady_n, "the steady nodes are the last batch, all of them"
    changing = got[:-1] if steady_n else got
    if n - steady_n > 0:
        assert changing[0] == 1, "a node that changes goes first, alone: the canary"
        assert all(1 <= b <= k for b in changing), "no batch of changing nodes is larger than max_unavailable"
        assert changing == serial_batches(n - steady_n, k), "the changing nodes are batched as a fleet of their own"
    else:
        assert changing == []


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((3, 1, 4), "cannot be more steady nodes than nodes"),
        ((3, 1, -1), "the number of steady nodes must be an integer >= 0, got -1"),
        ((3, 1, True), "the number of steady nodes must be an integer >= 0, got True"),
        ((3, 1, "1"), "the number of steady nodes must be an integer >= 0, got '1'"),
    ],
)
def test_a_bad_steady_count_is_named(args, match):
    with pytest.raises(MaxUnavailableError, match=match):
        serial_batches(*args)


def test_the_filter_takes_the_steady_count_as_ansible_gives_it():
    assert rollout_serial("20", "25%", steady="15") == [1, 4, 15]
    assert rollout_serial(3, 1) == [1, 1, 1]
    with pytest.raises(AnsibleFilterError, match="rollout_serial: the number of steady nodes 'x' is not an integer"):
        rollout_serial(3, 1, steady="x")
    with pytest.raises(AnsibleFilterError, match="rollout_serial: 4 steady nodes of 3"):
        rollout_serial(3, 1, steady=4)


# --------------------------------------------------------------------------- order with steady nodes

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_.", min_size=1, max_size=12)


@given(hosts=st.lists(names, unique=True, max_size=40), extra=st.lists(names, max_size=5), data=st.data())
def test_out_first_steady_last_and_each_part_keeps_inventory_order(hosts, extra, data):
    pick = st.lists(st.sampled_from(hosts), unique=True) if hosts else st.just([])
    out = data.draw(pick) + extra
    steady_hosts = data.draw(pick) + extra
    got = rollout_order(hosts, out, steady_hosts)
    assert sorted(got) == sorted(hosts), "a permutation of the play's hosts: none lost, none added"
    first = [h for h in hosts if h in out]
    last = [h for h in hosts if h in steady_hosts and h not in out]
    assert got[: len(first)] == first, "a node out of the gateway goes first, even when the plan found it steady"
    assert got[len(got) - len(last) :] == last
    assert got[len(first) : len(got) - len(last)] == [h for h in hosts if h not in out and h not in steady_hosts]


def test_named_orders_with_steady_nodes():
    hosts = ["node1", "node2", "node3", "node4"]
    assert rollout_order(hosts, [], ["node1", "node3"]) == ["node2", "node4", "node1", "node3"]
    assert rollout_order(hosts, ["node3"], ["node1", "node3"]) == ["node3", "node2", "node4", "node1"]
    assert rollout_order(hosts, [], hosts) == hosts
    assert order_filter(hosts, ["node4"], ["node1"]) == ["node4", "node2", "node3", "node1"]
    assert order_filter(hosts, ["node4"]) == ["node4", "node1", "node2", "node3"]
    with pytest.raises(RolloutOrderError, match="the steady nodes must be a list of inventory names, got str"):
        rollout_order(hosts, [], "node1")
    with pytest.raises(AnsibleFilterError, match=r"rollout_order: the steady nodes .* got the item 3"):
        order_filter(hosts, [], ["node1", 3])


# --------------------------------------------------------------------------- steady


def test_a_node_whose_every_part_holds_is_steady():
    assert steady(ALL_OK) == {"steady": True, "reasons": []}
    assert rollout_steady(ALL_OK) == {"steady": True, "reasons": []}


@pytest.mark.parametrize(
    ("part", "value", "reason"),
    [
        (
            "release",
            {"ok": False, "detail": "now sglang-0.5.8-aaaaaaaaaa, the pins name sglang-0.5.23-bbbbbbbbbb"},
            "its release changes (now sglang-0.5.8-aaaaaaaaaa, the pins name sglang-0.5.23-bbbbbbbbbb)",
        ),
        (
            "files",
            {"ok": False, "detail": "/etc/sglang/sglang-server.env: sha256"},
            "its server's files differ (/etc/sglang/sglang-server.env: sha256)",
        ),
        ("restart_mark", {"ok": False}, "a restart left pending by an earlier run"),
        ("container", {"ok": False}, "its container's restart is pending"),
        ("gate", {"ok": False, "detail": ""}, "it has no passing gate of this key"),
        (
            "in_gateway",
            {"ok": False, "detail": "held out by an unfinished rollout"},
            "it is out of the gateway (held out by an unfinished rollout)",
        ),
        (
            "read",
            {"ok": False, "detail": "Read the manifest: Permission denied\n\tline two"},
            "the plan could not read the node (Read the manifest: Permission denied line two)",
        ),
        # a part that is not exactly ok=True does not hold: a plan that did not finish never makes a node steady
        ("files", None, "its server's files differ"),
        ("files", {"ok": "true"}, "its server's files differ"),
        ("files", {"ok": 1}, "its server's files differ"),
        ("files", "ok", "its server's files differ"),
    ],
)
def test_each_part_that_does_not_hold_is_a_reason(part, value, reason):
    plan = dict(ALL_OK)
    if value is None:
        del plan[part]
    else:
        plan[part] = value
    assert steady(plan) == {"steady": False, "reasons": [reason]}


@given(
    parts=st.dictionaries(
        st.sampled_from(PARTS),
        st.one_of(
            st.fixed_dictionaries({"ok": st.booleans()}, optional={"detail": st.one_of(st.text(), st.integers())}),
            st.none(),
            st.integers(),
            st.text(),
        ),
    ),
    noise=st.dictionaries(st.text(min_size=1).filter(lambda k: k not in PARTS), st.integers(), max_size=3),
)
def test_steady_exactly_when_every_part_is_ok_and_one_reason_per_other_part(parts, noise):
    got = steady({**parts, **noise})
    holding = [k for k in PARTS if isinstance(parts.get(k), dict) and parts[k]["ok"] is True]
    assert got["steady"] == (len(holding) == len(PARTS))
    assert len(got["reasons"]) == len(PARTS) - len(holding)
    assert all("\n" not in r and len(r) < 400 for r in got["reasons"]), "a reason is one bounded line"


@pytest.mark.parametrize("plan", [None, [], "steady", 1])
def test_a_plan_that_is_not_a_mapping_is_an_error(plan):
    with pytest.raises(SteadyError, match="the node's plan must be a mapping of its checks"):
        steady(plan)
    with pytest.raises(AnsibleFilterError, match="rollout_steady: the node's plan must be a mapping"):
        rollout_steady(plan)


# --------------------------------------------------------------------------- the release manifest

GOOD = {
    "id": "sglang-0.5.23-0123456789",
    "version": "0.5.23",
    "pins": {"python": "3.11", "source": "pypi"},
    "layout": "x",
}


def test_a_manifest_of_role_sglang_gives_its_fields():
    got = parse_release_manifest(json.dumps(GOOD, indent=2, sort_keys=True) + "\n")
    assert got == {"ok": True, "problem": "", "id": GOOD["id"], "version": "0.5.23", "python": "3.11"}
    git = dict(GOOD, id="sglang-git-v0.5.23_rc1-abcdef0123", version="0.5.23rc1", pins={"python": "3.12.3"})
    assert parse_release_manifest(json.dumps(git))["ok"]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "no manifest"),
        (None, "the manifest is NoneType, not text"),
        ("{", "the manifest is not JSON (Expecting property name enclosed in double quotes at line 1)"),
        ("[1]", "the manifest is a JSON list, not an object"),
        (json.dumps(dict(GOOD, id="../../etc")), "the manifest's id is not a valid value ('../../etc')"),
        (json.dumps(dict(GOOD, id="sglang-0.5.23-0123456789/x")), "the manifest's id is not a valid value"),
        (json.dumps(dict(GOOD, id="sglang-0.5/../../../etc-0123456789")), "the manifest's id is not a valid value"),
        (json.dumps(dict(GOOD, id="sglang-0.5.23-0123456789\n")), "the manifest's id is not a valid value"),
        (
            json.dumps({k: v for k, v in GOOD.items() if k != "version"}),
            "the manifest's version is not a valid value (missing)",
        ),
        (json.dumps(dict(GOOD, version=5)), "the manifest's version is not a valid value (5)"),
        (json.dumps(dict(GOOD, pins=[])), "the manifest's pins.python is not a valid value (missing)"),
        (json.dumps(dict(GOOD, pins={"python": "3.11; rm -rf /"})), "the manifest's pins.python is not a valid value"),
        ("x" * 70000, "the manifest is more than 65536 bytes"),
    ],
)
def test_a_manifest_that_is_not_one_names_what_is_wrong(text, problem):
    got = parse_release_manifest(text)
    assert got["ok"] is False
    assert got["problem"].startswith(problem), got["problem"]
    assert got["id"] == got["version"] == got["python"] == ""


@given(
    st.one_of(
        st.text(max_size=300),
        st.binary(max_size=50).map(lambda b: b.decode("latin-1")),
        st.builds(
            json.dumps,
            st.fixed_dictionaries(
                {
                    "id": st.text(max_size=40),
                    "version": st.text(max_size=20),
                    "pins": st.fixed_dictionaries({"python": st.text(max_size=10)}),
                }
            ),
        ),
    )
)
def test_any_text_gives_a_verdict_and_an_id_that_is_one_path_segment(text):
    got = parse_release_manifest(text)
    assert set(got) == {"ok", "problem", "id", "version", "python"}
    assert got["ok"] == (got["problem"] == "")
    if got["ok"]:
        assert "/" not in got["id"]
        assert got["id"].startswith("sglang-")
        assert all(c.isprintable() and not c.isspace() for c in got["id"] + got["version"] + got["python"])


def test_a_part_not_read_is_named_only_when_nothing_else_decides():
    unread = {"ok": False, "skipped": True}
    plan = dict(ALL_OK, release={"ok": False, "detail": "no manifest"}, files=unread, gate=unread)
    assert steady(plan) == {"steady": False, "reasons": ["its release changes (no manifest)"]}
    assert steady(dict(ALL_OK, files=unread)) == {"steady": False, "reasons": ["files was not read"]}


def test_the_plan_reads_one_byte_more_than_the_manifest_filter_takes() -> None:
    """roles/sglang/tasks/plan.yml reads at most __sglang_manifest_max_bytes + 1 bytes: a larger file is cut
    there and refused as too large, never carried whole; the bound is the parser's own."""
    role_vars = yaml.safe_load((Path(__file__).resolve().parents[2] / "roles/sglang/vars/main.yml").read_text())
    assert role_vars["__sglang_manifest_max_bytes"] == MAX_MANIFEST_BYTES
    cut = "{" + " " * MAX_MANIFEST_BYTES  # what head --bytes=MAX+1 leaves of a huge file
    assert parse_release_manifest(cut)["problem"] == f"the manifest is more than {MAX_MANIFEST_BYTES} bytes"
    assert parse_release_manifest(cut[:-1])["problem"].startswith("the manifest is not JSON")
