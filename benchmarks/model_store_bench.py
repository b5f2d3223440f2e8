# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Download and verification throughput of the model store, against the Hub stand-in.

Runs gpufleet.sglang.model_store_fetch (through `ansible`, with the real huggingface_hub in the
venv the integration tests keep in $GPUFLEET_CACHE/model-store-hf-venv) on a synthetic model of
--size-mb MiB served on loopback, then re-verifies the stored snapshot with verify=full, and prints
MiB/s for both and how long verifying a 10 GB store takes at the measured hashing rate.

    python3 benchmarks/model_store_bench.py [--size-mb 512]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("GPUFLEET_CACHE", Path.home() / ".cache" / "gpufleet"))
VENV = CACHE / "model-store-hf-venv"


def fetch(store: Path, url: str, verify: str) -> dict:
    args = (
        f"store={store} name=bench repo=gpufleet-test/tiny-moe revision=main endpoint={url} "
        f"verify={verify} reserve_bytes=0"
    )
    out = subprocess.run(
        [
            str(REPO / ".venv" / "bin" / "ansible"),
            "localhost",
            "-m",
            "gpufleet.sglang.model_store_fetch",
            "-a",
            args,
            "-e",
            f"ansible_python_interpreter={VENV}/bin/python",
            "-o",
        ],
        env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_LOCALHOST_WARNING": "false"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out.split("=>", 1)[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=512)
    args = parser.parse_args()
    if not (VENV / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", "huggingface_hub==2.4.0"], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        port_file = Path(tmp) / "port"
        hub = subprocess.Popen(
            [
                sys.executable,
                str(REPO / "tests/standins/hf_hub.py"),
                "--port-file",
                str(port_file),
                "--size-mb",
                str(args.size_mb),
            ]
        )
        try:
            while not port_file.exists():
                time.sleep(0.05)
            url = f"http://127.0.0.1:{port_file.read_text()}"
            store = Path(tmp) / "store"
            began = time.monotonic()
            first = fetch(store, url, "quick")
            wall = time.monotonic() - began
            began = time.monotonic()
            full = fetch(store, url, "full")
            full_wall = time.monotonic() - began
        finally:
            hub.terminate()
            hub.wait()
    total_mib = first["total_bytes"] / 1048576
    print(f"model: {first['file_count']} files, {total_mib:.1f} MiB (stand-in on loopback, this machine)")
    print(f"download:        {first['download_mb_per_s']:8.1f} MiB/s  (module's own timing of the transfer)")
    print(f"verify after it: {first['verify_mb_per_s']:8.1f} MiB/s  (sha256 + git blob id of every file)")
    print(f"first run wall:  {wall:8.1f} s     (ansible, resolve, list, download, verify, rename)")
    print(
        f"verify=full:     {full['verify_mb_per_s']:8.1f} MiB/s  (re-hash of the stored snapshot; "
        f"run wall {full_wall:.1f} s)"
    )
    ten_gb_s = 10 * 1000**3 / 1048576 / max(full["verify_mb_per_s"], 1e-9)
    print(f"a 10 GB store verifies in about {ten_gb_s:.0f} s ({ten_gb_s / 60:.1f} min) at that rate")


if __name__ == "__main__":
    main()
