# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What SGLang's ``--stream-interval`` costs the test machine (not a test).

molecule/fleet's drills stream long OpenAI completions through the gateway at 60% of the fleet's
capacity; every event is encoded by the stand-in, forwarded by the gateway and checked by
tests/tools/traffic.py. This runs one node's share of that traffic, side by side for each interval of
``--intervals``: tests/standins/sglang_api.py at the fleet's settings (3,000 tok/s shared, 375 tok/s
per request) with ``--stream-interval N``, and traffic.py open loop at ``--load-fraction`` of 3,000
tok/s, streams of 4,000/8,000/12,000 tokens, for ``--duration-s`` (then the streams in flight
finish). It prints, per interval: requests sent/ok/failed, tokens received, the CPU seconds
(user+system) of the stand-in and of the client and their sum per 1,000 tokens, and TTFT p50/p99.
The gateway (not run here) forwards each event too, so the fleet saves more than this shows.

Usage:  python3 benchmarks/stream_interval_bench.py [--intervals 1,8] [--duration-s 60]
Loopback only; every run is bounded in time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from lib.standin import sglang_standin  # tests/lib: one way to start a stand-in

TRAFFIC = REPO / "tests" / "tools" / "traffic.py"
NODE_TOKENS_PER_S = 3000


def run(interval: int, args: argparse.Namespace, tmp: Path) -> dict[str, object]:
    """One run in its own directory ``tmp`` (its port file, its summary)."""
    tmp.mkdir()
    env = {"STANDIN_TOKENS_PER_S": str(NODE_TOKENS_PER_S), "STANDIN_REQUEST_TOKENS_PER_S": "375"}
    env["STANDIN_STARTUP_DELAY_S"] = "0"
    with sglang_standin(tmp, "--stream-interval", str(interval), env=env, timeout=20) as server:
        summary = tmp / "summary.json"
        client_argv = [sys.executable, str(TRAFFIC), "--url", server.url, "--api", "openai", "--stream"]
        client_argv += ["--load-fraction", str(args.load_fraction), "--capacity-tokens-per-s", str(NODE_TOKENS_PER_S)]
        client_argv += ["--max-new-tokens", "4000,8000,12000", "--duration-s", str(args.duration_s), "--seed", "1"]
        client_argv += ["--report-every-s", "3600", "--summary", str(summary)]
        before = os.times()
        client = subprocess.run(client_argv, stdout=subprocess.DEVNULL, timeout=args.duration_s + 120, check=False)
        after = os.times()
        server_cpu = server.cpu_s()
    client_cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    if client.returncode != 0 or not summary.exists():
        raise SystemExit(f"traffic.py (interval {interval}) exited {client.returncode}")
    totals = json.loads(summary.read_text(encoding="utf-8"))
    tokens = int(totals.get("tokens", 0)) or 1
    return {
        "interval": interval,
        "sent/ok/failed": f"{totals['sent']}/{totals['ok']}/{totals['failed']}",
        "tokens": tokens,
        "server_cpu_s": round(server_cpu, 1),
        "client_cpu_s": round(client_cpu, 1),
        "cpu_s_per_1k_tokens": round(1000 * (server_cpu + client_cpu) / tokens, 3),
        "ttft_p50_p99_ms": f"{1000 * totals['ttft']['p50_s']:.1f}/{1000 * totals['ttft']['p99_s']:.1f}",
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    p.add_argument("--intervals", default="1,8", help="comma-separated --stream-interval values")
    p.add_argument("--duration-s", type=float, default=60.0)
    p.add_argument("--load-fraction", type=float, default=0.6)
    args = p.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="stream-interval-bench-") as tmp:
        for i, interval in enumerate(int(v) for v in args.intervals.split(",")):
            rows.append(run(interval, args, Path(tmp) / str(i)))
            print(json.dumps(rows[-1]), flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    cols = list(rows[0])
    print(" | ".join(cols))
    for row in rows:
        print(" | ".join(str(row[c]) for c in cols))
    return 0 if all(r["sent/ok/failed"].endswith("/0") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
