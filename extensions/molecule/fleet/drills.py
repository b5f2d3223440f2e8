# Copyright (c) gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Drills of molecule/fleet: the REAL playbooks/sglang.yml against the scenario's inventory.

Run from the project root by side_effect.yml after converge (nodes on SGLang 0.5.8 behind the
gateway). Each drill asserts what the node(s) run afterwards and prints its figures:

B+E  canary upgraded to 0.5.23 (whose options use --cuda-graph-max-bs-decode, a flag 0.5.8 does not
     know) crash-loops: rolled back within a bound; the 0.5.8 server starts and serves.
D    a second rollback in a row (no older deployment) says so and changes nothing.
C    a slower environment: gate FAIL on the canary, rolled back, unit/options/env byte-identical,
     the other nodes untouched.
H    (inside U, node2 held out of the gateway) an Xid 79 line in node2's kernel log: the rollout of node2 stops
     at its GPU health check before any change, names the GPU and why; node2 stays out of the gateway and its
     health textfile says failed (the GpufleetGpuFailed rule's series).
U    a node becomes unreachable mid-rollout (batches [2, 1]): node2's connection breaks right after
     it was taken out of the gateway and drained. The rollout stops after its batch, node3 is never
     touched, the message names node2 and its state, node2 stays out of the gateway (also across a
     gateway restart) and serves its old release; node1 finished its batch.
E    (under the traffic of A, before its rollout) the canary's drain budget
     (sglang_gateway_drain_budget_s=2) runs out with a long stream pinned to node1: the rollout
     stops (sglang_gateway_drain_expired default fail), node1 is back in the gateway on its
     release, not restarted; the stragglers are counted and the stream finishes.
A    rolling upgrade of the three nodes to 0.5.23 (max_unavailable 1) at 60% of the fleet's measured
     capacity: open-loop arrivals (tests/tools/traffic.py --load-fraction, capacity probed from the
     nodes' /metrics), OpenAI streams of 4,000-12,000 tokens. No failed request; the gateway never lists
     fewer than 3 - max_unavailable healthy workers (sampled every 0.5 s) nor a node between its
     removal and its add-back; drains start with streams running and wait for them; TTFT p50/p99
     before and during the rollout, drain figures and wall time printed. (The gateway restart of
     the earlier A+G is gone: at this load it would drop most streams in flight; U restarts the
     gateway with a node held out.)
After each drill every node serves the release it should and the gateway routes to exactly the
healthy nodes it should: its own worker list and real requests through it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# the figures' readers shared with tests/harness/lab.sh upgrade: drain lines, watcher samples
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests", "tools"))
from rollout_figures import drains, healthy_counts, ms

HOST = "fleet-gw"
NODES = ("node1", "node2", "node3")
PORTS = {"node1": 31001, "node2": 31002, "node3": 31003}
# the inventory directory molecule writes: platforms, the provisioner's hosts and group_vars
INVENTORY = os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])
BASE_ENV = {"STANDIN_STARTUP_DELAY_S": "1", "STANDIN_TOKENS_PER_S": "3000", "STANDIN_REQUEST_TOKENS_PER_S": "375"}
CRASH_BOUND_S = 90  # crash loop detected (2 restarts x 1 s) + rollback + readiness + short gate
URL = {n: f"http://127.0.0.1:{p}" for n, p in PORTS.items()}
MARK_DIR = "/var/lib/sglang-gateway/out-of-rotation"
KEY_ENV_FILE = "/etc/sglang-gateway/sglang-gateway.secrets.env"
# traffic.py checks streams with the gate's gate/sse.py (plugins/module_utils, mounted here)
MODULE_UTILS = "/srv/gpufleet-flag-table"


def log(msg: str) -> None:
    print(msg, flush=True)


def sh(*argv: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if check and out.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} -> rc {out.returncode}\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return out


def on_host(script: str, check: bool = True) -> str:
    return sh("podman", "exec", HOST, "bash", "-c", script, check=check).stdout


def _playbook_cmd(extra: tuple[str, ...], inventories: tuple[str, ...]) -> list[str]:
    inv = [a for i in (INVENTORY, *inventories) for a in ("-i", i)]
    return ["ansible-playbook", "playbooks/sglang.yml", *inv, *extra]


def _playbook_env(env_extra: dict[str, str] | None) -> dict[str, str]:
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default", ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    env.update(ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", PYTHONUNBUFFERED="1", **(env_extra or {}))
    return env


def playbook(
    *extra: str, inventories: tuple[str, ...] = (), env_extra: dict[str, str] | None = None, timeout: float = 2400
) -> tuple[int, str, float]:
    start = time.monotonic()
    out = subprocess.run(
        _playbook_cmd(extra, inventories),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=_playbook_env(env_extra),
    )
    return out.returncode, out.stdout + out.stderr, time.monotonic() - start


class LivePlaybook:
    """playbooks/sglang.yml in the background; every output line kept with its (unix) time."""

    def __init__(self, *extra: str) -> None:
        self.lines: list[tuple[float, str]] = []
        self.start = time.monotonic()
        self.proc = subprocess.Popen(
            _playbook_cmd(extra, ()),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=_playbook_env(None),
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append((time.time(), line.rstrip("\n")))

    def first(self, pattern: str) -> float | None:
        """Time of the first line matching pattern (None: not yet)."""
        for t, line in list(self.lines):
            if re.search(pattern, line):
                return t
        return None

    def wait_for(self, pattern: str, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            t = self.first(pattern)
            if t is not None:
                return t
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        raise SystemExit(f"FAILED: no line /{pattern}/ in the play's output\n{self.output()[-4000:]}")

    def finish(self, timeout: float = 2400) -> tuple[int, str, float]:
        rc = self.proc.wait(timeout=timeout)
        self.reader.join(timeout=10)
        return rc, self.output(), time.monotonic() - self.start

    def output(self) -> str:
        return "\n".join(line for _t, line in self.lines)


def ev(data: dict[str, object]) -> list[str]:
    return ["-e", json.dumps(data)]


def node_files(node: str) -> dict[str, str]:
    """sha256 of the unit, options and environment files, the release link and the MainPID."""
    svc = f"sglang-{node}"
    text = on_host(
        f"sha256sum /etc/systemd/system/{svc}.service /etc/sglang/{svc}.yaml /etc/sglang/{svc}.env"
        f" /etc/sglang/{svc}.secrets.env; readlink /opt/fleet/{node}/current;"
        f" systemctl show -p MainPID --value {svc}"
    )
    return {str(i): line for i, line in enumerate(text.splitlines())}


def get_json(url: str) -> dict[str, object]:
    """GET with the test key from inside the host (the image has no curl)."""
    code = (
        "import sys, urllib.request; req = urllib.request.Request(sys.argv[1], headers={'Authorization':"
        " 'Bearer molecule-fleet-key'}); print(urllib.request.urlopen(req, timeout=10).read().decode())"
    )
    return json.loads(sh("podman", "exec", HOST, "python3", "-c", code, url).stdout)


def served_version(node: str) -> str:
    return str(get_json(f"http://127.0.0.1:{PORTS[node]}/server_info")["version"])


def gateway_workers() -> dict[str, bool]:
    """The gateway's own worker list: {url: is_healthy}."""
    return {
        w["url"].rstrip("/"): bool(w.get("is_healthy")) for w in get_json("http://127.0.0.1:8080/workers")["workers"]
    }


def worker_ids() -> dict[str, str]:
    return {w["url"].rstrip("/"): str(w["id"]) for w in get_json("http://127.0.0.1:8080/workers")["workers"]}


def marks() -> list[str]:
    return sorted(on_host(f"cat {MARK_DIR}/* 2>/dev/null || true").split())


def traffic_probe(seconds: float = 2) -> dict[str, object]:
    """Real streamed requests through the gateway for a few seconds (no retry of any kind)."""
    out = on_host(
        f"set -a; . {KEY_ENV_FILE}; GPUFLEET_MODULE_UTILS={MODULE_UTILS} python3 /srv/gpufleet-tools/traffic.py --url http://127.0.0.1:8080"
        f" --api-key-env SGLANG_GATEWAY_API_KEY --concurrency 2 --max-new-tokens 16 --stream --duration-s {seconds}"
        " --report-every-s 60 | tail -1",
        check=False,
    )
    return json.loads(out.split("TRAFFIC ", 1)[1])


def wait_gateway_routes(nodes: tuple[str, ...], timeout: float = 60) -> None:
    """Until the gateway lists exactly these nodes, all healthy (an add-back settles within seconds)."""
    want = {URL[n]: True for n in nodes}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if gateway_workers() == want:
                return
        except SystemExit:  # not answering yet (restarting)
            pass
        time.sleep(0.5)
    raise SystemExit(f"FAILED: the gateway lists {gateway_workers()}, expected {sorted(want)} healthy")


def check_fleet(versions: dict[str, str], in_gateway: tuple[str, ...]) -> None:
    """Every node serves its release; the gateway routes to exactly in_gateway, all healthy; real requests pass."""
    for node, version in versions.items():
        expect(served_version(node) == version, f"{node} serves {version} (serves {served_version(node)})")
    listed = gateway_workers()
    expect(
        listed == {URL[n]: True for n in in_gateway},
        f"the gateway routes to {sorted(in_gateway)}, all healthy (lists {listed})",
    )
    probe = traffic_probe()
    expect(probe["sent"] > 0 and probe["failed"] == 0, f"real requests through the gateway all pass: {probe}")
    log(
        f"fleet: {', '.join(f'{n} {v}' for n, v in versions.items())}; gateway routes to {', '.join(in_gateway)};"
        f" {probe['ok']}/{probe['sent']} requests through it ok"
    )


def failure_message(output: str) -> str:
    match = re.search(r'fatal: \[node\d\]: FAILED! => .*?"msg": "(node\d: (?:[^"\\]|\\.)*)"', output)
    if not match:
        raise SystemExit(f"no rollback message in the play's output:\n{output[-4000:]}")
    return str(json.loads(f'"{match.group(1)}"'))


def health_checks(output: str, node: str) -> int:
    """How many times the play's output shows ``node``'s GPU health check (sglang_server's entry point health)."""
    blocks = output.split("TASK [")[1:]
    mine = [b for b in blocks if b.startswith("gpufleet.sglang.sglang_server : Check the GPUs (gpu_health)]")]
    return sum(len(re.findall(rf"^(?:ok|changed): \[{node}\]", b, re.MULTILINE)) for b in mine)


def expect(cond: bool, what: str, output: str = "") -> None:
    if not cond:
        raise SystemExit(f"FAILED: {what}\n{output[-6000:]}")


def drill_crash_and_renamed_flag() -> None:
    log("== B+E: canary upgraded to 0.5.23 crash-loops; its options use a flag 0.5.8 does not know")
    before = node_files("node1")
    rc, out, took = playbook(
        *ev({"sglang_version": "0.5.23", "sglang_server_env": {**BASE_ENV, "STANDIN_FAULT": "crash"}})
    )
    msg = failure_message(out)
    log(f"message: {msg}")
    expect(rc != 0, "the play fails", out)
    expect(
        "Rolled back to deployment" in msg and "SGLang 0.5.8" in msg and "back in the gateway" in msg,
        "rolled back",
        out,
    )
    after = node_files("node1")
    expect(
        {k: v for k, v in after.items() if k != "5"} == {k: v for k, v in before.items() if k != "5"},
        "node1's files and release link byte-identical to before",
        out,
    )
    expect(served_version("node1") == "0.5.8", "node1 serves 0.5.8")
    detected = re.search(r"after ([0-9.]+) s", msg)
    serving = re.search(r"\(([0-9.]+) s after the failure\)", msg)
    expect(detected is not None and serving is not None, "the message has both times", out)
    total = float(detected.group(1)) + float(serving.group(1))
    log(
        f"FIGURE crash loop start -> previous deployment serving: {total:.1f} s "
        f"(crash loop detected after {detected.group(1)} s, serving {serving.group(1)} s later; bound {CRASH_BOUND_S})"
    )
    expect(total < CRASH_BOUND_S, f"rolled back within {CRASH_BOUND_S} s")
    expect(before["5"] != after["5"], "node1 was restarted")
    for node in ("node2", "node3"):
        expect(served_version(node) == "0.5.8", f"{node} untouched on 0.5.8")
    # E: the 0.5.8 launcher refuses the options rendered for 0.5.23, so a link-only rollback would not start
    options = on_host("ls /opt/fleet/node1/deployments/").split()
    refused = on_host(
        'printf \'{"model-path": "/m", "cuda-graph-max-bs-decode": 64}\' > /tmp/new.yaml;'
        " python3 /srv/gpufleet-standins/sglang_launch.py --release /opt/fleet/node1/current"
        " --flag-table /srv/gpufleet-flag-table/sglang/flag_table.py --config /tmp/new.yaml 2>&1; echo rc=$?",
        check=False,
    )
    expect(
        "unrecognized arguments: --cuda-graph-max-bs-decode" in refused and "rc=2" in refused,
        f"0.5.8 refuses the 0.5.23 flag: {refused}",
    )
    log(f"renamed flag: 0.5.8 refuses --cuda-graph-max-bs-decode (exit 2); restored options file serves ({options})")
    log(f"play wall time {took:.0f} s")
    check_fleet(dict.fromkeys(NODES, "0.5.8"), NODES)


def drill_second_rollback() -> None:
    log("== D: a second rollback in a row")
    tree = "find /opt/fleet/node1/deployments /etc/sglang -printf '%p %l %s\\n' | sort; sha256sum /etc/sglang/*"
    before = on_host(tree)
    out = sh(
        "ansible",
        "node1",
        "-i",
        INVENTORY,
        "-m",
        "gpufleet.sglang.sglang_deployment",
        "-a",
        "state=rolled_back root=/opt/fleet/node1/deployments release_link=/opt/fleet/node1/current",
        check=False,
    )
    text = out.stdout + out.stderr
    expect(
        out.returncode != 0 and "no previous deployment" in text and "nothing was changed" in text,
        "the second rollback is refused with its reason",
        text,
    )
    expect(on_host(tree) == before, "nothing changed")
    log("second rollback: " + re.search(r"sglang_deployment: no previous deployment[^\"\n\x1b]*", text).group(0))
    check_fleet(dict.fromkeys(NODES, "0.5.8"), NODES)


def drill_slow_canary() -> None:
    log("== C: a slower environment on the canary")
    before = {n: node_files(n) for n in NODES}
    start = time.monotonic()
    rc, out, took = playbook(*ev({"sglang_server_env": {**BASE_ENV, "STANDIN_TOKENS_PER_S": "900"}}))
    msg = failure_message(out)
    log(f"message: {msg}")
    expect(
        rc != 0 and "throughput gate FAIL" in msg and "Rolled back to deployment" in msg, "gate FAIL, rolled back", out
    )
    after = {n: node_files(n) for n in NODES}
    same = {k: v for k, v in after["node1"].items() if k != "5"} == {
        k: v for k, v in before["node1"].items() if k != "5"
    }
    expect(same, "node1's unit, options, env files and release link byte-identical to before", out)
    expect(after["node2"] == before["node2"] and after["node3"] == before["node3"], "node2 and node3 untouched", out)
    expect("verified: gate PASS" in msg, "the restored deployment serves at its baseline", out)
    serving = re.search(r"\(([0-9.]+) s after the failure\)", msg)
    log(
        f"FIGURE gate FAIL -> previous deployment serving: {serving.group(1) if serving else '?'} s (play {took:.0f} s,"
        f" drill {time.monotonic() - start:.0f} s)"
    )
    check_fleet(dict.fromkeys(NODES, "0.5.8"), NODES)


def link_down_inventory(directory: str, node: str, mark: str) -> str:
    """An inventory that runs ``node``'s SSH (the same sshd, key, pipelining and ControlPersist as every
    node) through cut_proxy.py: the link goes down when ``mark`` appears in the gateway host. Its own
    ansible_host gives it its own ControlPersist master; the host key is the sshd's (HostKeyAlias)."""
    pid = sh("podman", "inspect", "-f", "{{.State.Pid}}", HOST).stdout.strip()
    proxy = (
        f"{sys.executable} {os.path.join(HERE, 'cut_proxy.py')} --root /proc/{pid}/root --cut-when {mark}"
        " --connect 127.0.0.1:2231"
    )
    path = os.path.join(directory, "link-down.yml")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(
            f"all:\n  hosts:\n    {node}:\n      ansible_host: {node}-link\n      ansible_ssh_extra_args: >-\n"
            f"        -o HostKeyAlias=[127.0.0.1]:2231 -o 'ProxyCommand={proxy}'\n"
        )
    return path


def drill_unreachable() -> None:
    log(
        "== U: a node becomes unreachable mid-rollout (batches [2, 1], a changed environment; node2's connection"
        " breaks after its drain, before its restart)"
    )
    start = time.monotonic()
    before = {n: node_files(n) for n in NODES}
    ids = worker_ids()
    node2_mark = f"{MARK_DIR}/" + re.sub(r"[^A-Za-z0-9.-]", "_", URL["node2"])
    with tempfile.TemporaryDirectory() as tmp:
        inv = link_down_inventory(tmp, "node2", node2_mark)
        rc, out, took = playbook(
            # a change that needs a restart: only then is a node taken out of the gateway
            *ev(
                {
                    "sglang_rollout_serial": [2, 1],
                    # the capacity check refuses a batch larger than max_unavailable
                    "sglang_rollout_max_unavailable": 2,
                    "sglang_server_env": {**BASE_ENV, "STANDIN_DRILL": "unreachable"},
                }
            ),
            inventories=(inv,),
        )
    expect(rc != 0, "the play fails", out)
    expect(re.search(r"fatal: \[node2\]: UNREACHABLE!", out) is not None, "node2 is UNREACHABLE", out)
    msg = failure_message(out)
    log(f"message: {msg}")
    expect(
        msg.startswith("node2: UNREACHABLE")
        and "while at step 'deploying (files written, drained, restarting)'" in msg
        and "It is OUT of the gateway and was drained" in msg
        and "Before this run it ran deployment" in msg
        and "this run may have changed it since" in msg
        and "(SGLang 0.5.8)" in msg
        and "node1 finished this batch (node1: SGLang 0.5.8, in the gateway)" in msg
        and "no later batch is started" in msg,
        "the message names node2, the step it had reached, its gateway state and release, and node1",
        out,
    )
    expect("TASK" not in out.split("fatal: [node1]: FAILED!")[-1], "no task ran after the stop", out)
    after = {n: node_files(n) for n in NODES}
    expect(after["node3"] == before["node3"], "node3 (later batch) untouched: files, release, MainPID", out)
    expect(worker_ids().get(URL["node3"]) == ids[URL["node3"]], "node3 never left the gateway (same worker id)")
    # node2: its environment file written (files first), then cut before the restart: the same unit,
    # options, release link and process as before, so it still serves what it served
    same = {k: v for k, v in after["node2"].items() if k != "3"}
    expect(same == {k: v for k, v in before["node2"].items() if k != "3"}, "node2 not restarted, same release", out)
    expect(after["node2"]["3"] != before["node2"]["3"], "node2's environment file was written before the cut", out)
    expect(marks() == [URL["node2"]], f"only node2 is held out of rotation ({marks()})")
    check_fleet(dict.fromkeys(NODES, "0.5.8"), ("node1", "node3"))
    # a gateway restart while node2 is held out: its --worker-urls has node2, the mark keeps it out
    t0 = time.monotonic()
    on_host("systemctl restart sglang-gateway")
    wait_gateway_routes(("node1", "node3"))
    settle_end = time.monotonic() + 4
    while time.monotonic() < settle_end:  # smg registers its --worker-urls in the background
        listed = gateway_workers()
        expect(URL["node2"] not in listed, f"node2 stays out of the restarted gateway ({listed})")
        time.sleep(0.5)
    log(f"gateway restarted with node2 held out: routes to node1, node3 again after {time.monotonic() - t0 - 4:.1f} s")
    check_fleet(dict.fromkeys(NODES, "0.5.8"), ("node1", "node3"))
    drill_failed_gpu_stays_out()
    # the run again, connection restored (as the message says): node2 changes no file now, but its
    # restart is pending and it is held out, so it is drained, restarted, gated and put back; node1
    # already runs these files and is left running; node3 (batch 2) gets them
    mid = {n: node_files(n) for n in NODES}
    rc, out2, took2 = playbook(*ev({"sglang_server_env": {**BASE_ENV, "STANDIN_DRILL": "unreachable"}}))
    expect(rc == 0, "the run again succeeds", out2)
    again = {n: node_files(n) for n in NODES}
    expect(again["node1"] == mid["node1"], "node1 not restarted (nothing to change)", out2)
    expect(
        {k: v for k, v in again["node2"].items() if k != "5"} == {k: v for k, v in mid["node2"].items() if k != "5"}
        and again["node2"]["5"] != mid["node2"]["5"],
        "node2 restarted on the files written before the cut (none written now)",
        out2,
    )
    expect(all(again["node3"][k] != mid["node3"][k] for k in "35"), "node3 got the new environment", out2)
    expect(re.search(r"node2: drained in [0-9.]+ s", out2) is not None, "node2 went through the detour", out2)
    expect(re.search(r"node1: drained in", out2) is None, "node1 was not taken out", out2)
    # GPU health before the rollout on each node, and again before the gateway only on those that left it
    checks = {n: health_checks(out2, n) for n in NODES}
    expect(checks == {"node1": 1, "node2": 2, "node3": 2}, f"GPU health checks per node {checks}", out2)
    expect_rolled_first("node2", "held out by an unfinished rollout", out2)
    expect_steady_last(["node1"], out2)
    expect(not marks(), f"no node held out of rotation ({marks()})")
    check_fleet(dict.fromkeys(NODES, "0.5.8"), NODES)
    log(f"run again: node2 restarted and back in the gateway, node1 untouched; play wall time {took2:.0f} s")
    log(f"play wall time {took:.0f} s, drill {time.monotonic() - start:.0f} s")


def expect_rolled_first(node: str, why: str, out: str) -> None:
    """A node out of the gateway is rolled first: the canary of its run, alone in the first batch."""
    printed = " ".join(out.split())  # YAML results fold a long message
    expect(f"Rolled first, already out of the gateway: {node} ({why})" in printed, f"{node} is rolled first", out)
    first_batch = out.split("PLAY [SGLang - release")[1].split("PLAY [", maxsplit=1)[0]
    expect(set(re.findall(r"\[(node\d)", first_batch)) == {node}, f"the first batch is {node} alone", out)


def expect_steady_last(nodes: list[str], out: str) -> None:
    """The plan found ``nodes`` steady (nothing to change, their gates stand): they go last, in one batch."""
    printed = " ".join(out.split()).replace("''", "'")  # YAML results fold a long message and double a quote
    line = f"Steady, rolled last in one batch: {', '.join(nodes)}."
    expect(line in printed, f"the plan says: {line}", out)
    last_batch = out.rsplit("PLAY [SGLang - release", maxsplit=1)[-1].split("PLAY [", maxsplit=1)[0]
    expect(set(re.findall(r"\[(node\d)", last_batch)) == set(nodes), f"the last batch is {', '.join(nodes)}", out)
    log(f"plan: {line}")


def drill_failed_gpu_stays_out() -> None:
    """H (inside U, node2 held out): an Xid 79 in node2's kernel log (tests/standins/nvidia/gpu_fault.py); the
    rollout of node2 stops at its GPU check before anything changes, and node2 stays out of the gateway."""
    log("== H: node2 (held out) shows an Xid 79: the rollout keeps it out of the gateway and stops with the reason")
    start = time.monotonic()
    kernel_log = "/var/lib/gpufleet-standin/kernel-node2.log"
    fault = "python3 /srv/gpufleet-standins/nvidia/gpu_fault.py"
    before = node_files("node2")
    on_host(f"{fault} inject xid79 --kernel-log {kernel_log} --gpu 0")
    try:
        rc, out, _took = playbook(
            "--limit", "node2", *ev({"sglang_server_env": {**BASE_ENV, "STANDIN_DRILL": "unreachable"}})
        )
    finally:
        on_host(f"{fault} clear --kernel-log {kernel_log}")
    expect(rc != 0, "the rollout stops", out)
    msg = failure_message(out)
    log(f"message: {msg}")
    expect(
        msg.startswith("node2: GPU health failed: gpu 0: xid 79 (GPU has fallen off the bus)")
        and "Nothing was deployed or restarted on the node" in msg
        and "It is OUT of the gateway (held out by an unfinished rollout) and stays out" in msg,
        "the message names node2, the GPU, why, and that it stays out",
        out,
    )
    expect("Put the node back into the gateway" not in out, "no add_worker ran", out)
    expect(node_files("node2") == before, "node2 unchanged: files, release, MainPID", out)
    expect(marks() == [URL["node2"]], f"node2 still held out of rotation ({marks()})")
    expect(URL["node2"] not in gateway_workers(), "the gateway does not list node2")
    metrics = on_host("cat /var/lib/prometheus/node-exporter/gpufleet_gpu_health_node2.prom")
    expect(
        'gpufleet_gpu_health{gpu="0",' in metrics and "\ngpufleet_node_health 2\n" in metrics, "textfile says failed"
    )
    log(f"H: {time.monotonic() - start:.0f} s")


def start_background(unit: str, argv: str) -> None:
    on_host(
        f"systemd-run --unit={unit} --collect --property=EnvironmentFile={KEY_ENV_FILE}"
        f" --setenv=GPUFLEET_MODULE_UTILS={MODULE_UTILS} {argv}"
    )


# A: the fleet at LOAD_FRACTION of its measured capacity (open loop: arrivals do not wait for answers),
# OpenAI streams of TOKEN_MIX tokens (11-32 s each at the stand-in's 375 tok/s per stream: smg takes
# about 5 s to delist a removed worker, during which shorter streams end, so the drain would find
# none); one node out leaves 2/3 of the capacity, above the load
LOAD_FRACTION = 0.6
TOKEN_MIX = "4000,8000,12000"
MAX_UNAVAILABLE = 1
FLOOR = len(NODES) - MAX_UNAVAILABLE
BUDGET_S = 2  # the drain budget of the expiry drill: far below the pinned stream (4,000 tokens, >= 10 s)
REMOVAL = r"TASK \[gpufleet\.sglang\.sglang_gateway : Remove the node from the gateway\]"
PHASE_FILE = "/run/fleet-traffic.phase"
# what the rollout says of an expired drain: its failure message, or a drain line
EXPIRED_RE = re.compile(r"drain budget ran out: (\d+) request\(s\) left|(\d+) straggler\(s\) expired")


def set_phase(name: str) -> float:
    """Mark the traffic's phase (the generator files each request under the phase it was sent in)."""
    on_host(f"printf '%s\\n' {name} > {PHASE_FILE}.tmp && mv {PHASE_FILE}.tmp {PHASE_FILE}")
    return time.time()


def check_samples(samples: list[dict]) -> None:
    """Never a node mid-upgrade in the gateway: once a held-out node is gone from the list, it is not
    listed again until its mark is released (right before its add-back); no listed-healthy node down."""
    gone: set[str] = set()
    for smp in samples:
        listed = smp["workers"]
        if listed is None:
            continue
        for url in smp["marks"]:
            if url not in listed:
                gone.add(url)
            expect(not (url in gone and url in listed), f"{url} listed while held out (t={smp['t']}): {smp}")
        gone &= set(smp["marks"])
        down = [u for u, healthy in listed.items() if healthy and not smp["up"].get(u, True)]
        expect(not down, f"the gateway lists a node that does not answer /health as healthy: {smp}")


def drill_drain_budget_expired() -> dict[str, object]:
    """E: the canary's drain budget runs out with a long stream still on it (a client that talks to
    node1 directly): the default (fail) stops the rollout, node1 goes back into the gateway on the
    release it served, not restarted, and the stream finishes."""
    log(f"== E: drain budget of {BUDGET_S} s runs out on the canary (a long stream pinned to node1)")
    start = time.monotonic()
    before = {n: node_files(n) for n in NODES}
    on_host("rm -f /run/fleet-pinned.stop /run/fleet-pinned.json")
    start_background(
        "fleet-pinned",
        f"/usr/bin/python3 /srv/gpufleet-tools/traffic.py --url {URL['node1']} --api-key-env SGLANG_GATEWAY_API_KEY"
        " --concurrency 1 --max-new-tokens 4000 --stream --stop-file /run/fleet-pinned.stop"
        " --summary /run/fleet-pinned.json --duration-s 1800 --report-every-s 60",
    )
    play = LivePlaybook(
        *ev(
            {
                "sglang_gateway_drain_budget_s": BUDGET_S,
                # a change that needs a restart: only then is a node taken out of the gateway
                "sglang_server_env": {**BASE_ENV, "STANDIN_DRILL": "budget"},
            }
        )
    )
    # until the canary leaves the gateway, nothing is out: the requests sent so far are "before"
    while play.first(REMOVAL) is None and play.proc.poll() is None:
        time.sleep(0.2)
    t0 = set_phase("budget")
    rc, out, took = play.finish()
    t1 = set_phase("between")
    on_host(
        "touch /run/fleet-pinned.stop; for i in $(seq 120); do [ -s /run/fleet-pinned.json ] && break; sleep 1; done"
    )
    pinned = json.loads(on_host("cat /run/fleet-pinned.json"))
    expect(rc != 0, "the rollout stops when the canary's drain budget runs out (default: fail)", out)
    msg = failure_message(out)
    log(f"message: {msg}")
    m = EXPIRED_RE.search(msg) or EXPIRED_RE.search(out)
    expect(msg.startswith("node1:") and m is not None, "node1's drain ran out of budget, stragglers counted", out)
    n_strag = int(m.group(1) or m.group(2))
    expect(n_strag >= 1, "at least the pinned stream was left when the budget ran out", out)
    wait_gateway_routes(NODES)
    after = {n: node_files(n) for n in NODES}
    expect(after["node1"]["4"] == before["node1"]["4"], "node1 still runs its release (same release link)", out)
    expect(after["node1"]["5"] == before["node1"]["5"], "node1 was not restarted (same MainPID)", out)
    expect(after["node1"] == before["node1"], "node1's unit, options and environment restored byte-identical", out)
    expect(after["node2"] == before["node2"] and after["node3"] == before["node3"], "node2, node3 untouched", out)
    expect(not marks(), f"no node held out of rotation ({marks()})")
    expect(
        pinned["sent"] >= 1 and pinned["failed"] == 0,
        f"the pinned long stream(s) finished on node1 without a failure: {pinned.get('reasons')}",
    )
    log(
        f"FIGURE drain budget expiry: budget {BUDGET_S} s, node1 had {n_strag} straggler(s) when it ran out;"
        f" behaviour fail (default): rollout stopped (rc {rc}), node1 back in the gateway, not restarted, on"
        f" SGLang {served_version('node1')}; pinned stream(s) {pinned['ok']}/{pinned['sent']} ok; play {took:.0f} s,"
        f" drill {time.monotonic() - start:.0f} s"
    )
    return {"t0": t0, "t1": t1}


def drill_rolling_upgrade_under_load() -> None:
    """A: rolling upgrade to 0.5.23 at 60% of the fleet's measured capacity (open loop, long streams):
    no failed request, never fewer than FLOOR healthy workers, drains that wait for running streams,
    TTFT before and during; E (the drain budget running out) runs under the same traffic first.

    The gateway restart mid-rollout of the earlier drill is not part of it: a restart drops every
    stream in flight through the gateway, which at this load would be most of them; U restarts the
    gateway with a node held out, the sglang_gateway scenario under traffic."""
    log(
        f"== A: rolling upgrade to 0.5.23 at {LOAD_FRACTION:.0%} of the measured capacity, open loop, streams of"
        f" {TOKEN_MIX} tokens, max_unavailable {MAX_UNAVAILABLE}"
    )
    start = time.monotonic()
    on_host(
        "rm -f /run/fleet-traffic.stop /run/fleet-traffic.json /run/fleet-watch.stop /run/fleet-watch.jsonl"
        f" {PHASE_FILE}"
    )
    set_phase("probe")
    sh("podman", "cp", os.path.join(HERE, "watch.py"), f"{HOST}:/run/fleet-watch.py")
    nodes_args = " ".join(f"--node {URL[n]}" for n in NODES)
    start_background(
        "fleet-watch",
        f"/usr/bin/python3 /run/fleet-watch.py --out /run/fleet-watch.jsonl --stop-file /run/fleet-watch.stop"
        f" --key-env SGLANG_GATEWAY_API_KEY --every-s 0.5 {nodes_args}",
    )
    metrics = " ".join(f"--metrics-url {URL[n]}" for n in NODES)
    start_background(
        "fleet-traffic",
        "/usr/bin/python3 /srv/gpufleet-tools/traffic.py --url http://127.0.0.1:8080 --api-key-env"
        f" SGLANG_GATEWAY_API_KEY --load-fraction {LOAD_FRACTION} --capacity-probe-s 3 --probe-concurrency 36"
        f" {metrics} --api openai --max-new-tokens {TOKEN_MIX} --stream --phase-file {PHASE_FILE} --seed 26"
        " --stop-file /run/fleet-traffic.stop --summary /run/fleet-traffic.json --duration-s 3600",
    )
    time.sleep(4)  # the capacity probe
    set_phase("before")
    expiry = drill_drain_budget_expired()
    t_roll = set_phase("rollout")
    play = LivePlaybook(*ev({"sglang_version": "0.5.23", "sglang_rollout_max_unavailable": MAX_UNAVAILABLE}))
    rc, out, took = play.finish()
    t_end = set_phase("after")
    time.sleep(2)
    on_host(
        "touch /run/fleet-traffic.stop /run/fleet-watch.stop;"
        " for i in $(seq 120); do [ -s /run/fleet-traffic.json ] && break; sleep 1; done"
    )
    summary = json.loads(on_host("cat /run/fleet-traffic.json"))
    samples = [json.loads(line) for line in on_host("cat /run/fleet-watch.jsonl").splitlines() if line.strip()]
    found = drains(out)
    phases = summary.get("phases", {})
    cap = summary.get("capacity", {})
    log(
        f"FIGURE rolling upgrade at {LOAD_FRACTION:.0%} of {cap.get('tokens_per_s')} tok/s"
        f" (measured: {cap.get('source')}),"
        f" {summary.get('rate_rps')} req/s open loop, streams of {TOKEN_MIX} tokens: sent {summary['sent']}, ok"
        f" {summary['ok']}, failed {summary['failed']} {summary.get('reasons')}; wall time of the 3-node rolling"
        f" upgrade {took:.0f} s"
    )
    for d in found:
        log(
            f"FIGURE drain {d['node']}: {d['running']} running, {d['queued']} queued at removal, waited"
            f" {d['seconds']} s (budget {d['budget_s']} s, {d['stragglers']} straggler(s) {d['outcome']})"
        )
    roll = healthy_counts(samples, t_roll, t_end)
    budget = healthy_counts(samples, expiry["t0"], expiry["t1"])
    log(
        f"FIGURE healthy workers in the gateway (sampled every 0.5 s): min {min(roll, default=None)} during the"
        f" rollout ({len(roll)} samples), min {min(budget, default=None)} during the budget drill; floor {FLOOR}"
        f" (3 - max_unavailable {MAX_UNAVAILABLE})"
    )
    ttft = {name: phases.get(name, {}).get("ttft", {}) for name in ("before", "rollout")}
    log(
        "FIGURE TTFT p50/p99: "
        + "; ".join(
            f"{name} {ms(t.get('p50_s'))}/{ms(t.get('p99_s'))} ({t.get('n', 0)} requests)" for name, t in ttft.items()
        )
    )
    expect(rc == 0, "the rolling upgrade succeeds", out)
    expect(summary["sent"] > 0 and summary["in_flight"] == 0, f"traffic ran and finished: {summary}")
    expect(summary["failed"] == 0, f"no failed request: {summary.get('failures')}")
    expect(len(found) == len(NODES), f"{len(NODES)} nodes drained ({found})", out)
    expect(
        any(d["running"] > 0 and d["seconds"] > 0 for d in found),
        "at least one drain started with running streams and waited for them",
        out,
    )
    expect(roll and min(roll) >= FLOOR, f"never fewer than {FLOOR} healthy workers during the rollout ({roll})")
    expect(budget, f"the watcher saw the budget drill from the canary's removal (a line /{REMOVAL}/ in its play)")
    expect(min(budget) >= FLOOR, f"never fewer than {FLOOR} healthy workers during the budget drill ({budget})")
    expect(all(t.get("n", 0) > 0 for t in ttft.values()), f"TTFT measured before and during the rollout: {ttft}")
    # playbooks/sglang.yml alone (no GPU nodes play before it): the plan reads every node's GPUs, also for nodes
    # whose release changes, so each restart's warm-cache key has them (this scenario's nodes have no nvidia-smi at
    # the driver role's path, so the key's GPU fields stay empty here; the lab shows the warm start it gives)
    plan_read = re.search(
        r"TASK \[Read the GPUs\] \*+\n(?:skipping|included): (?:gpufleet\.sglang\.nvidia_driver for )?(.*)", out
    )
    expect(
        plan_read is not None and set(plan_read.group(1).split(", ")) == set(NODES),
        f"the plan read the GPUs of every node ({plan_read.group(0) if plan_read else 'no such task'})",
        out,
    )
    check_samples(samples)
    expect(not marks(), f"no node held out of rotation ({marks()})")
    check_fleet(dict.fromkeys(NODES, "0.5.23"), NODES)
    log(f"watcher: {len(samples)} samples; drill {time.monotonic() - start:.0f} s")


def main() -> int:
    drills = (
        drill_crash_and_renamed_flag,
        drill_second_rollback,
        drill_slow_canary,
        drill_unreachable,
        drill_rolling_upgrade_under_load,
    )
    times = []
    for drill in drills:
        start = time.monotonic()
        drill()
        times.append(f"{drill.__name__.removeprefix('drill_')} {time.monotonic() - start:.0f} s")
    log("FIGURE drill times: " + ", ".join(times))
    log("all drills passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
