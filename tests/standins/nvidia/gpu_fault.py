# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""STAND-IN fault switch: make a stand-in GPU node show what a failing card shows, for gpu_health.

    gpu_fault.py inject xid79       --kernel-log FILE [--gpu N]   # Xid 79 line for GPU N: failed
    gpu_fault.py inject link-x8     [--pointer FILE]              # GPU 3 at Gen3 x8 under load: degraded
    gpu_fault.py inject power-brake [--pointer FILE]              # GPU 5 in a power brake: degraded
    gpu_fault.py clear              [--kernel-log FILE] [--pointer FILE]

xid79 appends the driver's real line (``NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, GPU
has fallen off the bus.``, the shape of tests/unit/fixtures/nvidia/kernel-log/journal-xid79-gpu-lost.txt, in
``journalctl -k -o short-iso`` form) for the bus of GPU N of the stand-in's profile to the kernel log the node's
gpu_health reads (``kernel_log: file``; sglang_server_health_kernel_log_path). Only that node sees it, also
where several nodes share one host (the fleet scenario: one kernel log per node).
link-x8 and power-brake repoint the nvidia-smi stand-in (its pointer file, default
/etc/gpufleet-standin/nvidia-smi.json, the file the stand-in reads on every call) at a profile of this
host's state directory that serves the variant's ``-q -x`` report (tests/unit/fixtures/nvidia/rtxpro6000-health/)
and, through a state file, the same load and fault in the ``--query-gpu`` fields. The old pointer is kept
next to it; ``clear`` puts it back and removes the lines this tool wrote (host field ``standin-fault``).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PROFILES = os.path.join(HERE, "profiles")
POINTER = "/etc/gpufleet-standin/nvidia-smi.json"
MARK = " standin-fault kernel: "
# fault -> the variant profile (tests/standins/nvidia/profiles) whose -q -x report shows it
VARIANT_PROFILES = {"link-x8": "rtxpro6000-8gpu-link-x8-gen3", "power-brake": "rtxpro6000-8gpu-power-brake"}
VARIANT_NAMES = {"link-x8": "link-x8-gen3", "power-brake": "power-brake"}
FAULTS = ("xid79", *VARIANT_PROFILES)


def load_json(path: str) -> dict:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def write(path: str, text: str) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


def profile_gpus(pointer: str) -> list[dict]:
    """The GPUs of the profile the stand-in serves now (its pointer, or the 8-GPU profile)."""
    path = pointer if os.path.exists(pointer) else os.path.join(PROFILES, "rtxpro6000-8gpu.json")
    data = load_json(path)
    while "gpus" not in data:
        name = data.get("profile") or data.get("base")
        if not name:
            raise SystemExit(f"gpu_fault: {path} names no profile")
        path = os.path.join(os.path.dirname(path), name)
        data = load_json(path)
    return data["gpus"]


def xid_line(bus_id: str, when: datetime.datetime) -> str:
    """The driver's Xid 79 line for the nvidia-smi bus id ``00000000:01:00.0`` (Xid addresses have no function)."""
    domain, bus, rest = bus_id.split(":")
    address = f"{domain[-4:]}:{bus}:{rest.split('.')[0]}".lower()
    stamp = when.strftime("%Y-%m-%dT%H:%M:%S%z")
    return f"{stamp}{MARK}NVRM: Xid (PCI:{address}): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"


def variant_state(fault: str) -> dict:
    """The --query-gpu values of the fault's variant (its load on every GPU, its fault on its GPU), as the
    stand-in's state file ({"gpus": {"*"|"<index>": {key: value}}}), read from the variants' build script."""
    build_path = os.path.join(HERE, "..", "..", "unit", "fixtures", "nvidia", "rtxpro6000-health", "build.py")
    spec = importlib.util.spec_from_file_location("rtxpro6000_health_build", build_path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"gpu_fault: cannot load {build_path}")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    load, overrides, _absent = build.VARIANTS[VARIANT_NAMES[fault]]
    gpus: dict[str, dict] = {"*": dict(build.BUSY) if load == "busy" else {}}
    if load == "busy":  # as build.py: a busy GPU's link at its maximum generation
        for gpu in profile_gpus(os.path.join(PROFILES, "rtxpro6000-8gpu.json")):
            gpus[str(gpu["index"])] = {"pcie_gen_current": gpu["pcie_gen_max"]}
    for index, values in overrides.items():
        gpus.setdefault(str(index), {}).update({key: value for key, value in values.items() if "/" not in key})
    return {"gpus": gpus}


def inject(fault: str, args: argparse.Namespace) -> str:
    if fault == "xid79":
        if not args.kernel_log:
            raise SystemExit("gpu_fault: xid79 needs --kernel-log (the file gpu_health reads)")
        gpus = profile_gpus(args.pointer)
        match = [gpu for gpu in gpus if gpu["index"] == args.gpu]
        if not match:
            raise SystemExit(f"gpu_fault: the profile has no GPU {args.gpu}")
        line = xid_line(match[0]["pci_bus_id"], datetime.datetime.now(datetime.timezone.utc))
        with open(args.kernel_log, "a", encoding="utf-8") as handle:
            handle.write(line)
        return line.strip()
    state_dir = args.state_dir
    os.makedirs(state_dir, exist_ok=True)
    saved = f"{args.pointer}.before-fault"
    if not os.path.exists(saved):
        with open(args.pointer, encoding="utf-8") as handle:
            write(saved, handle.read())
    state = os.path.join(state_dir, "gpu-fault-state.json")
    write(state, json.dumps(variant_state(fault), indent=1) + "\n")
    profile = os.path.join(state_dir, "gpu-fault-profile.json")
    base = os.path.join(PROFILES, VARIANT_PROFILES[fault] + ".json")
    write(profile, json.dumps({"base": base, "state_path": state}, indent=1) + "\n")
    write(args.pointer, json.dumps({"profile": profile}) + "\n")
    return f"{args.pointer} -> {base}"


def clear(args: argparse.Namespace) -> str:
    done = []
    if args.kernel_log and os.path.exists(args.kernel_log):
        with open(args.kernel_log, encoding="utf-8") as handle:
            lines = handle.readlines()
        kept = [line for line in lines if MARK not in line]
        write(args.kernel_log, "".join(kept))
        done.append(f"{len(lines) - len(kept)} Xid line(s) removed from {args.kernel_log}")
    saved = f"{args.pointer}.before-fault"
    if os.path.exists(saved):
        os.replace(saved, args.pointer)
        done.append(f"{args.pointer} restored")
    return "; ".join(done) or "nothing to clear"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("action", choices=["inject", "clear"])
    parser.add_argument("fault", nargs="?", choices=FAULTS)
    parser.add_argument("--kernel-log", help="the kernel log file the node's gpu_health reads")
    parser.add_argument("--gpu", type=int, default=0, help="the GPU of the Xid line (default 0)")
    parser.add_argument("--pointer", default=os.environ.get("STANDIN_NVIDIA_SMI_POINTER", POINTER))
    parser.add_argument("--state-dir", default="/var/lib/gpufleet-standin")
    args = parser.parse_args(argv)
    if args.action == "inject" and not args.fault:
        parser.error("inject needs a fault: " + ", ".join(FAULTS))
    print(inject(args.fault, args) if args.action == "inject" else clear(args))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
