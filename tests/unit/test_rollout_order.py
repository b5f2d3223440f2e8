# Copyright (c) gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout's host order: the nodes already out of the gateway go first (rollout_plan.rollout_order,
the filters rollout_order and gateway_unavailable, and playbooks/sglang.yml's first play run by a
real ansible-playbook against a gateway stand-in that answers smg's GET /workers).

Why it matters: with max_unavailable 1, a node held out by an unfinished rollout (or failing its
health checks) that waits in a later batch counts against the floor, so the canary's wait for room
could only run out (600 s) and fail; rolled first, it costs no capacity and frees the place."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from hypothesis import given
from hypothesis import strategies as st
from lib.gateway import FakeGateway, workers_listing
from lib.playbook import REPO, rollout_batch_vars, rollout_play, run_playbook

from ansible_collections.gpufleet.sglang.plugins.filter.gateway_unavailable import gateway_unavailable
from ansible_collections.gpufleet.sglang.plugins.filter.rollout_order import rollout_order as order_filter
from ansible_collections.gpufleet.sglang.plugins.module_utils.fleet.rollout_plan import (
    RolloutOrderError,
    rollout_order,
    serial_batches,
)

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_.", min_size=1, max_size=12)


@given(hosts=st.lists(names, unique=True, max_size=40), extra=st.lists(names, max_size=5), data=st.data())
def test_the_out_nodes_come_first_and_each_part_keeps_inventory_order(hosts, extra, data):
    out = data.draw(st.lists(st.sampled_from(hosts), unique=True) if hosts else st.just([])) + extra
    got = rollout_order(hosts, out)
    assert sorted(got) == sorted(hosts), "a permutation of the play's hosts: none lost, none added"
    first = [h for h in hosts if h in out]
    assert got[: len(first)] == first
    assert got[len(first) :] == [h for h in hosts if h not in out]


def test_named_orders() -> None:
    assert rollout_order(["node1", "node2", "node3"], ["node3"]) == ["node3", "node1", "node2"]
    assert rollout_order(["node1", "node2", "node3"], ["node3", "node2"]) == ["node2", "node3", "node1"]
    assert rollout_order(["node1", "node2"], []) == ["node1", "node2"]
    # a --limit left the out node out of the play: nothing to put first
    assert rollout_order(["node1"], ["node9"]) == ["node1"]
    assert rollout_order([], ["node1"]) == []


@pytest.mark.parametrize(
    ("hosts", "out", "message"),
    [
        ("node1", [], "the play's hosts must be a list of inventory names, got str"),
        ({"node1": 1}, [], "the play's hosts must be a list of inventory names, got dict"),
        (["node1", ""], [], "got the item ''"),
        (["node1", 3], [], "got the item 3"),
        (["node1", "node2", "node1"], [], "name node1 more than once"),
        (["node1"], "node1", "the nodes out of the gateway must be a list of inventory names, got str"),
        (["node1"], [None], "the nodes out of the gateway must be a list of inventory names, got the item None"),
    ],
)
def test_refused_inputs_are_named(hosts, out, message) -> None:
    with pytest.raises(RolloutOrderError, match=re.escape(message)):
        rollout_order(hosts, out)
    with pytest.raises(AnsibleFilterError, match=r"^rollout_order: .*" + re.escape(message)):
        order_filter(hosts, out)


# --------------------------------------------------------------------------- gateway_unavailable


MEMBERS = {"node1": "http://10.0.0.1:30000", "node2": "http://10.0.0.2:30000", "node3": "http://10.0.0.3:30000"}


def test_each_way_out_is_named_and_the_served_ones_are_left_out() -> None:
    doc = workers_listing([("http://10.0.0.1:30000/", True), ("http://10.0.0.2:30000", False)])
    assert gateway_unavailable(doc, MEMBERS) == {"node2": "unhealthy", "node3": "not listed"}
    doc = workers_listing([(u, True) for u in MEMBERS.values()])
    assert gateway_unavailable(doc, MEMBERS) == {}
    doc = workers_listing([(u, True, "pending") for u in MEMBERS.values()])
    assert gateway_unavailable(doc, MEMBERS) == dict.fromkeys(MEMBERS, "not ready")


@pytest.mark.parametrize(
    ("doc", "members", "message"),
    [
        ([], MEMBERS, "without a 'workers' list"),
        ({"workers": [{"url": "http://x:1"}]}, MEMBERS, "http://x:1 has no boolean 'is_healthy'"),
        ({"workers": [{"is_healthy": True}]}, MEMBERS, "entry 0 has no 'url' string"),
        (workers_listing([]), ["node1"], "members must map inventory names to worker URLs"),
        (workers_listing([]), {"node1": ""}, "members must map inventory names to worker URLs"),
    ],
)
def test_an_answer_or_members_of_the_wrong_shape_are_named(doc, members, message) -> None:
    with pytest.raises(AnsibleFilterError, match=r"^gateway_unavailable: .*" + re.escape(message)):
        gateway_unavailable(doc, members)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids, max_size=3),
    max_leaves=12,
)
entries = st.fixed_dictionaries(
    {},
    optional={
        "url": st.sampled_from([*MEMBERS.values(), "http://10.0.0.9:1", ""]) | json_values,
        "is_healthy": st.booleans() | json_values,
        "status": st.sampled_from(["ready", "pending", ""]) | json_values,
    },
)


@given(doc=st.one_of(json_values, st.fixed_dictionaries({"workers": st.lists(entries, max_size=5)})))
def test_any_answer_gives_a_verdict_or_a_named_refusal(doc) -> None:
    """Whatever a gateway (or something in its place) answers: a verdict on the members, or an
    AnsibleFilterError; never another exception, never a name that is not a member."""
    try:
        got = gateway_unavailable(doc, MEMBERS)
    except AnsibleFilterError as exc:
        refusal = str(exc)
    else:
        refusal = ""
    if refusal:
        assert refusal.startswith("gateway_unavailable: ")
        return
    assert set(got) <= set(MEMBERS)
    assert set(got.values()) <= {"not listed", "unhealthy", "not ready"}


# --------------------------------------------------------------------------- the real play


@pytest.fixture
def gateway():
    fake = FakeGateway([])
    yield fake
    fake.close()


def order_playbook(tmp_path, n_nodes, *, max_unavailable, api_url, plans=None):
    """playbooks/sglang.yml's order play as it is, then a play over its group with the rollout
    play's own `serial` that prints each batch. become is off here (no sudo on a test host; the
    test runs as the user that owns the marks). ``plans``: what the plan play before it found on each
    node (``__rollout_plan``), set by a play in its place."""
    plays = yaml.safe_load((REPO / "playbooks" / "sglang.yml").read_text(encoding="utf-8"))
    rollout = rollout_play()
    order = plays[plays.index(rollout) - 1]
    assert order["hosts"] == "sglang_nodes"
    assert rollout["hosts"] == "sglang_rollout_order"
    order = dict(order, become=False)
    batches = {
        "name": "batches",
        "hosts": rollout["hosts"],
        "gather_facts": False,
        "serial": rollout["serial"],
        "vars": rollout_batch_vars(max_unavailable),
        "tasks": [
            {
                "name": "Print the batch",
                "ansible.builtin.debug": {"msg": "BATCH {{ ansible_play_batch | join(',') }}"},
                "run_once": True,
            }
        ],
    }
    plan = {
        "name": "plan",
        "hosts": "sglang_nodes",
        "gather_facts": False,
        "tasks": [
            {
                "name": "Note the plan",
                "ansible.builtin.set_fact": {"__rollout_plan": "{{ __plans[inventory_hostname] }}"},
                "vars": {"__plans": plans or {}},
                "when": "inventory_hostname in __plans",
            }
        ],
    }
    play = tmp_path / "order.yml"
    play.write_text(yaml.safe_dump([plan, order, batches], sort_keys=False), encoding="utf-8")
    nodes = {f"node{i:02d}": {"sglang_server_port": 31000 + i} for i in range(n_nodes)}
    inv = {
        "all": {
            "vars": {
                "ansible_connection": "local",
                "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                "sglang_gateway_state_dir": str(tmp_path / "state"),
                "sglang_gateway_api_url": api_url,
                "sglang_gateway_api_key": "order-test-key",
            },
            "children": {"sglang_gateway": {"hosts": {"gw": None}}, "sglang_nodes": {"hosts": nodes}},
        }
    }
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inv), encoding="utf-8")
    return play, tmp_path / "hosts.yml"


def hold_out(tmp_path, port: int) -> None:
    """The mark remove_worker leaves on the gateway host (its name: the worker URL with [^A-Za-z0-9.-] as _)."""
    marks = tmp_path / "state" / "out-of-rotation"
    marks.mkdir(parents=True, exist_ok=True)
    (marks / re.sub(r"[^A-Za-z0-9.-]", "_", f"http://127.0.0.1:{port}")).write_text("")


def ran_batches(stdout: str) -> list[list[str]]:
    # ansible.cfg prints results as YAML (callback_result_format = yaml)
    return [b.split(",") for b in re.findall(r"^\s+msg: BATCH (\S+)$", stdout, re.M)]


def test_held_out_and_unhealthy_nodes_are_rolled_first_in_real_ansible(tmp_path, gateway) -> None:
    play, inv = order_playbook(tmp_path, 8, max_unavailable=2, api_url=gateway.url)
    hold_out(tmp_path, 31006)  # node06: held out by an unfinished rollout (and so not listed)
    listed = [(f"http://127.0.0.1:{31000 + i}", i != 3, "ready" if i != 5 else "pending") for i in range(8) if i != 6]
    gateway.workers = listed
    proc = run_playbook(play, inventory=inv, timeout=180).expect(0)
    got = ran_batches(proc.stdout)
    want = ["node03", "node05", "node06", "node00", "node01", "node02", "node04", "node07"]
    assert [h for b in got for h in b] == want, proc.stdout
    assert [len(b) for b in got] == serial_batches(8, 2)
    assert re.search(r"^node\d+ +: ok=\d+ +changed=0 ", proc.stdout, re.M), "nothing reported changed"
    assert not re.search(r"changed=[1-9]", proc.stdout), "ordering changes nothing (molecule's idempotence run)"
    assert got[0] == ["node03"], "the canary is the first node that is out"
    printed = " ".join(proc.stdout.split())  # YAML results fold a long message
    assert (
        "Rolled first, already out of the gateway: node03 (unhealthy), node05 (not ready),"
        " node06 (held out by an unfinished rollout)" in printed
    )
    assert gateway.auth == ["Bearer order-test-key"], "the workers are read once for the play, with the key"
    assert "order-test-key" not in proc.stdout + proc.stderr, "the key never reaches the output"


def test_without_an_answering_gateway_the_marks_alone_decide(tmp_path) -> None:
    # nothing listens on port 9 of 127.0.0.1 (discard, closed here): the uri fails, the marks stand
    play, inv = order_playbook(tmp_path, 4, max_unavailable=1, api_url="http://127.0.0.1:9")
    hold_out(tmp_path, 31002)
    proc = run_playbook(play, inventory=inv, timeout=180).expect(0)
    assert [h for b in ran_batches(proc.stdout) for h in b] == ["node02", "node00", "node01", "node03"], proc.stdout


def test_a_fleet_with_every_node_served_keeps_inventory_order(tmp_path, gateway) -> None:
    play, inv = order_playbook(tmp_path, 3, max_unavailable=1, api_url=gateway.url)
    served = [(f"http://127.0.0.1:{31000 + i}", True, "ready") for i in range(3)]
    gateway.workers = served
    proc = run_playbook(play, inventory=inv, timeout=180).expect(0)
    assert ran_batches(proc.stdout) == [["node00"], ["node01"], ["node02"]]
    assert "Rolled first" not in proc.stdout


def test_a_gateway_that_answers_garbage_stops_the_run_with_the_reason(tmp_path, gateway) -> None:
    play, inv = order_playbook(tmp_path, 2, max_unavailable=1, api_url=gateway.url)
    gateway.answer = json.dumps({"workers": [{"url": "http://127.0.0.1:31000", "is_healthy": "yes"}]}).encode()
    proc = run_playbook(play, inventory=inv, timeout=180).expect(2)
    assert "has no boolean 'is_healthy'" in proc.stdout, proc.stdout
    assert "BATCH" not in proc.stdout, "no batch ran"


STEADY = {
    part: {"ok": True} for part in ("read", "release", "container", "restart_mark", "files", "gate")
}  # in_gateway: the order play adds it from the gateway's answer


def test_steady_nodes_go_last_in_one_batch_and_a_held_out_node_is_never_steady(tmp_path, gateway) -> None:
    changed = dict(STEADY, files={"ok": False, "detail": "/etc/sglang/sglang-server.env: sha256"})
    plans = {"node00": changed, "node01": STEADY, "node02": STEADY, "node04": STEADY}  # node03, node05: no plan
    play, inv = order_playbook(tmp_path, 6, max_unavailable=1, api_url=gateway.url, plans=plans)
    hold_out(tmp_path, 31002)  # node02 found steady by the plan, but held out: it must come back
    gateway.workers = [(f"http://127.0.0.1:{31000 + i}", True, "ready") for i in range(6) if i != 2]
    proc = run_playbook(play, inventory=inv, timeout=180).expect(0)
    got = ran_batches(proc.stdout)
    assert got == [["node02"], ["node00"], ["node03"], ["node05"], ["node01", "node04"]], proc.stdout
    assert [len(b) for b in got] == serial_batches(6, 1, 2)
    printed = " ".join(proc.stdout.split()).replace("''", "'")  # a YAML result doubles a quote
    assert "Steady, rolled last in one batch: node01, node04." in printed, printed
    assert "node00 changes: its server's files differ (/etc/sglang/sglang-server.env: sha256)." in printed
    assert "node02 changes: it is out of the gateway (held out by an unfinished rollout)." in printed
    assert not re.search(r"changed=[1-9]", proc.stdout), "the plan and the order change nothing"


def test_without_a_plan_no_node_is_steady(tmp_path, gateway) -> None:
    # --tags bench (the plan's tasks do not run) or a plan play that ended early: the batches as before
    play, inv = order_playbook(tmp_path, 3, max_unavailable=1, api_url=gateway.url)
    gateway.workers = [(f"http://127.0.0.1:{31000 + i}", True, "ready") for i in range(3)]
    proc = run_playbook(play, inventory=inv, timeout=180).expect(0)
    assert ran_batches(proc.stdout) == [["node00"], ["node01"], ["node02"]]
    assert "Steady, rolled last" not in proc.stdout
