# Copyright (c) gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Start the SMG gateway (``smg launch``) with its API key taken from the environment.

smg reads its API key only from the ``--api-key`` flag; a flag is visible to every local user
in ``ps`` and ``/proc/<pid>/cmdline``. This launcher runs with smg's own venv interpreter, takes
the key from ``SGLANG_GATEWAY_API_KEY`` (set by systemd from a root-only 0600 file), removes it
from the environment, parses the other flags with smg's own parser (``smg.launch_router``) and
hands the key to the router in-process, so it never appears in an argv.

Usage: <smg venv>/bin/python smg-gateway-launch.py [smg launch flags...]   (no --api-key: it is refused)
"""

from __future__ import annotations

import os
import sys

from smg.launch_router import launch_router, parse_router_args

KEY_ENV = "SGLANG_GATEWAY_API_KEY"


def main(argv: list[str]) -> int:
    if any(a == "--api-key" or a.startswith("--api-key=") for a in argv):
        sys.stderr.write(f"smg-gateway-launch: pass the API key in {KEY_ENV}, not as --api-key\n")
        return 2
    key = os.environ.pop(KEY_ENV, "")
    router_args = parse_router_args(argv)
    if key:
        router_args.api_key = key
    launch_router(router_args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
