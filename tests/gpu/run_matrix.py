# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Run each GPU workload without and with the sglang-server unit's sandbox; a markdown table.

    sudo python3 tests/gpu/run_matrix.py [--out DIR] [--workloads a,b] [--budget-s 540]

Columns: no sandbox (as root, as the machine gives it), the sandbox with SystemCallFilter=
@system-service alone (the unit before pidfd_getfd was added), and the sandbox with the role's
current default (roles/sglang_server/defaults/main.yml: sglang_server_syscall_filter). The other
directives are read from the unit template (RestrictAddressFamilies=) and the role defaults
(DeviceAllow=). Needs root: it builds the mount namespace, drops to a uid per sandbox column (so
that the kernel's audit lines of refused calls can be told apart) and reads /dev/kmsg.
Writes DIR/sandbox-matrix.md, DIR/sandbox-matrix.json and DIR/sandbox-logs.txt.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))

import workloads  # the names of the workloads; nothing GPU is imported here
import yaml
from sandbox import SETS, load_sets

SETS_NAME = f"tests/gpu/{SETS.name}"

ROLE_DEFAULTS = REPO / "roles/sglang_server/defaults/main.yml"
UNIT_TEMPLATE = REPO / "roles/sglang_server/templates/sglang-server.service.j2"
WORK = Path("/srv/gpufleet-sandbox")
NCCL_VARIANTS = (
    {},
    {"NCCL_P2P_DISABLE": "1"},
    {"NCCL_SHM_DISABLE": "1"},
    {"NCCL_CUMEM_ENABLE": "0"},
    {"NCCL_CUMEM_ENABLE": "1"},
)
# DevicePolicy=closed: the pseudo devices systemd always adds (systemd.resource-control(5))
PSEUDO = {(1, 3): "/dev/null", (1, 5): "/dev/zero", (1, 7): "/dev/full", (1, 8): "/dev/random", (1, 9): "/dev/urandom"}
AUDIT = re.compile(
    r"type=1326 .*?\buid=(\d+) .*?\bpid=(\d+) .*?\bcomm=\"([^\"]*)\".*?\bsyscall=(\d+) .*?\bcode=(0x[0-9a-f]+)"
)


def role_value(name: str) -> object:
    return yaml.safe_load(ROLE_DEFAULTS.read_text(encoding="utf-8"))[name]


def unit_families() -> list[str]:
    match = re.search(r"^RestrictAddressFamilies=(.+)$", UNIT_TEMPLATE.read_text(encoding="utf-8"), re.M)
    assert match, f"no RestrictAddressFamilies= in {UNIT_TEMPLATE}"
    return match.group(1).split()


def char_majors(proc_devices: str = "/proc/devices") -> dict[str, set[int]]:
    majors: dict[str, set[int]] = {}
    section = ""
    for line in Path(proc_devices).read_text(encoding="utf-8").splitlines():
        if line.endswith("devices:"):
            section = line
            continue
        parts = line.split()
        if section.startswith("Character") and len(parts) == 2:
            majors.setdefault(parts[1], set()).add(int(parts[0]))
    return majors


def device_policy(entries: list[str]) -> list[tuple[set[int], str, str]]:
    """DeviceAllow= entries as (majors, access, entry); names resolved in /proc/devices like systemd."""
    majors = char_majors()
    policy = []
    for entry in entries:
        spec, _sep, access = entry.partition(" ")
        if spec.startswith("char-"):
            policy.append((majors.get(spec[5:], set()), access or "rwm", entry))
    return policy


def check_device(major: int, minor: int, access: str, policy) -> str:
    if (major, minor) in PSEUDO:
        return "allowed (DevicePolicy=closed pseudo device)"
    for majors, allowed, entry in policy:
        if major in majors and set(access) <= set(allowed):
            return f"allowed ({entry})"
    return "OUTSIDE DeviceAllow"


class Monitor(threading.Thread):
    """Samples the open device nodes (/proc/PID/fd, /proc/PID/maps) of a process tree every 10 ms."""

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.pids: set[int] = {root}
        self.devices: dict[str, set[str]] = {}
        self.stop = threading.Event()

    def tree(self) -> set[int]:
        children: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text()
                except OSError:
                    continue
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry))
        found, todo = set(), [self.root]
        while todo:
            pid = todo.pop()
            found.add(pid)
            todo.extend(children.get(pid, []))
        return found

    def sample(self) -> None:
        pids = self.tree()
        self.pids |= pids
        for pid in pids:
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
            except OSError:
                continue
            for fd in fds:
                try:
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                    flags = int(Path(f"/proc/{pid}/fdinfo/{fd}").read_text().split("flags:")[1].split()[0], 8)
                except (OSError, IndexError, ValueError):
                    continue
                if target.startswith("/dev/") and not target.startswith(("/dev/shm/", "/dev/pts/")):
                    self.devices.setdefault(target, set()).add({0: "r", 1: "w", 2: "rw"}[flags & 3])

    def run(self) -> None:
        while not self.stop.is_set():
            self.sample()
            time.sleep(0.01)


class Kmsg:
    """The kernel log from now on (seccomp's audit lines of refused calls)."""

    def __init__(self) -> None:
        try:
            self.fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
            os.lseek(self.fd, 0, os.SEEK_END)
            self.error = ""
        except OSError as exc:
            self.fd, self.error = -1, f"/dev/kmsg: {exc}"

    def read(self) -> list[str]:
        lines = []
        while self.fd >= 0:
            try:
                lines.append(os.read(self.fd, 8192).decode(errors="replace"))
            except BlockingIOError:
                break
            except OSError as exc:  # EPIPE: records overwritten; go on
                if exc.errno != 32:
                    break
        return lines


def syscall_names(sets: dict) -> dict[int, str]:
    return {nr: name for name, nr in sets["x86_64_numbers"].items()}


def run_one(name: str, column: dict, env_extra: dict[str, str], sets: dict, timeout: float) -> dict:
    env = dict(os.environ, PYTHONUNBUFFERED="1", **env_extra)
    cmd = [sys.executable, str(WORK / "harness" / "workloads.py"), name]
    if column["filter"] is not None:
        home, cache = WORK / f"home-{column['uid']}", WORK / f"cache-{column['uid']}"
        env.update(HOME=str(home), USER="sglang", LOGNAME="sglang", SGLANG_CACHE_DIR=str(cache))
        sandbox = [
            sys.executable,
            str(WORK / "harness" / "sandbox.py"),
            "--uid",
            str(column["uid"]),
            "--gid",
            str(column["uid"]),
        ]
        for entry in column["filter"]:
            sandbox += ["--filter", entry]
        for path in (cache, home):
            sandbox += ["--read-write", str(path)]
        sandbox += ["--families", " ".join(column["families"]), "--chdir", str(home), "--"]
        cmd = sandbox + cmd
    started = time.monotonic()
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    monitor = Monitor(proc.pid)
    monitor.start()
    try:
        out, _err = proc.communicate(timeout=timeout)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, _err = proc.communicate()
        code = "timeout"
    monitor.stop.set()
    monitor.join()
    lines = out.splitlines()
    status = "PASS" if code == 0 else "SKIP" if code == workloads.SKIP else "FAIL"
    applied = next((json.loads(line.split(" ", 1)[1]) for line in lines if line.startswith("SANDBOX_APPLIED ")), None)
    error = next((line for line in reversed(lines) if re.search(r"Error|error|denied|not permitted", line)), "")
    last = lines[-1] if lines else ""
    return {
        "workload": name,
        "env": env_extra,
        "column": column["title"],
        "status": status,
        "exit": code,
        "seconds": round(time.monotonic() - started, 1),
        "detail": last if status != "FAIL" else (error or last),
        "devices": sorted(f"{path} {'/'.join(sorted(acc))}" for path, acc in monitor.devices.items()),
        "applied": applied,
        "output_tail": lines[-40:],
    }


def denied_for(kmsg_lines: list[str], uid: int, names: dict[int, str]) -> list[str]:
    found = set()
    for line in kmsg_lines:
        match = AUDIT.search(line)
        if match and int(match.group(1)) == uid:
            nr = int(match.group(4))
            found.add(f"{names.get(nr, f'#{nr}')} ({match.group(3)})")
    return sorted(found)


def versions() -> dict[str, str]:
    code = (
        "import torch, triton, platform; "
        "print(torch.__version__, torch.version.cuda, '.'.join(map(str, torch.cuda.nccl.version())), "
        "triton.__version__, platform.python_version())"
    )
    info: dict[str, str] = {}
    try:
        torch_v, cuda_v, nccl_v, triton_v, py_v = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
        ).stdout.split()
        info.update(torch=torch_v, cuda=cuda_v, nccl=nccl_v, triton=triton_v, python=py_v)
    except (subprocess.SubprocessError, ValueError) as exc:
        info["torch"] = f"unknown ({exc})"
    try:
        smi = (
            subprocess.run(
                ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                check=False,
                capture_output=True,
                text=True,
            )
            .stdout.strip()
            .splitlines()
        )
    except OSError:
        smi = []
    info["gpus"] = str(len(smi))
    info["gpu"] = smi[0].split(",")[0].strip() if smi else "none"
    info["driver"] = smi[0].split(",")[1].strip() if smi else "none"
    info["kernel"] = os.uname().release
    info["pid1"] = Path("/proc/1/comm").read_text().strip()
    info["systemd_analyze"] = shutil.which("systemd-analyze") or "missing (the shipped syscall_sets.json was used)"
    info["date"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return info


def cell(result: dict | None) -> str:
    if result is None:
        return "not run (time budget)"
    text = result["status"]
    if result["status"] == "FAIL":
        text += f": `{result['detail'][:140].replace('|', '/')}`"
    return text


def render(info: dict, columns: list[dict], rows: list[tuple[str, dict]], results: dict, applied) -> str:
    out = [
        "| machine | GPUs | driver | torch | CUDA | NCCL | Triton | kernel | PID 1 | date |",
        "|---|---|---|---|---|---|---|---|---|---|",
        f"| {info.get('gpu')} | {info.get('gpus')} | {info.get('driver')} | {info.get('torch')} | {info.get('cuda')} | "
        f"{info.get('nccl')} | {info.get('triton')} | {info.get('kernel')} | {info.get('pid1')} | {info.get('date')} |",
        "",
        f"Syscall table: {info.get('syscall_table')}; systemd-analyze on this machine: {info.get('systemd_analyze')}.",
        f"Sandbox applied: {json.dumps(applied) if applied else 'n/a'}",
        "",
        "| workload | "
        + " | ".join(c["title"] for c in columns)
        + " | refused calls (audit log) | device nodes the sandboxed runs opened |",
        "|---|" + "---|" * len(columns) + "---|---|",
    ]
    for label, _env in rows:
        cells = [cell(results.get((label, c["title"]))) for c in columns]
        denied = "; ".join(
            f"{c['title']}: {', '.join(results[(label, c['title'])].get('denied', []))}"
            for c in columns
            if results.get((label, c["title"])) and results[(label, c["title"])].get("denied")
        )
        devs = sorted(
            {
                d
                for c in columns
                if c["filter"] is not None
                for d in (results.get((label, c["title"])) or {}).get("device_check", [])
            }
        )
        out.append(f"| {label} | " + " | ".join(cells) + f" | {denied or 'none'} | {'<br>'.join(devs) or '-'} |")
    return "\n".join(out) + "\n"


def make_columns() -> list[dict]:
    """No sandbox; SystemCallFilter=@system-service alone (the unit before pidfd_getfd); the role's default."""
    current = list(role_value("sglang_server_syscall_filter"))
    families = unit_families()
    columns = [
        {"title": "no sandbox", "filter": None},
        {"title": "@system-service only", "filter": ["@system-service"], "uid": 61001, "families": families},
        {"title": "unit default: " + " ".join(current), "filter": current, "uid": 61002, "families": families},
    ]
    return [c for c in columns if not (c["title"] == "@system-service only" and set(current) == {"@system-service"})]


def prepare_workdir(columns: list[dict]) -> None:
    """The harness outside /root and /home (ProtectHome hides them); a home and cache dir per sandbox uid."""
    (WORK / "harness").mkdir(parents=True, exist_ok=True)
    for item in ("workloads.py", "sandbox.py", "syscall_sets.json"):
        shutil.copy(HERE / item, WORK / "harness" / item)
    for column in columns:
        if column["filter"] is None:
            continue
        for sub in ("home", "cache"):  # ReadWritePaths=
            path = WORK / f"{sub}-{column['uid']}"
            path.mkdir(parents=True, exist_ok=True)
            os.chown(path, column["uid"], column["uid"])


def make_rows(chosen: list[str]) -> list[tuple[str, dict]]:
    rows: list[tuple[str, dict]] = []
    for name in chosen:
        if name in {"nccl_allreduce", "nccl_allgather"}:
            for variant in NCCL_VARIANTS:
                label = " ".join(f"{k}={v}" for k, v in variant.items()) or "(default)"
                rows.append((f"{name} {label}", dict(variant)))
        else:
            rows.append((name, {}))
    return rows


def run_row(name: str, env_extra: dict, columns: list[dict], context: dict) -> dict[str, dict]:
    """The columns of one row side by side (each sandbox its own uid), then their refused calls and devices."""
    kmsg = Kmsg()
    row: dict[str, dict] = {}

    def one(column: dict) -> None:
        row[column["title"]] = run_one(name, column, env_extra, context["sets"], context["timeout"])

    threads = [threading.Thread(target=one, args=(column,)) for column in columns]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    time.sleep(0.2)
    lines = kmsg.read()
    context["kmsg_error"] = kmsg.error
    for column in columns:
        result = row[column["title"]]
        if column["filter"] is not None:
            result["denied"] = denied_for(lines, column["uid"], context["names"])
        result["device_check"] = [device_verdict(dev, context["policy"]) for dev in result["devices"]]
    return row


def device_verdict(dev: str, policy) -> str:
    path, accesses = dev.rsplit(" ", 1)
    try:
        st = os.stat(path)
    except OSError:
        return f"{path} {accesses}: gone"
    verdicts = {check_device(os.major(st.st_rdev), os.minor(st.st_rdev), a, policy) for a in accesses.split("/")}
    return f"{path} {accesses}: {'; '.join(sorted(verdicts))}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--workloads", default="")
    parser.add_argument("--budget-s", type=float, default=540.0)
    parser.add_argument("--timeout-s", type=float, default=240.0)
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("run_matrix.py needs root (mount namespace, uid switch, /dev/kmsg)", file=sys.stderr)
        return 2
    deadline = time.monotonic() + args.budget_s
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sets = load_sets()
    columns = make_columns()
    prepare_workdir(columns)
    context = {
        "sets": sets,
        "names": syscall_names(sets),
        "policy": device_policy(list(role_value("sglang_server_device_allow"))),
        "timeout": args.timeout_s,
    }
    info = versions()
    info["syscall_table"] = f"{sets['systemd_version']}, libseccomp {sets['libseccomp_version']} ({SETS_NAME})"
    gpus = int(info["gpus"]) if info["gpus"].isdigit() else 0
    rows = make_rows([w for w in args.workloads.split(",") if w] or list(workloads.SINGLE + workloads.MULTI))
    results: dict = {}
    applied = None
    with open(out / "sandbox-logs.txt", "w", encoding="utf-8") as log:
        for label, env_extra in rows:
            name = label.split()[0]
            if name in workloads.MULTI and gpus < 2:
                for column in columns:
                    results[(label, column["title"])] = {"status": f"SKIP (needs 2 GPUs, have {gpus})", "detail": ""}
                continue
            if time.monotonic() > deadline:
                continue
            for title, result in run_row(name, env_extra, columns, context).items():
                results[(label, title)] = result
                applied = applied or result.get("applied")
                log.write(f"==== {label} / {title}: {result['status']} ({result['seconds']} s)\n")
                log.write("\n".join(result["output_tail"]) + "\n")
                log.flush()
                print(
                    f"{label:40} {title:40} {result['status']} {result['seconds']}s {result['detail'][:100]}",
                    flush=True,
                )
            (out / "sandbox-matrix.md").write_text(render(info, columns, rows, results, applied), encoding="utf-8")
    if context.get("kmsg_error"):
        info["kmsg"] = context["kmsg_error"]
    dump = {"info": info, "results": {f"{k[0]} / {k[1]}": v for k, v in results.items()}}
    (out / "sandbox-matrix.json").write_text(json.dumps(dump, indent=1, default=str), encoding="utf-8")
    table = render(info, columns, rows, results, applied)
    (out / "sandbox-matrix.md").write_text(table, encoding="utf-8")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
