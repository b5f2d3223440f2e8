# Copyright (c) gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Watcher of molecule/fleet's drills, run on the fleet host: what the gateway routes to, sampled.

Every --every-s seconds until --stop-file exists, one JSON line to --out:
  {"t": unix time, "workers": {url: is_healthy} or null when the gateway did not answer,
   "marks": [worker URLs held out of rotation], "up": {url: the node's port accepts connections}}
The drill reads the lines afterwards and checks them against the rollout's own steps.
Usage: python3 watch.py --out FILE --stop-file FILE --key-env VAR --node URL [--node URL ...]
"""

from __future__ import annotations

import argparse
import json
import os
import time
import urllib.request

MARKS = "/var/lib/sglang-gateway/out-of-rotation"


def get(url: str, key: str, timeout: float) -> tuple[int, bytes]:
    """(status, body); -2 when the connection was refused (nothing listens), -1 on other errors."""
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""
    except urllib.error.URLError as exc:
        return (-2 if isinstance(exc.reason, ConnectionRefusedError) else -1), b""
    except OSError as exc:
        return (-2 if isinstance(exc, ConnectionRefusedError) else -1), b""


def sample(gateway: str, nodes: list[str], key: str) -> dict[str, object]:
    status, body = get(f"{gateway}/workers", key, 1.0)
    workers = None
    if status == 200:
        workers = {w["url"].rstrip("/"): bool(w.get("is_healthy")) for w in json.loads(body)["workers"]}
    marks = []
    if os.path.isdir(MARKS):
        for name in sorted(os.listdir(MARKS)):
            with open(os.path.join(MARKS, name), encoding="utf-8") as handle:
                marks.append(handle.read().strip().rstrip("/"))
    # down: the node's port refuses connections (its server is not running); a slow answer on a
    # loaded machine is not "down"
    up = {n: get(f"{n}/health", key, 2.0)[0] != -2 for n in nodes}
    return {"t": round(time.time(), 3), "workers": workers, "marks": marks, "up": up}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--gateway", default="http://127.0.0.1:8080")
    p.add_argument("--node", action="append", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--stop-file", required=True)
    p.add_argument("--key-env", required=True)
    p.add_argument("--every-s", type=float, default=0.2)
    p.add_argument("--max-s", type=float, default=3600)
    args = p.parse_args()
    key = os.environ.get(args.key_env, "")
    deadline = time.monotonic() + args.max_s
    with open(args.out, "w", encoding="utf-8") as out:
        while not os.path.exists(args.stop_file) and time.monotonic() < deadline:
            out.write(json.dumps(sample(args.gateway, args.node, key)) + "\n")
            out.flush()
            time.sleep(args.every_s)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
