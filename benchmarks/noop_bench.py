# Copyright (c) gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""No-op converge speed: site.yml with nothing to change beside a bare fact-gathering play on the
same hosts, per connection type, side by side in one run (issue 15, part 2).

Run against the simulated lab after `make lab` (it changes nothing there):

    .venv/bin/python benchmarks/noop_bench.py [--inventory inventories/local] [--repeat 1]

What it runs, each `--repeat` times (the figure is the median), timing the whole ansible-playbook; the runs
go round by round (every row once, then again), so that a drift of the machine during the benchmark falls on the
no-op and the bare play alike:

  site      ansible-playbook site.yml --skip-tags bench (as issue 15's figure), with
            ansible.posix.profile_tasks on: each play's share is read from its timestamps, so the
            plays of the Proxmox hosts (SSH) and of the containers (proxmox_pct_remote) get their
            own figure from the same run
  bare      a play that gathers all facts (the default subset) and pings, on the same hosts:
            all of them, then the Proxmox hosts (SSH) alone, then the containers (pct) alone
  podman    where it applies: the Proxmox host stand-in is a Podman container, so
            playbooks/proxmox_hosts.yml and the bare play also run through
            containers.podman.podman (an extra inventory source sets the connection)

With `--containers-connection PLUGIN` (repeatable) every run reaches the containers (the group
proxmox_containers) with PLUGIN instead of the inventory's connection: an extra inventory source gives
each of them `ansible_connection` as a host variable, which wins over group_vars. Repeated, the runs
are made once per PLUGIN, one table each, one after the other in one invocation:

    .venv/bin/python benchmarks/noop_bench.py --containers-connection community.proxmox.proxmox_pct_remote \
        --containers-connection gpufleet.sglang.pct_pipelined

It prints one table (seconds, and the ratio to the bare play of the same hosts), the median controller
CPU of each run (user and system of ansible-playbook and its workers: a lever that saves the controller's work
shows there before this machine's spread lets it show in the wall time), the changed count of every site
run (a no-op must be 0; the gate's history line is tagged bench and skipped), and the machine's load average
before and after. Every run's output is kept under .cache/noop-bench/.
Exit status 1 when a run fails or a no-op run changed something.
"""

from __future__ import annotations

import argparse
import configparser
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# every run's output, for a second look (the table is computed from the same text)
LOG_DIR = REPO / ".cache" / "noop-bench"
# every run reads this configuration; a profiled run adds profile_tasks to the callbacks it enables
ANSIBLE_CFG = REPO / "ansible.cfg"
# the ansible-playbook of the interpreter running this script (the project's venv), PATH or not
ANSIBLE_PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")
STANDINS = "@tests/harness/lab-standins.yml"
BARE_PLAY = """---
- name: Bare play (facts, ping)
  hosts: "{{ bench_hosts }}"
  gather_facts: true
  tasks:
    - name: Ping
      ansible.builtin.ping:
"""
# profile_tasks prints, after each task/play header: "<date> (0:00:01.234)       0:00:05.678 ****"
STAMP = re.compile(r"^\w+ \d+ \w+ \d{4}\s+[\d:]+ [+-]\d{4} \(([\d:.]+)\)\s+([\d:.]+) \*+$")
HEADER = re.compile(r"^(PLAY|TASK|RUNNING HANDLER) \[(.*)\]")
RECAP = re.compile(r"^(\S+)\s*: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)")


def seconds(hms: str) -> float:
    h, m, s = hms.split(":")
    return int(h) * 3600 + int(m) * 60 + float(s)


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text(encoding="utf-8").split()[:3])


def configured_callbacks(cfg: Path = ANSIBLE_CFG) -> list[str]:
    """The callbacks ansible.cfg enables (``callbacks_enabled`` of ``[defaults]``): a profiled run adds
    profile_tasks to them, so that it runs what an unprofiled run (the bare play's) runs."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(cfg, encoding="utf-8")
    value = parser.get("defaults", "callbacks_enabled", fallback="")
    return [name.strip() for name in value.split(",") if name.strip()]


def children_cpu() -> float:
    """User and system CPU seconds of this process's finished and waited-for children and theirs."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(args: list[str], profile: bool = False, log: str = "") -> tuple[float, str, int, float]:
    """ansible-playbook ``args``: its wall time, output, exit status, and the controller's CPU seconds (user and
    system of ansible-playbook and the workers it forks, not the hosts')."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(ANSIBLE_CFG), ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    if profile:
        env["ANSIBLE_CALLBACKS_ENABLED"] = ",".join([*configured_callbacks(), "ansible.posix.profile_tasks"])
        env["PROFILE_TASKS_TASK_OUTPUT_LIMIT"] = "0"
    start, cpu_start = time.monotonic(), children_cpu()
    out = subprocess.run(
        [ANSIBLE_PLAYBOOK, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=1800, check=False
    )
    took, cpu, text = time.monotonic() - start, children_cpu() - cpu_start, out.stdout + out.stderr
    if log:
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        (LOG_DIR / f"{re.sub(r'[^A-Za-z0-9]+', '-', log).strip('-')}.log").write_text(text, encoding="utf-8")
    return took, text, out.returncode, cpu


def play_times(output: str) -> dict[str, float]:
    """Seconds spent in each play (by name), from profile_tasks' cumulative timestamps. profile_tasks
    stamps tasks, not plays: a play begins at the stamp of its first task (its fact gathering when it
    gathers facts) and ends where the next play begins; the last stamp (after the recap) ends the run."""
    plays: list[tuple[str, float]] = []
    play: str | None = None
    end = 0.0
    for line in output.splitlines():
        head = HEADER.match(line)
        if head and head.group(1) == "PLAY":
            play = head.group(2)
            continue
        stamp = STAMP.match(line.strip())
        if stamp:
            end = seconds(stamp.group(2))
            if play is not None:
                plays.append((play, end))
                play = None
    times: dict[str, float] = {}
    for n, (name, at) in enumerate(plays):
        stop = plays[n + 1][1] if n + 1 < len(plays) else end
        times[name] = times.get(name, 0.0) + stop - at
    return times


def recap(output: str) -> dict[str, tuple[int, int, int, int]]:
    return {
        m.group(1): (int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5)))
        for m in map(RECAP.match, output.splitlines())
        if m
    }


def containers(inventory: str) -> list[str]:
    """The hosts of the group proxmox_containers (its children's too), from ansible-inventory."""
    out = subprocess.run(
        [str(Path(ANSIBLE_PLAYBOOK).parent / "ansible-inventory"), "-i", inventory, "--list"],
        cwd=REPO,
        env=dict(os.environ, ANSIBLE_CONFIG=str(ANSIBLE_CFG)),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    groups = json.loads(out.stdout)
    hosts: list[str] = []
    todo = ["proxmox_containers"]
    while todo:
        group = groups.get(todo.pop(), {})
        hosts += [h for h in group.get("hosts", []) if h not in hosts]
        todo += group.get("children", [])
    return hosts


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--inventory", default="inventories/local")
    p.add_argument("--repeat", type=int, default=1, help="runs of each kind; the median is printed")
    p.add_argument("--podman-host", default="lab-pve1", help="the Proxmox host that is a Podman container ('' = none)")
    p.add_argument(
        "--containers-connection",
        action="append",
        default=[],
        metavar="PLUGIN",
        help="run everything with this connection to the containers (host vars of an extra inventory source); "
        "repeat it for tables side by side, e.g. community.proxmox.proxmox_pct_remote and "
        "gpufleet.sglang.pct_pipelined (default: the inventory's own)",
    )
    args = p.parse_args()
    problems: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n, connection in enumerate(args.containers_connection or [""]):
            extra: list[str] = []
            if connection:
                source = Path(tmp) / f"containers-{n}.json"
                hosts = {h: {"ansible_connection": connection} for h in containers(args.inventory)}
                source.write_text(json.dumps({"all": {"hosts": hosts}}), encoding="utf-8")
                extra = ["-i", str(source)]
            problems += bench_all(
                args, extra, connection or "the inventory's connection", tag=connection.rsplit(".", 1)[-1]
            )
    for problem in problems:
        print(f"PROBLEM: {problem}", file=sys.stderr)
    return 1 if problems else 0


def bench_all(args: argparse.Namespace, extra: list[str], connection: str, tag: str = "") -> list[str]:
    """One table: every run of main()'s docstring with ``extra`` inventory sources; returns the problems.
    Each run's log is named after the run and ``tag`` (the connection): one table's logs do not overwrite
    another's."""
    inv = ["-i", args.inventory, *extra, "-e", STANDINS]
    problems: list[str] = []
    # each run's controller CPU seconds, by the run's name
    cpus: dict[str, list[float]] = {}
    load_before = load()
    started = datetime.now().astimezone().isoformat(timespec="seconds")

    with tempfile.TemporaryDirectory() as tmp:
        bare = Path(tmp) / "bare.yml"
        bare.write_text(BARE_PLAY, encoding="utf-8")
        podman_inv = Path(tmp) / "podman.yml"
        podman_inv.write_text(
            f"all:\n  hosts:\n    {args.podman_host}:\n      ansible_connection: containers.podman.podman\n"
            f"      ansible_host: {args.podman_host}\n      ansible_python_interpreter: /usr/bin/python3\n",
            encoding="utf-8",
        )
        podman = ["-i", str(podman_inv)]

        def once(name: str, argv: list[str], n: int, profile: bool, noop: bool) -> tuple[float, str]:
            took, out, rc, cpu = run(argv, profile, log=f"{name}-{tag + '-' if tag else ''}{n + 1}")
            cpus.setdefault(name, []).append(cpu)
            if rc != 0:
                problems.append(f"{name}: rc={rc}\n{out[-3000:]}")
            if noop:
                changed = {h: r[1] for h, r in recap(out).items() if r[1]}
                if changed:
                    problems.append(f"{name}: not a no-op, changed={changed}")
            print(f"  {name}: {took:.1f} s (controller CPU {cpu:.1f} s)", file=sys.stderr, flush=True)
            return took, out

        # (name, argv, profiled, a no-op that must change nothing)
        plan: list[tuple[str, list[str], bool, bool]] = [
            ("site.yml", [*inv, "site.yml", "--skip-tags", "bench"], True, True),
            ("bare all", [*inv, str(bare), "-e", "bench_hosts=all"], False, False),
            ("bare ssh", [*inv, str(bare), "-e", "bench_hosts=proxmox_hosts"], False, False),
            ("bare pct", [*inv, str(bare), "-e", "bench_hosts=proxmox_containers"], False, False),
        ]
        if args.podman_host:
            plan += [
                (
                    "proxmox_hosts.yml (podman)",
                    [*inv, *podman, "playbooks/proxmox_hosts.yml", "--skip-tags", "bench"],
                    False,
                    True,
                ),
                ("bare podman", [*inv, *podman, str(bare), "-e", "bench_hosts=proxmox_hosts"], False, False),
            ]
        # Round by round, every row once per round: a machine that gets slower or faster during the run
        # (another load, its CPU's clock) moves the no-op and the bare play alike, not one side alone.
        runs: dict[str, list[tuple[float, str]]] = {name: [] for name, *_rest in plan}
        for n in range(args.repeat):
            for name, argv, profile, noop in plan:
                runs[name].append(once(name, argv, n, profile, noop))
        site, bare_all, bare_ssh, bare_pct = (runs[name] for name in ("site.yml", "bare all", "bare ssh", "bare pct"))
        podman_rows: list[tuple[str, float, float]] = []
        if args.podman_host:
            podman_rows.append(
                (
                    f"Podman (containers.podman.podman) to {args.podman_host}: playbooks/proxmox_hosts.yml",
                    statistics.median(t for t, _out in runs["proxmox_hosts.yml (podman)"]),
                    statistics.median(t for t, _out in runs["bare podman"]),
                )
            )

    med = statistics.median
    per_play = [play_times(out) for _secs, out in site]
    names = list(per_play[0]) if per_play else []
    ssh_plays = [n for n in names if n.startswith("Proxmox hosts")]
    pct_plays = [n for n in names if n not in ssh_plays]
    rows = [
        ("all hosts: site.yml --skip-tags bench", med(t for t, _out in site), med(t for t, _out in bare_all)),
        (
            "SSH to the Proxmox host: its play(s) of site.yml",
            med(sum(pt.get(n, 0.0) for n in ssh_plays) for pt in per_play),
            med(t for t, _out in bare_ssh),
        ),
        (
            f"{connection} to the containers: their plays of site.yml",
            med(sum(pt.get(n, 0.0) for n in pct_plays) for pt in per_play),
            med(t for t, _out in bare_pct),
        ),
        *podman_rows,
    ]
    hosts = sorted(recap(site[0][1])) if site else []
    print(
        f"no-op converge vs bare fact-gathering play ({args.inventory}: {', '.join(hosts)}; containers: {connection})"
    )
    print(f"started {started}; load average before {load_before}, after {load()}; {os.cpu_count()} CPUs")
    print(f"median of {args.repeat} run(s) each; whole ansible-playbook wall time (per-play shares from profile_tasks)")
    print(f"{'what':<82} {'no-op s':>8} {'bare s':>7} {'ratio':>6}")
    for what, noop_s, bare_s in rows:
        print(f"{what:<82} {noop_s:8.1f} {bare_s:7.1f} {noop_s / bare_s:5.1f}x")
    # the controller's own CPU (ansible-playbook and its workers), beside the wall time: a lever that saves the
    # controller's work shows here first, where the machine's spread hides it in the wall time
    print(
        "controller CPU s (user + system), median: "
        + ", ".join(f"{name} {med(values):.1f}" for name, values in cpus.items())
    )
    for name in names:
        print(f"  play {name!r}: {med(pt.get(name, 0.0) for pt in per_play):.1f} s")
    for run_no, (_secs, out) in enumerate(site, 1):
        print(f"  site run {run_no} recap: " + ", ".join(f"{h} changed={r[1]}" for h, r in recap(out).items()))
    return problems


if __name__ == "__main__":
    sys.exit(main())
