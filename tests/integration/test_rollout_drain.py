# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The sglang_gateway role's room and drain entry points and the throughput_gate role's `recorded`,
through ansible-runner, against SGLang stand-ins and a fake gateway listing (no podman needed): the
drain waits for running and queued requests, sizes its budget from the node's baseline, fails or
aborts when the budget runs out, and prints the rollout's line."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import ansible_runner
import pytest
from lib.gateway import FakeGateway, metrics, stream, wait_for
from lib.playbook import ansible_settings, runner_data_dir

from ansible_collections.gpufleet.sglang.plugins.module_utils.gate import baseline as gb

PLAY = """
- name: Room and drain for one node
  hosts: node1
  gather_facts: false
  tasks:
    - name: Read the baselines
      ansible.builtin.include_role:
        name: gpufleet.sglang.throughput_gate
        tasks_from: recorded
    - name: Room
      ansible.builtin.include_role:
        name: gpufleet.sglang.sglang_gateway
        tasks_from: room
      when: do_room | bool
    - name: Drain
      block:
        - name: Drain the node
          ansible.builtin.include_role:
            name: gpufleet.sglang.sglang_gateway
            tasks_from: drain
      rescue:
        - name: Show the failure
          ansible.builtin.debug:
            msg: "RESCUED {{ ansible_failed_result.msg }}"
    - name: Show the fact
      ansible.builtin.debug:
        msg: "FACT {{ sglang_gateway_drain | to_json }}"
    - name: Show the line
      ansible.builtin.debug:
        msg: "{{ sglang_gateway_drain | gpufleet.sglang.drain_line(inventory_hostname) }}"
"""


def run(tmp_path: Path, gw: FakeGateway, node_url: str, other_url: str, **extravars) -> tuple[int, list[str], str]:
    pdd = runner_data_dir(tmp_path, PLAY)
    (pdd / "inventory").mkdir()
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inv = {
        "all": {
            "hosts": {
                "gw": local,
                "node1": dict(local, sglang_gateway_worker_url=node_url),
                "node2": dict(local, sglang_gateway_worker_url=other_url),
            },
            "children": {
                "sglang_gateway": {"hosts": {"gw": None}},
                "sglang_nodes": {"hosts": {"node1": None, "node2": None}},
            },
        }
    }
    (pdd / "inventory" / "hosts.json").write_text(json.dumps(inv))
    ev = {
        "sglang_gateway_api_url": gw.url,
        "sglang_gateway_drain_poll_s": 1,
        "sglang_server_drain_budget_s": 60,
        "throughput_gate_baseline_dir": str(tmp_path / "baselines"),
        "do_room": False,
    } | extravars
    runner = ansible_runner.run(
        private_data_dir=str(pdd),
        playbook="play.yml",
        extravars=ev,
        envvars=ansible_settings(),
        quiet=True,
        timeout=240,
    )
    msgs = [
        str(e["event_data"]["res"].get("msg"))
        for e in runner.events
        if e.get("event") == "runner_on_ok" and e.get("event_data", {}).get("task_action") == "ansible.builtin.debug"
    ]
    return runner.rc, msgs, runner.stdout.read()


def fact(msgs: list[str]) -> dict:
    return json.loads(next(m for m in msgs if m.startswith("FACT "))[5:])


def seed_baseline(tmp_path: Path, median: float, concurrency: int) -> None:
    key = gb.make_key(host="node1", model="m", profile="p", sglang_version="0.5.23", gpu_model="g")
    p = gb.Paths.for_key(str(tmp_path / "baselines"), key)
    Path(p.directory).mkdir(parents=True, exist_ok=True)
    shape = {"api": "native", "concurrency": concurrency, "requests_per_trial": 8, "input_len": 16, "output_len": 96}
    gb.atomic_write(p.baseline, json.dumps(gb.baseline_document(key, [median] * 5, shape, "seeded", None)))


@pytest.fixture
def fleet(standin):
    node = standin("--max-running-requests", "2", STANDIN_TOKENS_PER_S="10")
    other = standin("--max-running-requests", "64")
    gw = FakeGateway([(other.url, True)])  # node1 already removed
    yield node, other, gw
    gw.close()


def load_node(url: str, n: int, max_new: int) -> list[threading.Thread]:
    out: list[str] = []
    threads = [threading.Thread(target=stream, args=(url, max_new, out), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    wait_for(lambda: metrics(url).total == n)
    return threads


def test_idle_node_drains_at_once_budget_from_the_gate(tmp_path, fleet):
    node, other, gw = fleet
    seed_baseline(tmp_path, 400.0, 4)  # 100 tok/s per request
    rc, msgs, out = run(
        tmp_path, gw, node.url, other.url, sglang_gateway_drain_max_new_tokens=1000, sglang_gateway_drain_margin_s=5
    )
    assert rc == 0, out
    f = fact(msgs)
    assert f["outcome"] == "drained"
    assert int(f["budget_s"]) == 15  # 1000 / 100 + 5
    assert f["budget_source"] == "gate (0.5.23 at 4 streams)"
    assert (int(f["running_at_start"]), int(f["queued_at_start"]), int(f["stragglers"])) == (0, 0, 0)
    line = next(m for m in msgs if m.startswith("node1: drained in "))
    assert line.endswith("(0 running, 0 queued at removal; budget 15 s; 0 straggler(s) drained), back in the gateway")


def test_running_and_queued_are_waited_for(tmp_path, fleet):
    node, other, gw = fleet
    # 2 run, 1 waits: 30 s for the first two at 10 tok/s shared, then 15 s more. The play must reach its drain
    # while the third still waits: on a loaded test machine its start and the baselines' read took over 12 s
    # (the 60-token streams this had: it saw 1 running, 0 queued). The server's stop budget (the ceiling, no
    # baseline here) is raised so that the 45 s of work fit in it however soon the drain starts.
    load_node(node.url, 3, 150)
    rc, msgs, out = run(tmp_path, gw, node.url, other.url, sglang_server_drain_budget_s=120)
    assert rc == 0, out
    f = fact(msgs)
    assert (f["outcome"], int(f["running_at_start"]), int(f["queued_at_start"])) == ("drained", 2, 1)
    assert f["budget_source"] == "ceiling"  # no baseline: the server's stop budget
    assert float(f["seconds"]) >= 2.0
    assert metrics(node.url).total == 0


def test_expired_budget_fails_with_the_numbers(tmp_path, fleet):
    node, other, gw = fleet
    load_node(node.url, 2, 400)
    rc, msgs, out = run(tmp_path, gw, node.url, other.url, sglang_gateway_drain_budget_s=3)
    assert rc == 0, out
    rescued = next(m for m in msgs if m.startswith("RESCUED "))
    assert "still ran 2 and queued 0 request(s)" in rescued
    assert "budget 3 s from set" in rescued
    assert "sglang_gateway_drain_expired=abort" in rescued
    f = fact(msgs)
    assert (f["outcome"], int(f["stragglers"])) == ("expired", 2)
    assert metrics(node.url).running == 2  # the node was left as it was


def test_expired_budget_aborts_the_stragglers(tmp_path, fleet):
    node, other, gw = fleet
    load_node(node.url, 3, 400)
    rc, msgs, out = run(
        tmp_path, gw, node.url, other.url, sglang_gateway_drain_budget_s=3, sglang_gateway_drain_expired="abort"
    )
    assert rc == 0, out
    assert not any(m.startswith("RESCUED ") for m in msgs), msgs
    f = fact(msgs)
    assert (f["outcome"], int(f["stragglers"])) == ("aborted", 3)
    assert metrics(node.url).total == 0
    assert any(m.endswith("budget 3 s; 3 straggler(s) aborted), back in the gateway") for m in msgs)


def test_budget_above_the_stop_budget_is_refused(tmp_path, fleet):
    node, other, gw = fleet
    rc, _msgs, out = run(tmp_path, gw, node.url, other.url, sglang_gateway_drain_budget_s=61)
    assert rc != 0
    assert "above the server's stop budget sglang_server_drain_budget_s = 60" in out


def room(tmp_path, fleet, **more):
    """The room entry point alone on the fleet's gateway (node1 and node2 behind it), looking every second."""
    node, other, gw = fleet
    return run(tmp_path, gw, node.url, other.url, do_room=True, sglang_gateway_room_poll_s=1, **more)


def test_room_refuses_with_a_node_out_and_the_names(tmp_path, fleet):
    # node1 is not listed: one out already
    rc, _msgs, out = room(tmp_path, fleet, sglang_gateway_room_leaving=["node2"], sglang_gateway_room_timeout_s=2)
    assert rc != 0
    assert "node2 may not leave the gateway (floor)" in out
    assert "already out node1 (not listed)" in out


def test_room_allows_a_node_already_out(tmp_path, fleet):
    rc, msgs, out = room(tmp_path, fleet)
    assert rc == 0, out
    assert any("room to leave the gateway after 1 look(s)" in m for m in msgs), msgs


def test_room_bad_max_unavailable_fails_at_once(tmp_path, fleet):
    rc, _msgs, out = room(tmp_path, fleet, sglang_gateway_max_unavailable="150%", sglang_gateway_room_timeout_s=120)
    assert rc != 0
    assert "sglang_rollout_max_unavailable = '150%' is outside (0%, 100%]" in out
    assert "retries left" not in out  # refused at the first look, not retried for 120 s
