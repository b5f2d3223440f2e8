# Copyright (c) gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Start the SMG gateway (``smg launch``): API key from the environment, drained workers left out.

smg reads its API key only from the ``--api-key`` flag; a flag is visible to every local user
in ``ps`` and ``/proc/<pid>/cmdline``. This launcher runs with smg's own venv interpreter, takes
the key from ``SGLANG_GATEWAY_API_KEY`` (set by systemd from a root-only 0600 file), removes it
from the environment, parses the other flags with smg's own parser (``smg.launch_router``) and
hands the key to the router in-process, so it never appears in an argv.

smg starts with the workers of ``--worker-urls`` and forgets workers removed through its API when
it restarts. A rolling upgrade holds a node out of rotation with a file in
``--out-of-rotation-dir`` (one file per node, holding its worker URL; written by the role's
remove_worker, deleted by add_worker): those URLs are left out of ``--worker-urls`` here, so a
gateway restarted mid-rollout does not route to a node that is being drained or upgraded.

Usage: <smg venv>/bin/python smg-gateway-launch.py [--out-of-rotation-dir DIR] [smg launch flags...]
(no --api-key: it is refused)
"""

from __future__ import annotations

import os
import sys

from smg.launch_router import launch_router, parse_router_args

KEY_ENV = "SGLANG_GATEWAY_API_KEY"
OUT_FLAG = "--out-of-rotation-dir"


def held_out(directory: str) -> set[str]:
    """The worker URLs the files in ``directory`` name (no directory: none)."""
    urls: set[str] = set()
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return urls
    for name in names:
        with open(os.path.join(directory, name), encoding="utf-8") as handle:
            url = handle.read().strip().rstrip("/")
        if url:
            urls.add(url)
    return urls


def main(argv: list[str]) -> int:
    if any(a == "--api-key" or a.startswith("--api-key=") for a in argv):
        sys.stderr.write(f"smg-gateway-launch: pass the API key in {KEY_ENV}, not as --api-key\n")
        return 2
    out_dir = ""
    if argv[:1] == [OUT_FLAG]:
        if len(argv) < 2:
            sys.stderr.write(f"smg-gateway-launch: {OUT_FLAG} needs a directory\n")
            return 2
        out_dir, argv = argv[1], argv[2:]
    key = os.environ.pop(KEY_ENV, "")
    router_args = parse_router_args(argv)
    if out_dir:
        out = held_out(out_dir)
        kept = [u for u in router_args.worker_urls if u.rstrip("/") not in out]
        if len(kept) != len(router_args.worker_urls):
            left = sorted(u for u in router_args.worker_urls if u.rstrip("/") in out)
            sys.stderr.write(
                f"smg-gateway-launch: {len(left)} worker(s) held out of rotation by a rolling upgrade"
                f" ({out_dir}): {' '.join(left)}; starting with {len(kept)}\n"
            )
            router_args.worker_urls = kept
    if key:
        router_args.api_key = key
    launch_router(router_args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
