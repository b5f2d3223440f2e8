# Copyright (c) gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet-scale model of docs/fleet-scale.md (issue 27, part 5): the wall time of a rolling
upgrade and of a no-op converge for a fleet of N nodes, from forks, the batches (the canary, then
batches of sglang_rollout_max_unavailable: rollout_plan.serial_batches, the function behind the
filter rollout_serial), the cold start, the drain, the gate and the per-task cost, calibrated on
the lab's measurements.

    .venv/bin/python benchmarks/fleet_scale.py            # the doc's table
    .venv/bin/python benchmarks/fleet_scale.py --calibration   # how the constants below fit the lab
    .venv/bin/python benchmarks/fleet_scale.py count LOG  # tasks per host and play of an ansible-playbook log

The formula, per play and per batch of b hosts (Ansible's linear strategy runs each task on the
batch's hosts, at most ``forks`` at a time, and waits for all of them before the next task):

    tasks(b)  = R * ceil(b / forks) * c  +  (R + L) * b * k
    upgrade   = sum over batches of  tasks(b; R_up, L_up) + drain + cold start + gate + back
    no-op     = tasks(N; R_plan, L_plan) + tasks(N; R_noop, L_noop)  (+ the other plays, once, all hosts)

(a no-op's nodes are all steady: the plan reads them in one pass, then they take one batch; without the
plan, as before 2026-12-06, the no-op walked the upgrade's batches: sum over batches of tasks(b; R_noop, L_noop))

R: tasks a host runs through its connection (module runs, loop items, retries), L: tasks the
controller answers alone (set_fact, debug, assert, include_*, argument checks), c: seconds per
remote task on the node, k: the controller's own seconds per host and task (it templates and
queues every host's task in one process, so k adds up over the batch; forks do not divide it).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "collections") not in sys.path:
    sys.path.insert(0, str(REPO / "collections"))

from ansible_collections.gpufleet.sglang.plugins.module_utils.fleet.rollout_plan import serial_batches

# --------------------------------------------------------------------------- the lab's figures
# Measured by the team on the five-host lab (issue 27; docs/fleet-scale.md, "Calibration"), session 57
# (2026-12-07), the inventories' connection `pct_ssh` to the containers, OpenSSH with pipelining to the Proxmox host:
# three plain `ansible-playbook site.yml --skip-tags bench` runs alternating with the code before this session's
# levers (docs/connection.md, "Lever H"), each followed by a bare play.
LAB_NOOP_S = 36.4  # site.yml --skip-tags bench, nothing to change: 36.85, 36.39, 36.06 s
LAB_BARE_S = 3.6  # a bare facts-and-ping play on the same hosts: 3.64, 3.56, 3.48 s
PCT_TASK_S = 1.2  # one task through community.proxmox.proxmox_pct_remote (three `pct exec`, no pipelining)
# `tests/harness/lab.sh upgrade 0.5.13`, 0.5.12.post1 -> 0.5.13 under open-loop traffic at 60% of the fleet's
# capacity, on the same lab right after
LAB_UPGRADE_S = 302.0  # rolling upgrade of the lab's 3 nodes, max_unavailable 1
LAB_DRAIN_S = 16.6  # its drains, the mean of the three its log prints (19.7, 9.53, 20.57 s)
MOLECULE_UPGRADE_S = 316.0  # the same in molecule's fleet scenario (Podman connection; 2026-12-05)
GLM5_COLD_START_S = 450.0  # a GLM-5-NVFP4 node on 8 x RTX PRO 6000 to ready: about 7-8 minutes (public reports)
# Measured for this model on the project's 2-core controller under a load of ~30 (ansible-core 2.19):
# 200 hosts x 10 set_fact tasks, ansible_connection local, took 45 s at forks 10: 22 ms per host and task.
CONTROLLER_S = 0.022

# Tasks per host, counted by `fleet_scale.py count` in the logs of the same runs (noop_bench.py keeps each run's
# output under .cache/noop-bench/, tests/harness/lab.sh the upgrade's under .cache/lab/last-upgrade.log):
# remote = module runs through the connection (loop items one each; delegated ones included), local = tasks the
# controller answers alone, each one a worker per host: set_fact, assert, the includes, the argument checks, and
# the skipped tasks, whose condition a worker evaluates; retries = Ansible's until retries (each a remote run).
SGLANG_UPGRADE = {"remote": 70, "local": 183, "retries": 14}
# The release play of a no-op (`count --noop`, which also leaves out the tasks that run only around a restart: the
# gateway detour, restart, readiness, gate, back in), per node; its first batch takes the plan's reads (Lever H).
# per_batch: the order play's one read of the gateway's workers (run_once), once per run.
SGLANG_NOOP = {"remote": 8, "local": 69, "per_batch": 1}
# The plan and the order play before the rollout (every node in one pass), per node; remote includes the
# delegated reads of the container's pending restart (the Proxmox host) and of the node's mark (the gateway host).
SGLANG_PLAN = {"remote": 5, "local": 34}
# The lab's no-op before and after on 2026-12-06 (benchmarks/noop_bench.py, the same lab, alternating): the sglang
# plays with a batch per node and with the plan and one batch of steady nodes; the model's ratio is checked
# against theirs (tests/unit/test_fleet_scale.py).
LAB_NOOP_SGLANG_BATCHES_S = 50.0  # the median of four runs, alternating with the next
LAB_NOOP_SGLANG_PLAN_S = 37.4  # the median of four runs
# The other plays of site.yml, once each, counted in the same no-op log (remote includes delegated).
OTHER_PLAYS = {
    "proxmox_hosts": {"remote": 11, "local": 52, "per": "proxmox host"},
    "gpu_nodes": {"remote": 5, "local": 25, "per": "node"},
    "sglang_gateway": {"remote": 3, "local": 14, "per": "gateway"},
    "node_exporters": {"remote": 2, "local": 5, "per": "node"},
    "monitoring": {"remote": 2, "local": 10, "per": "gateway"},
}
# The files whose tasks run only when a node restarts (and the gate: tagged bench, skipped by a no-op).
RESTART_ONLY = (
    "playbooks/tasks/gateway_out.yml",
    "roles/sglang_gateway/tasks/room.yml",
    "roles/sglang_gateway/tasks/remove_worker.yml",
    "roles/sglang_gateway/tasks/drain.yml",
    "roles/sglang_gateway/tasks/add_worker.yml",
    "roles/sglang_server/tasks/restart.yml",
    "roles/sglang_server/tasks/warm_key.yml",
    "roles/sglang_server/tasks/warm_restore.yml",
    "roles/sglang_server/tasks/warm_collect.yml",
    "roles/sglang_server/tasks/ready.yml",
    "roles/throughput_gate/tasks/main.yml",
)


@dataclass(frozen=True)
class Params:
    """One fleet and its settings. Times in seconds."""

    nodes: int
    forks: int = 10  # ansible.cfg's
    max_unavailable: object = 1  # sglang_rollout_max_unavailable
    task_s: float = 0.0  # c; 0: calibrated from the lab's no-op (see calibrate())
    controller_s: float = CONTROLLER_S  # k
    cold_start_s: float = GLM5_COLD_START_S
    drain_s: float = 30.0  # what the drain waits (<= its budget: sglang_gateway_drain_budget_s or the gate's)
    gate_s: float = 0.0  # 0: calibrated from the lab's upgrade (see calibrate())
    back_s: float = 5.0  # smg's fixed settle pause on removal (drain_settle_secs), as a per-batch cost
    proxmox_hosts: int = 0  # 0: one per 8 nodes
    serial: tuple[int, ...] = ()  # sglang_rollout_serial set by hand; () = the filter's
    plan: bool = True  # the rollout's plan (steady nodes in one batch); False: a batch per node, as before


def tasks_s(batch: int, remote: float, local: float, p: Params) -> float:
    """One batch of ``batch`` hosts through a play of ``remote`` + ``local`` tasks per host."""
    return remote * math.ceil(batch / p.forks) * p.task_s + (remote + local) * batch * p.controller_s


def batches(p: Params) -> list[int]:
    return list(p.serial) if p.serial else serial_batches(p.nodes, p.max_unavailable)


def upgrade_s(p: Params) -> float:
    """The sglang play with every node restarting (its batches one after another)."""
    r, l_ = SGLANG_UPGRADE["remote"] + SGLANG_UPGRADE["retries"], SGLANG_UPGRADE["local"]
    fixed = p.drain_s + p.cold_start_s + p.gate_s + p.back_s
    return sum(tasks_s(b, r, l_, p) + fixed for b in batches(p) if b > 0)


def noop_s(p: Params) -> dict[str, float]:
    """site.yml --skip-tags bench with nothing to change, per play. With the plan every node is steady: one
    pass of the plan, then one batch of all of them. Without it (``plan=False``) the sglang play walks the
    upgrade's batches: `serial` did not know that nothing would restart."""
    sg = SGLANG_NOOP
    pve = p.proxmox_hosts or max(1, math.ceil(p.nodes / 8))
    hosts = {
        "proxmox_hosts": pve,
        "gpu_nodes": p.nodes,
        "sglang_gateway": 1,
        "node_exporters": p.nodes,
        "monitoring": 1,
    }
    out = {name: tasks_s(hosts[name], c["remote"], c["local"], p) for name, c in OTHER_PLAYS.items()}
    # a task that runs once per batch (run_once) costs one remote task per batch
    once = sg.get("per_batch", 0)
    if p.plan and not p.serial:
        out["sglang"] = (
            tasks_s(p.nodes, SGLANG_PLAN["remote"], SGLANG_PLAN["local"], p)
            + tasks_s(p.nodes, sg["remote"], sg["local"], p)
            + tasks_s(1, once, 0, p)
        )
    else:
        out["sglang"] = sum(
            tasks_s(b, sg["remote"], sg["local"], p) + tasks_s(1, once, 0, p) for b in batches(p) if b > 0
        )
    return out


def calibrate() -> dict[str, float]:
    """c from the lab's no-op (5 hosts: 1 Proxmox host, 3 nodes, 1 gateway; forks 10; max_unavailable 1; the
    plan and one batch of steady nodes), then the lab's per-node restart-and-gate time from its upgrade
    (LAB_UPGRADE_S for 3 nodes, LAB_DRAIN_S as its log prints). The Proxmox host's play goes through SSH with
    pipelining: counted at c too."""
    lab = Params(nodes=3, forks=10, max_unavailable=1, task_s=1.0, proxmox_hosts=1)
    zero = replace(lab, task_s=0.0)
    per_c = sum(noop_s(lab).values()) - sum(noop_s(zero).values())
    c = (LAB_NOOP_S - sum(noop_s(zero).values())) / per_c
    lab = replace(lab, task_s=c, cold_start_s=0.0, drain_s=LAB_DRAIN_S, gate_s=0.0)
    restart_gate = (LAB_UPGRADE_S - upgrade_s(lab)) / len(batches(lab))
    return {"task_s": c, "lab_restart_and_gate_s": restart_gate, "per_node_tasks_s": upgrade_s(lab) / 3}


def with_calibration(p: Params) -> Params:
    cal = calibrate()
    return replace(
        p,
        task_s=p.task_s or cal["task_s"],
        gate_s=p.gate_s or max(cal["lab_restart_and_gate_s"], 0.0),
    )


def hms(s: float) -> str:
    return f"{s / 3600:.1f} h" if s >= 5400 else f"{s / 60:.0f} min" if s >= 90 else f"{s:.0f} s"


SETTINGS = ((10, 1), (10, "10%"), (50, "10%"), (50, "25%"), (100, "100%"))  # (forks, max_unavailable)


def table(nodes: tuple[int, ...] = (10, 50, 200), task_s: float = 0.0) -> list[str]:
    cal = calibrate()
    if task_s:
        cal["task_s"] = task_s
    rows = [
        f"c = {cal['task_s']:.2f} s per remote task, gate (the lab's restart + gate) = "
        f"{cal['lab_restart_and_gate_s']:.0f} s per node; cold start {GLM5_COLD_START_S:.0f} s, drain 30 s, "
        f"k = {CONTROLLER_S * 1000:.0f} ms",
        "",
        "| nodes | forks | max_unavailable | batches | rolling upgrade | its cold starts | its tasks "
        "| no-op converge | its sglang play | its sglang play, a batch per node |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in nodes:
        for forks, mu in SETTINGS:
            p = with_calibration(Params(nodes=n, forks=forks, max_unavailable=mu, task_s=task_s))
            noop, up, nb = noop_s(p), upgrade_s(p), len(batches(p))
            tasks = up - nb * (p.drain_s + p.cold_start_s + p.gate_s + p.back_s)
            before = noop_s(replace(p, plan=False))["sglang"]
            rows.append(
                f"| {n} | {forks} | {mu} | {nb} | {hms(up)} | {hms(nb * p.cold_start_s)} | {hms(tasks)} "
                f"| {hms(sum(noop.values()))} | {hms(noop['sglang'])} | {hms(before)} |"
            )
    return rows


# --------------------------------------------------------------------------- counting a log

_PLAY = re.compile(r"^PLAY \[(.*)\] \*")
_TASK = re.compile(r"^(?:TASK|RUNNING HANDLER) \[(.*)\] \*")
_RESULT = re.compile(r"^(ok|changed|skipping|fatal|failed): \[([\w.-]+)(?: -> ([\w.-]+))?")
_RETRY = re.compile(r"^FAILED - RETRYING: \[([\w.-]+)")
# an include_tasks / include_role that ran: one line for all its hosts, each a task the controller answers alone
_INCLUDED = re.compile(r"^included: \S+ for ([\w.-]+(?:, [\w.-]+)*)\s*$")
CONTROLLER_ACTIONS = frozenset(
    [
        "set_fact",
        "debug",
        "assert",
        "fail",
        "include_role",
        "include_tasks",
        "import_role",
        "import_tasks",
        "meta",
        "add_host",
        "group_by",
        "set_stats",
        "validate_argument_spec",
        "pause",
    ]
)
_KEYWORDS = frozenset(
    [
        "name",
        "when",
        "register",
        "tags",
        "vars",
        "become",
        "become_user",
        "become_method",
        "delegate_to",
        "delegate_facts",
        "loop",
        "loop_control",
        "with_items",
        "with_dict",
        "until",
        "retries",
        "delay",
        "changed_when",
        "failed_when",
        "check_mode",
        "no_log",
        "notify",
        "environment",
        "run_once",
        "ignore_errors",
        "ignore_unreachable",
        "args",
        "listen",
        "throttle",
        "any_errors_fatal",
        "diff",
        "timeout",
        "module_defaults",
        "async",
        "poll",
        "collections",
        "block",
        "rescue",
        "always",
    ]
)


def task_index(repo: Path = REPO) -> dict[str, set[tuple[str, str]]]:
    """Task name -> {(module, file)} over the roles' and playbooks' task files."""
    idx: dict[str, set[tuple[str, str]]] = defaultdict(set)

    def walk(tasks: object, src: str) -> None:
        for t in tasks if isinstance(tasks, list) else []:
            if not isinstance(t, dict):
                continue
            for key in ("block", "rescue", "always"):
                walk(t.get(key), src)
            mods = [key for key in t if key not in _KEYWORDS]
            if mods and "block" not in t:
                idx[str(t.get("name", ""))].add((mods[0].removeprefix("ansible.builtin."), src))

    files = sorted(repo.glob("roles/*/tasks/*.yml")) + sorted(repo.glob("roles/*/handlers/*.yml"))
    for f in files + sorted(repo.glob("playbooks/tasks/*.yml")):
        walk(yaml.safe_load(f.read_text(encoding="utf-8")), str(f.relative_to(repo)))
    for f in sorted(repo.glob("playbooks/*.yml")):
        for play in yaml.safe_load(f.read_text(encoding="utf-8")) or []:
            for key in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                walk(play.get(key) if isinstance(play, dict) else None, str(f.relative_to(repo)))
    return idx


def _lookup(idx: dict[str, set[tuple[str, str]]], header: str) -> tuple[str, set[str]]:
    name = re.sub(r"^[\w.]+ : ", "", header)
    if name.startswith("Validating arguments against arg spec"):
        return "validate_argument_spec", set()
    if name == "Gathering Facts":
        return "gather_facts", set()
    hits = idx.get(name)
    if not hits:
        for key, val in idx.items():
            if "{{" in key and re.match("^" + re.sub(r"\\\{\\\{.*?\\\}\\\}", ".*", re.escape(key)) + "$", name):
                hits = val
                break
    if not hits:
        return "?", set()
    return sorted(hits)[0][0], {hit[1] for hit in hits}


def count(text: str, idx: dict[str, set[tuple[str, str]]], noop: bool = False) -> dict[tuple[int, str, str], Counter]:
    """(play number, play name, host) -> remote / local / skipped / retries, from an ansible-playbook
    log in the default callback's format. ``noop``: leave out the tasks of RESTART_ONLY files."""
    out: dict[tuple[int, str, str], Counter] = defaultdict(Counter)
    play, n, module, srcs = "", 0, "?", set()
    for line in text.splitlines():
        if m := _PLAY.match(line):
            play, n = m.group(1), n + 1
        elif m := _TASK.match(line):
            module, srcs = _lookup(idx, m.group(1))
        elif m := _RESULT.match(line):
            if noop and srcs and srcs <= set(RESTART_ONLY):
                continue
            c = out[(n, play, m.group(2))]
            if m.group(1) == "skipping":
                c["skipped"] += 1
            elif module in CONTROLLER_ACTIONS:
                c["local"] += 1
            else:
                c["remote"] += 1
                c["delegated"] += 1 if m.group(3) else 0
        elif m := _INCLUDED.match(line):
            if noop and srcs and srcs <= set(RESTART_ONLY):
                continue
            for host in m.group(1).split(", "):
                out[(n, play, host)]["local"] += 1
        elif (m := _RETRY.match(line)) and not (noop and srcs and srcs <= set(RESTART_ONLY)):
            out[(n, play, m.group(1))]["retries"] += 1
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd")
    c = sub.add_parser("count", help="tasks per host and play of an ansible-playbook log")
    c.add_argument("log", type=Path)
    c.add_argument("--noop", action="store_true", help="leave out the tasks that run only around a restart")
    ap.add_argument("--calibration", action="store_true", help="print the fitted constants and stop")
    ap.add_argument("--task-s", type=float, default=0.0, help="c, seconds per remote task (default: the fitted one)")
    a = ap.parse_args(argv)
    if a.cmd == "count":
        for (n, play, host), cnt in sorted(count(a.log.read_text(encoding="utf-8"), task_index(), a.noop).items()):
            print(f"play {n} {play[:50]:50s} {host:14s} " + " ".join(f"{k}={v}" for k, v in sorted(cnt.items())))
        return 0
    if a.calibration:
        for key, val in calibrate().items():
            print(f"{key} = {val:.2f}")
        return 0
    print("\n".join(table(task_s=a.task_s)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
