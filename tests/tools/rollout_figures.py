# Copyright (c) gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The figures of a rolling upgrade under traffic, from what the drills record (stdlib only).

Shared by the molecule fleet drill (extensions/molecule/fleet/drills.py) and the lab
(tests/harness/lab.sh upgrade), so both read the same things the same way:
- the play's output (JSON or YAML results; YAML folds a long message over lines): one drain line
  per node (``<host>: drained in <s> s (<r> running, <q> queued at removal; budget <b> s; <n>
  straggler(s) <outcome>), back in the gateway``, plugins/module_utils/fleet/rollout_plan.py
  ``drain_line``; the older form ``(<r> running request(s) at removal)`` too), and the capacity
  check's ``... of max_unavailable <k> out`` (fleet/rollout_plan.py ``room``: the value the play
  resolved, so a ``-e sglang_rollout_max_unavailable=2`` is seen);
- the gateway watcher's samples (extensions/molecule/fleet/watch.py, one JSON line each:
  ``{"t": unix time, "workers": {url: is_healthy} or null, ...}``);
- the traffic summary (tests/tools/traffic.py ``--summary``).

As a command (the lab's report, after its rollout)::

    python3 rollout_figures.py --play-log LOG --traffic SUMMARY.json --watch SAMPLES.jsonl \
        --t0 START --t1 END --nodes 3 [--token-mix 2000,4000,6000]

prints the figures and exits 1 when a request failed, none was sent or some were left in flight,
the gateway listed fewer healthy workers than the floor (nodes - max_unavailable) during the
rollout (or the watcher has no sample of it), no drain started with running requests and waited
for them, or TTFT is missing before or during the rollout; 2 when an input cannot be read.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys

# an Ansible inventory host name, then the drain line (either form) of rollout_plan.drain_line
DRAIN_RE = re.compile(
    r"([A-Za-z0-9][A-Za-z0-9_.-]*): drained in ([0-9.]+) s \((\d+) running(?: request\(s\) at removal|, (\d+) queued"
    r" at removal; budget ([0-9.]+) s; (\d+) straggler\(s\) (drained|aborted|expired))"
)
# rollout_plan.room's message when a node may leave
ROOM_RE = re.compile(r"\d+ of max_unavailable (\d+) out;")


# a line break and the next line's indentation: how a YAML result (callback_result_format = yaml,
# the project's ansible.cfg) folds a long message; a folded line break reads as one space
FOLD_RE = re.compile(r"[ \t]*\r?\n[ \t]+")


class FiguresError(ValueError):
    """A watcher sample or a traffic summary that does not have the shape its writer gives it."""


def drains(output: str) -> list[dict[str, object]]:
    """Every drain line of a play's output (old or new form, folded over lines or not), in order; a
    host's first line counts."""
    found: dict[str, dict[str, object]] = {}
    for m in DRAIN_RE.finditer(FOLD_RE.sub(" ", output)):
        try:
            seconds = float(m.group(2))
        except ValueError:  # "1.2.3": not a number the rollout prints
            continue
        found.setdefault(
            m.group(1),
            {
                "node": m.group(1),
                "seconds": seconds,
                "running": int(m.group(3)),
                "queued": int(m.group(4) or 0),
                "budget_s": m.group(5) or "?",
                "stragglers": int(m.group(6) or 0),
                "outcome": m.group(7) or "drained",
            },
        )
    return list(found.values())


def max_unavailable_used(output: str) -> int | None:
    """The max_unavailable the play's capacity check ran with (the smallest it printed); None when
    no node was let out of the gateway."""
    values = [int(m.group(1)) for m in ROOM_RE.finditer(FOLD_RE.sub(" ", output))]
    return min(values) if values else None


def healthy_counts(samples: list[dict], t0: float, t1: float) -> list[int]:
    """Healthy workers the gateway listed in each watcher sample between t0 and t1."""
    return [
        sum(1 for healthy in smp["workers"].values() if healthy)
        for smp in samples
        if t0 <= smp["t"] <= t1 and smp["workers"] is not None
    ]


def ms(value: object) -> str:
    return "-" if value is None else f"{float(value) * 1000:.0f} ms"


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def read_samples(text: str) -> list[dict]:
    """The watcher's JSON lines (blank lines skipped); a line of another shape is a FiguresError
    naming its line number."""
    samples = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            smp = json.loads(line)
        except (ValueError, RecursionError):
            raise FiguresError(f"watcher sample line {i} is not JSON") from None
        if not isinstance(smp, dict) or not _number(smp.get("t")):
            raise FiguresError(f"watcher sample line {i} has no time 't' (a number)")
        workers = smp.get("workers")
        if workers is not None and not (
            isinstance(workers, dict) and all(isinstance(k, str) and isinstance(v, bool) for k, v in workers.items())
        ):
            raise FiguresError(f"watcher sample line {i}: 'workers' is neither null nor {{url: true/false}}")
        samples.append({"t": float(smp["t"]), "workers": workers})
    return samples


def _count(doc: dict, key: str, where: str) -> int:
    value = doc.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise FiguresError(f"traffic summary: {where}{key!r} is not a count (got {value!r})")
    return value


def check_summary(doc: object) -> dict[str, object]:
    """The parts of traffic.py's summary the report reads, checked: counts, capacity, TTFT per phase."""
    if not isinstance(doc, dict):
        raise FiguresError("traffic summary is not a JSON object")
    out: dict[str, object] = {k: _count(doc, k, "") for k in ("sent", "ok", "failed", "in_flight")}
    reasons = {} if doc.get("reasons") is None else doc["reasons"]
    if not isinstance(reasons, dict) or not all(_count(reasons, k, "reasons ") >= 0 for k in reasons):
        raise FiguresError("traffic summary: 'reasons' is not {reason: count}")
    out["reasons"] = {str(k): v for k, v in reasons.items()}
    rate = doc.get("rate_rps")
    out["rate_rps"] = rate if _number(rate) else None
    cap = doc.get("capacity") if isinstance(doc.get("capacity"), dict) else {}
    out["capacity"] = {
        "tokens_per_s": cap.get("tokens_per_s") if _number(cap.get("tokens_per_s")) else None,
        "source": str(cap.get("source", "?"))[:40],
    }
    phases = {} if doc.get("phases") is None else doc["phases"]
    if not isinstance(phases, dict):
        raise FiguresError("traffic summary: 'phases' is not {phase: figures}")
    ttft = {}
    for name in ("before", "rollout"):
        phase = phases.get(name) or {}
        t = phase.get("ttft") if isinstance(phase, dict) else None
        t = t if isinstance(t, dict) else {}
        n = t.get("n", 0)
        ttft[name] = {
            "n": n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else 0,
            "p50_s": t.get("p50_s") if _number(t.get("p50_s")) else None,
            "p99_s": t.get("p99_s") if _number(t.get("p99_s")) else None,
        }
    out["ttft"] = ttft
    return out


def upgrade_report(
    output: str,
    summary: dict[str, object],
    samples: list[dict],
    *,
    window: tuple[float, float],
    nodes: int,
    token_mix: str = "",
) -> tuple[list[str], list[str]]:
    """(the figures as lines, the problems): a checked traffic summary (check_summary), the play's
    output, the watcher's samples and the rollout's window (t0, t1) in unix time."""
    lines, problems = [], []
    cap = summary["capacity"]
    reasons = summary["reasons"]
    mix = f", streams of {token_mix} tokens" if token_mix else ""
    lines.append(
        f"traffic through the gateway: {summary['rate_rps']} req/s open loop (capacity {cap['tokens_per_s']} tok/s,"
        f" {cap['source']}){mix}: sent {summary['sent']}, ok {summary['ok']}, failed {summary['failed']}"
        + (f" {reasons}" if reasons else "")
    )
    ttft = summary["ttft"]
    lines.append(
        "TTFT p50/p99: "
        + "; ".join(f"{n} {ms(t['p50_s'])}/{ms(t['p99_s'])} ({t['n']} requests)" for n, t in ttft.items())
    )
    found = drains(output)
    for d in found:
        lines.append(
            f"drain {d['node']}: {d['running']} running, {d['queued']} queued at removal, waited {d['seconds']} s"
            f" (budget {d['budget_s']} s, {d['stragglers']} straggler(s) {d['outcome']})"
        )
    waited = [d for d in found if d["running"] > 0 and d["seconds"] > 0]
    lines.append(f"drains that started with running requests and waited for them: {len(waited)} of {len(found)}")
    k = max_unavailable_used(output)
    floor = nodes - k if k is not None else nodes
    counts = healthy_counts(samples, *window)
    lowest = min(counts, default=None)
    lines.append(
        f"healthy workers in the gateway (sampled every ~0.5 s): min {lowest} during the rollout ({len(counts)}"
        f" samples); floor {floor} ({nodes} - max_unavailable {k if k is not None else '0: no node left'})"
    )
    if summary["sent"] == 0:
        problems.append("no request was sent")
    if summary["failed"]:
        problems.append(f"{summary['failed']} request(s) failed: {reasons}")
    if summary["in_flight"]:
        problems.append(f"{summary['in_flight']} request(s) still in flight when the traffic stopped")
    if lowest is None:
        problems.append("the watcher has no sample of the gateway's workers during the rollout")
    elif lowest < floor:
        problems.append(f"the gateway listed {lowest} healthy worker(s), below the floor {floor}")
    if not waited:
        problems.append(
            "no drain started with running requests and waited for them (streams that end within the gateway's"
            " delisting, about 5 s, end before the drain reads the count: use longer ones)"
        )
    missing = [n for n, t in ttft.items() if not t["n"]]
    if missing:
        problems.append(f"no TTFT measured {' or '.join(missing)} the rollout")
    return lines, problems


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description="Figures of a rolling upgrade under traffic (see the module's doc)")
    p.add_argument("--play-log", required=True, help="the play's output")
    p.add_argument("--traffic", required=True, help="traffic.py's --summary file")
    p.add_argument("--watch", required=True, help="watch.py's --out file")
    p.add_argument("--t0", type=float, required=True, help="the rollout's start (unix time)")
    p.add_argument("--t1", type=float, required=True, help="the rollout's end (unix time)")
    p.add_argument("--nodes", type=int, required=True, help="nodes behind the gateway")
    p.add_argument("--token-mix", default="", help="the streams' token counts, for the traffic line")
    args = p.parse_args(argv)
    try:
        with open(args.play_log, encoding="utf-8", errors="replace") as fh:
            output = fh.read()
        with open(args.traffic, encoding="utf-8") as fh:
            summary = check_summary(json.load(fh))
        with open(args.watch, encoding="utf-8") as fh:
            samples = read_samples(fh.read())
    except (OSError, ValueError, RecursionError) as exc:  # FiguresError is a ValueError, as json's errors are
        print(f"rollout_figures: {exc}", file=sys.stderr)
        return 2
    lines, problems = upgrade_report(
        output, summary, samples, window=(args.t0, args.t1), nodes=args.nodes, token_mix=args.token_mix
    )
    for line in lines:
        print(line)
    for problem in problems:
        print(f"FAILED: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
