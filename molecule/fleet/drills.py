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
A    rolling upgrade of the three nodes to 0.5.23 under steady traffic through the gateway: zero
     failed client requests, counts, drain times and wall time printed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

HOST = "fleet-gw"
NODES = ("node1", "node2", "node3")
PORTS = {"node1": 31001, "node2": 31002, "node3": 31003}
# the inventory directory molecule writes: platforms, the provisioner's hosts and group_vars
INVENTORY = os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])
BASE_ENV = {"STANDIN_STARTUP_DELAY_S": "1", "STANDIN_TOKENS_PER_S": "3000"}
CRASH_BOUND_S = 90  # crash loop detected (2 restarts x 1 s) + rollback + readiness + short gate


def log(msg: str) -> None:
    print(msg, flush=True)


def sh(*argv: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if check and out.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} -> rc {out.returncode}\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return out


def on_host(script: str, check: bool = True) -> str:
    return sh("podman", "exec", HOST, "bash", "-c", script, check=check).stdout


def playbook(*extra: str, timeout: float = 600) -> tuple[int, str, float]:
    start = time.monotonic()
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default", ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    env.update(ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    out = subprocess.run(
        ["ansible-playbook", "playbooks/sglang.yml", "-i", INVENTORY, *extra],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
    )
    return out.returncode, out.stdout + out.stderr, time.monotonic() - start


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


def healthy_workers() -> list[str]:
    return sorted(w["url"] for w in get_json("http://127.0.0.1:8080/workers")["workers"] if w.get("is_healthy"))


def failure_message(output: str) -> str:
    match = re.search(r'fatal: \[node\d\]: FAILED! => .*?"msg": "(node\d: (?:[^"\\]|\\.)*)"', output)
    if not match:
        raise SystemExit(f"no rollback message in the play's output:\n{output[-4000:]}")
    return str(json.loads(f'"{match.group(1)}"'))


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
        " --flag-table /srv/gpufleet-flag-table/sglang_flag_table.py --config /tmp/new.yaml 2>&1; echo rc=$?",
        check=False,
    )
    expect(
        "unrecognized arguments: --cuda-graph-max-bs-decode" in refused and "rc=2" in refused,
        f"0.5.8 refuses the 0.5.23 flag: {refused}",
    )
    log(f"renamed flag: 0.5.8 refuses --cuda-graph-max-bs-decode (exit 2); restored options file serves ({options})")
    log(f"play wall time {took:.0f} s")


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
    expect(len(healthy_workers()) == 3, "the gateway routes to the three nodes again")


def drill_rolling_upgrade() -> None:
    log("== A: rolling upgrade of three nodes to 0.5.23 under traffic through the gateway")
    on_host(
        "rm -f /run/fleet-traffic.stop /run/fleet-traffic.json; systemd-run --unit=fleet-traffic --collect"
        " --property=EnvironmentFile=/etc/sglang-gateway/sglang-gateway.secrets.env /usr/bin/python3"
        " /srv/gpufleet-tools/traffic.py --url http://127.0.0.1:8080 --api-key-env SGLANG_GATEWAY_API_KEY"
        " --concurrency 4 --max-new-tokens 64 --stream --stop-file /run/fleet-traffic.stop"
        " --summary /run/fleet-traffic.json --duration-s 900"
    )
    time.sleep(3)
    rc, out, took = playbook(*ev({"sglang_version": "0.5.23"}))
    time.sleep(2)
    on_host(
        "touch /run/fleet-traffic.stop; for i in $(seq 120); do [ -s /run/fleet-traffic.json ] && break; sleep 1; done"
    )
    summary = json.loads(on_host("cat /run/fleet-traffic.json"))
    drains = re.findall(r"(node\d): drained in ([0-9.]+) s \((\d+) running", out)
    log(
        f"FIGURE rolling upgrade: sent {summary['sent']}, ok {summary['ok']}, failed {summary['failed']}"
        f" {summary.get('reasons')}; wall time of the 3-node rolling upgrade {took:.0f} s"
    )
    for node, secs, running in drains:
        log(f"FIGURE drain {node}: {running} running request(s) at removal, drained in {secs} s")
    expect(rc == 0, "the rolling upgrade succeeds", out)
    expect(summary["sent"] > 0 and summary["failed"] == 0 and summary["ok"] == summary["sent"], "zero failed requests")
    expect(len(drains) == 3, "three nodes drained", out)
    for node in NODES:
        expect(served_version(node) == "0.5.23", f"{node} serves 0.5.23")
    expect(len(healthy_workers()) == 3, "the gateway routes to the three nodes")


def main() -> int:
    drill_crash_and_renamed_flag()
    drill_second_rollback()
    drill_slow_canary()
    drill_rolling_upgrade()
    log("all drills passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
