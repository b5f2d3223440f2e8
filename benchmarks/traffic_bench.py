# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark of tests/tools/traffic.py at long streams (not a test).

The lab's traffic generator before this change kept every streamed body whole and parsed it at the
end; SGLang's native /generate stream is cumulative (each event repeats all text so far), so a
30,000-token stream is gigabytes. This runs the old generator (from git, ``--before-rev``) and the
current one side by side against tests/standins/sglang_api.py (its own process, at
``--standin-tokens-per-s`` shared by the running requests, as one node of molecule/fleet), each
client asking for ``--tokens`` tokens, and prints for each: wall time, requests ok/failed, peak
resident memory (ru_maxrss), client CPU seconds (user+system) per 1,000 tokens received, and the
stand-in's CPU seconds per 1,000 tokens. The old generator runs under ``prlimit --as`` (address
space, ``--before-mem-mb``) and a time limit, with at most 2 clients, so it cannot hurt a shared
machine; what stopped it is printed.

Usage:  python3 benchmarks/traffic_bench.py [--tokens 30000] [--clients 2,6] [--before-rev HEAD~1]
Loopback only; every run is bounded in time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from lib.standin import Standin, sglang_standin  # tests/lib: one way to start a stand-in

TRAFFIC = REPO / "tests" / "tools" / "traffic.py"


def run_client(argv: list[str], limit_s: float, mem_mb: int = 0) -> dict[str, object]:
    """Run one generator process: wall time, its own rusage (peak RSS, CPU), summary, how it ended."""
    prefix = ["prlimit", f"--as={mem_mb * 1024 * 1024}", "--"] if mem_mb else []
    start = time.monotonic()
    proc = subprocess.Popen([*prefix, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out: list[str] = []
    err: list[str] = []
    readers = [
        threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True),
        threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True),
    ]
    for t in readers:
        t.start()
    ended = ""
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - start > limit_s:
            proc.kill()
            ended = f"killed at the time limit of {limit_s:.0f} s"
            pid, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.05)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - start
    for t in readers:
        t.join(timeout=10)
    text, errors = "".join(out), "".join(err)
    ended = ended or f"exit {proc.returncode}"
    if "MemoryError" in errors:
        ended += f", MemoryError at the {mem_mb} MB address-space limit"
    summary: dict[str, object] = {}
    for line in text.splitlines():
        if line.startswith("TRAFFIC "):
            summary = json.loads(line[8:])
    return {
        "wall_s": wall,
        "summary": summary,
        "ended": ended,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "rss_mb": usage.ru_maxrss / 1024,
    }


def measure(label: str, script: Path, server: Standin, run: tuple[int, int, float, int]) -> dict[str, object]:
    """One generator run of (clients, tokens per request, time limit, address-space limit in MB)."""
    clients, tokens, limit_s, mem_mb = run
    argv = [sys.executable, str(script), "--url", server.url, "--concurrency", str(clients)]
    argv += ["--max-new-tokens", str(tokens), "--stream", "--duration-s", "0.5", "--report-every-s", "1000"]
    s0 = server.cpu_s()
    res = run_client(argv, limit_s, mem_mb)
    summary = res["summary"]
    ok = summary.get("ok", 0)
    return {
        "label": label,
        "clients": clients,
        "wall_s": res["wall_s"],
        "ok": summary.get("ok", "-"),
        "failed": summary.get("failed", "-"),
        "ended": res["ended"],
        "cpu_s": res["cpu_s"],
        "rss_mb": res["rss_mb"],
        "standin_cpu_s": server.cpu_s() - s0,
        "tokens": ok * tokens if isinstance(ok, int) else 0,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", type=int, default=30000)
    p.add_argument("--clients", default="2,6", help="client counts for the current generator")
    p.add_argument("--before-rev", default="1a51159", help="git revision of the old generator ('' to skip it)")
    p.add_argument("--before-clients", type=int, default=2)
    p.add_argument("--before-mem-mb", type=int, default=3072)
    p.add_argument("--before-limit-s", type=float, default=60)
    p.add_argument("--standin-tokens-per-s", type=float, default=3000)
    args = p.parse_args()
    if args.before_clients > 2:
        raise SystemExit("--before-clients: at most 2 (the old generator grows without bound)")
    rows = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        with sglang_standin(tmp, env={"STANDIN_TOKENS_PER_S": str(args.standin_tokens_per_s)}) as server:
            if args.before_rev:
                if not shutil.which("prlimit"):
                    raise SystemExit("prlimit (util-linux) is needed to cap the old generator's memory")
                old = tmp / "traffic_before.py"
                old.write_text(
                    subprocess.run(
                        ["git", "-C", str(REPO), "show", f"{args.before_rev}:tests/tools/traffic.py"],
                        capture_output=True,
                        text=True,
                        check=True,
                    ).stdout
                )
                run = (args.before_clients, args.tokens, args.before_limit_s, args.before_mem_mb)
                rows.append(measure(f"before ({args.before_rev})", old, server, run))
            for clients in (int(c) for c in args.clients.split(",")):
                limit = 30 + 3 * clients * args.tokens / args.standin_tokens_per_s
                rows.append(measure("after", TRAFFIC, server, (clients, args.tokens, limit, 0)))
    print(
        f"traffic generator at {args.tokens}-token native cumulative streams, stand-in at"
        f" {args.standin_tokens_per_s:.0f} tok/s shared by the running requests"
    )
    print(
        f"  {'generator':<18} {'clients':>7} {'wall s':>7} {'ok':>4} {'failed':>6} {'peak RSS MB':>11}"
        f" {'client cpu s/1k tok':>19} {'stand-in cpu s/1k tok':>21}  ended"
    )
    for row in rows:
        per_k = f"{row['cpu_s'] / row['tokens'] * 1000:.3f}" if row["tokens"] else f"({row['cpu_s']:.1f} s, no tokens)"
        sper_k = f"{row['standin_cpu_s'] / row['tokens'] * 1000:.3f}" if row["tokens"] else "-"
        print(
            f"  {row['label']:<18} {row['clients']:>7} {row['wall_s']:>7.1f} {row['ok']!s:>4} {row['failed']!s:>6}"
            f" {row['rss_mb']:>11.1f} {per_k:>19} {sper_k:>21}  {row['ended']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
