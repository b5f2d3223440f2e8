#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: rollout_room
short_description: Whether nodes may leave the SGLang gateway now (capacity floor and load)
version_added: "0.1.0"
description:
  - One look at the fleet for a rolling upgrade, run on the gateway host. Reads the gateway's
    C(GET /workers), then for every member the gateway routes to its C(GET /metrics)
    (C(sglang:num_running_reqs), C(sglang:num_queue_reqs)) and, once that gave the load, its C(GET /server_info)
    (C(max_running_requests)).
  - "The members are read side by side, at most 16 at once, each URL once per look (members that share a URL
    share its answers). The look ends by O(deadline_s): a member whose C(/metrics) has not answered by then
    counts as one that did not answer (its load is unknown), one whose C(/server_info) has not, as one
    without C(max_running_requests). The result is the one reading them one after another gives."
  - "Floor: the members out of the gateway (not listed, unhealthy or not ready) and O(leaving) together
    must be at most O(max_unavailable)."
  - "Load: the requests running and queued on the members in the gateway must fit in the running caps of
    the members that stay, times O(headroom). A member without C(max_running_requests) counts O(node_capacity);
    with neither, its cap is unknown and a node that serves requests may not leave."
  - Answers with C(allowed) and the numbers; it never fails for a C(no). The caller waits (C(until)) or stops.
author:
  - gpufleet.sglang contributors (!UNKNOWN)
extends_documentation_fragment:
  - gpufleet.sglang.read_only
options:
  gateway_url:
    description: The gateway's URL from where the module runs, for example C(http://127.0.0.1:8080).
    type: str
    required: true
  api_key:
    description: Bearer key for the gateway's and the nodes' API (the gateway forwards the client's key).
    type: str
    default: ""
  members:
    description: Every node behind the gateway, inventory name to worker URL.
    type: dict
    required: true
  leaving:
    description: The members that would leave the gateway now (one batch).
    type: list
    elements: str
    required: true
  max_unavailable:
    description: A count >= 1 or C(N%) of the members; resolved against the number of members.
    type: raw
    required: true
  headroom:
    description: Share of the staying members' running caps the load may fill, in (0, 1].
    type: float
    default: 0.8
  node_capacity:
    description: Running cap of a member whose C(/server_info) has no C(max_running_requests); 0 for none.
    type: int
    default: 0
  timeout_s:
    description: Timeout of each HTTP call (cut to what is left of O(deadline_s)); > 0.
    type: float
    default: 5
  deadline_s:
    description:
      - The most seconds one look takes, the gateway's list and every member's reads together.
      - V(0) is three times O(timeout_s) (the gateway's list, then a member's two reads, each within its timeout).
    type: float
    default: 0
notes:
  - The rules are in plugins/module_utils/fleet/rollout_plan.py; docs/sglang-gateway.md says where they come from.
"""

EXAMPLES = r"""
- name: Wait until node2 may leave the gateway
  gpufleet.sglang.rollout_room:
    gateway_url: http://127.0.0.1:8080
    members: {node1: "http://10.0.0.1:30000", node2: "http://10.0.0.2:30000", node3: "http://10.0.0.3:30000"}
    leaving: [node2]
    max_unavailable: 1
  register: room
  until: room.allowed
  retries: 60
  delay: 5
"""

RETURN = r"""
allowed:
  description: Whether O(leaving) may leave now.
  returned: always
  type: bool
reason:
  description: V(ok), V(floor), V(load), V(capacity_unknown), V(no_load) or V(gateway) (no usable answer).
  returned: always
  type: str
msg:
  description: The decision in one sentence, with the names and numbers.
  returned: always
  type: str
max_unavailable:
  description: The count O(max_unavailable) resolves to.
  returned: always
  type: int
out:
  description: Members out of the gateway, each with why (C(not listed), C(unhealthy), C(not ready)).
  returned: always
  type: dict
would_be_out:
  description: The members out of the gateway once O(leaving) has left.
  returned: always
  type: list
  elements: str
fleet_running:
  description: Requests running on the members in the gateway.
  returned: always
  type: int
fleet_queued:
  description: Requests queued on the members in the gateway.
  returned: always
  type: int
remaining:
  description: The members that stay in the gateway.
  returned: always
  type: list
  elements: str
remaining_capacity:
  description: What they may carry, O(headroom) x the sum of their running caps.
  returned: always
  type: float
nodes:
  description: Per member, C(in_gateway), C(running), C(queued), C(capacity) (null where unknown) and C(error).
  returned: always
  type: dict
"""

import functools
import json
import ssl
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import Request, make_context

from ansible_collections.gpufleet.sglang.plugins.module_utils.common.fan_out import gather
from ansible_collections.gpufleet.sglang.plugins.module_utils.fleet.rollout_plan import (
    Load,
    Node,
    RolloutPlanError,
    check_headroom,
    look_deadline,
    parse_load,
    parse_max_unavailable,
    parse_workers,
    room,
    unavailable,
)


@functools.lru_cache(maxsize=1)
def _tls() -> ssl.SSLContext:
    """The TLS context of every GET, built once: open_url's default one (certificates checked), which it
    would build again for each call, loading the system's CA store each time (tens of ms of CPU, most of
    a GET's cost on a local network, and CPU work that threads on a small host do not spread)."""
    return make_context()


def _get(url: str, key: str, timeout: float) -> bytes:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    # open_url's defaults, with the context built once (each call installs urllib's global opener: the
    # concurrent reads install alike ones, so which one a read goes through does not matter)
    with Request().open("GET", url, headers=headers, timeout=timeout, context=_tls()) as resp:
        return resp.read(4 * 1024 * 1024)


def _capacity(info: object, fallback: int) -> int | None:
    cap = info.get("max_running_requests") if isinstance(info, dict) else None
    if isinstance(cap, str) and cap.strip().isdigit():  # a server that echoes its flags as text
        cap = int(cap)
    if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0:
        return cap
    return fallback if fallback > 0 else None


def _answer(answers: dict[str, bytes | Exception], url: str, deadline_s: float) -> bytes:
    """What ``url`` answered in this look, or the exception its read raised (raised here)."""
    got = answers.get(url)
    if got is None:
        raise TimeoutError(f"no answer within the look's deadline of {deadline_s:g} s")
    if isinstance(got, Exception):
        raise got
    return got


def _has_load(body: bytes) -> bool:
    try:
        parse_load(body.decode("utf-8", "replace"))
    except ValueError:
        return False
    return True


def _read_node(
    url: str, answers: dict[str, bytes | Exception], fallback: int, deadline_s: float
) -> tuple[Load | None, int | None, str]:
    """A member's load, running cap and error from the look's answers: its /metrics, then (when that
    gave the load) its /server_info, as a sequential reading of them would count them."""
    load, cap, error = None, None, ""
    try:
        load = parse_load(_answer(answers, url + "/metrics", deadline_s).decode("utf-8", "replace"))
        info = json.loads(_answer(answers, url + "/server_info", deadline_s))
        cap = _capacity(info, fallback)
    except (OSError, ValueError) as exc:
        error = f"{url}: {exc}"
        cap = _capacity({}, fallback) if load is not None else None
    return load, cap, error


def look(params: dict) -> dict[str, object]:
    started = time.monotonic()
    members = {str(k): str(v).rstrip("/") for k, v in params["members"].items()}
    key, timeout = params["api_key"], params["timeout_s"]
    deadline_s = look_deadline(timeout, params.get("deadline_s") or 0)
    deadline = started + deadline_s
    k = parse_max_unavailable(params["max_unavailable"]).resolve(len(members))
    headroom = check_headroom(params["headroom"])
    leaving = [str(n) for n in params["leaving"]]
    base: dict[str, object] = {"allowed": False, "max_unavailable": k, "out": {}, "would_be_out": [], "nodes": {}}
    try:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no answer within the look's deadline of {deadline_s:g} s")
        doc = json.loads(_get(params["gateway_url"].rstrip("/") + "/workers", key, min(timeout, left)))
        workers = parse_workers(doc)
    except (OSError, ValueError) as exc:  # URLError, HTTPError, timeouts, JSON and shape errors
        return dict(base, reason="gateway", msg=f"GET {params['gateway_url']}/workers: {exc}")
    out = unavailable(members, workers)
    inside = sorted(name for name in members if name not in out)
    urls = list(dict.fromkeys(members[name] for name in inside))  # members that share a URL: read once
    info_of = {url + "/metrics": url + "/server_info" for url in urls}
    answers = gather(
        info_of,
        lambda url, left: _get(url, key, min(timeout, left)),
        then=lambda url, body: [info_of[url]] if url in info_of and _has_load(body) else [],
        deadline=deadline,
    )
    nodes: list[Node] = []
    detail: dict[str, dict[str, object]] = {}
    for name, url in sorted(members.items()):
        if name in out:
            nodes.append(Node(name, False))
            detail[name] = {"in_gateway": False, "why": out[name]}
            continue
        load, cap, error = _read_node(url, answers, params["node_capacity"], deadline_s)
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


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "gateway_url": {"type": "str", "required": True},
            "api_key": {"type": "str", "default": "", "no_log": True},
            "members": {"type": "dict", "required": True},
            "leaving": {"type": "list", "elements": "str", "required": True},
            "max_unavailable": {"type": "raw", "required": True},
            "headroom": {"type": "float", "default": 0.8},
            "node_capacity": {"type": "int", "default": 0},
            "timeout_s": {"type": "float", "default": 5.0},
            "deadline_s": {"type": "float", "default": 0.0},
        },
        supports_check_mode=True,
    )
    try:
        result = look(module.params)
    except RolloutPlanError as exc:
        module.fail_json(msg=f"rollout_room: {exc}")
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
