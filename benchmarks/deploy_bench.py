"""Release install time: pip cold, pip warm, uv cold, uv with a host-shared cache, side by side.

Installs the REAL dependency set of one SGLang release (default sglang==0.5.23: torch with its
CUDA libraries, a venv of about 10 GB) into a fresh venv per method, one after the other on this
machine, and prints one table:

  pip cold         pip, empty private cache (what the first node pays today)
  pip warm         pip, the cache the cold run filled (what every later node pays today)
  pip wheelhouse   pip from a local directory holding every wheel (--no-index --find-links): the
                   best pip can do, and what an air-gapped fleet with a wheelhouse pays per node
  uv cold          uv, empty cache reached through a bind mount (the first node of a host)
  uv shared cache  uv, the cache the cold run filled, again through a bind mount (the next node)
  uv shared + bytecode  the same with --compile-bytecode (pip writes .pyc files, uv by default not)
  uv same-fs       reference: the same cache without the bind mount (uv hard-links)

The bind mount is what a container sees: the Proxmox host's cache directory mounted into the
container. link(2) across two mount points fails with EXDEV even on one file system, so uv falls
back to copying; the "links" column shows it (nlink of one big file of the venv: 1 = a copy).
Each uv run happens inside a private mount namespace (`unshare -m`) that bind-mounts the cache
directory onto a second path, exactly the situation in a container. Needs root (for unshare).

uv itself is the version the role pins (roles/sglang/defaults/main.yml, sglang_uv_version),
installed with pip into a small venv of its own, as the role does.

Disk: everything lives under one private directory below /var/tmp, each venv is deleted as soon
as it has been measured, the pip cache before uv starts, and the whole directory at the end
(also on failure). Peak use is about 25 GB (uv's unpacked cache plus one venv).

The installed sets (name==version of every distribution) must be identical across the methods;
the script exits 1 when they are not, or when an install fails.

    sudo .venv/bin/python benchmarks/deploy_bench.py [--spec sglang==0.5.23] [--python python3] [--uv-only]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
DEFAULTS = REPO / "roles" / "sglang" / "defaults" / "main.yml"
# One big file of torch's CUDA stack: its link count tells a copy (1) from a hard link (>1).
PROBE_GLOB = "lib/python*/site-packages/torch/lib/libtorch_cuda.so"


@dataclass
class Result:
    method: str
    seconds: float
    load_before: float
    load_after: float
    venv_gb: float
    links: int
    packages: frozenset[str] = field(default_factory=frozenset)
    note: str = ""


def load1() -> float:
    return os.getloadavg()[0]


TMPDIR: Path | None = None


def clean_env() -> dict[str, str]:
    """This process's environment without pip settings, and no pip config file: both installers
    see PyPI only, not a machine's local wheels, indexes or constraints. Temporary files go to the
    private work directory (removed at the end, also after a failure)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env["PIP_CONFIG_FILE"] = os.devnull
    if TMPDIR is not None:
        env["TMPDIR"] = str(TMPDIR)
    return env


def du_gb(path: Path) -> float:
    if not path.exists():
        return 0.0
    out = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=True).stdout
    return int(out.split()[0]) / 1e9


def run(argv: list[str], log: Path) -> float:
    """Run argv, its output to log; return the wall time; raise with the log's tail on failure."""
    start = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, check=False, env=clean_env())
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise SystemExit(f"{argv[0]} failed (rc {proc.returncode}), see {log}:\n{tail}")
    return seconds


def installed(venv: Path) -> frozenset[str]:
    """name==version of every distribution in the venv, names normalised (PEP 503)."""
    code = (
        "import importlib.metadata as m, re\n"
        "for d in m.distributions():\n"
        "    print(re.sub(r'[-_.]+', '-', d.metadata['Name']).lower() + '==' + d.version)\n"
    )
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, check=True)
    return frozenset(out.stdout.split())


def link_count(venv: Path) -> int:
    found = sorted(venv.glob(PROBE_GLOB))
    return found[0].stat().st_nlink if found else 0


def uv_pin() -> str:
    return str(yaml.safe_load(DEFAULTS.read_text())["sglang_uv_version"])


def in_bind_mount(cache: Path, mount: Path, argv: list[str]) -> list[str]:
    """argv run in a private mount namespace where cache is also mounted at mount (like a CT)."""
    script = 'mount --bind "$1" "$2" && shift 2 && exec "$@"'
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", str(cache), str(mount), *argv]


def measure(work: Path, method: str, python: str, argv_for, note: str = "") -> Result:
    venv = work / f"venv-{re.sub(r'[^a-z0-9]+', '-', method)}"
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    before = load1()
    seconds = run(argv_for(venv), work / f"{venv.name}.log")
    after = load1()
    result = Result(method, seconds, before, after, du_gb(venv), link_count(venv), installed(venv), note)
    shutil.rmtree(venv)
    print(f"  {method:<22} {seconds:8.1f} s  (load {before:.2f} -> {after:.2f})", flush=True)
    return result


def pip_install(venv: Path, spec: str, *options: str) -> list[str]:
    """argv of the venv's pip installing spec with options (never asks, never checks its own version)."""
    return [str(venv / "bin" / "pip"), "install", "--no-input", "--disable-pip-version-check", *options, spec]


def uv_install(uv: str, venv: Path, spec: str, cache: Path) -> list[str]:
    """argv of uv installing spec into venv from cache (no config file of the machine, no progress bar)."""
    python = str(venv / "bin" / "python")
    return [uv, "pip", "install", "--python", python, "--cache-dir", str(cache), "--no-config", "--no-progress", spec]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--spec", default="sglang==0.5.23", help="requirement to install (default %(default)s)")
    parser.add_argument("--python", default="python3", help="interpreter of the venvs (SGLang >= 0.5.22: 3.11+)")
    parser.add_argument("--workdir", default="/var/tmp", help="parent of the private work directory")
    parser.add_argument("--keep-going", action="store_true", help="print the table even if the sets differ")
    parser.add_argument(
        "--uv-only", action="store_true", help="measure the uv methods only (minutes, not the hour pip cold takes)"
    )
    return parser.parse_args()


def install_uv(python: str, work: Path) -> tuple[Path, str]:
    """uv at the role's pin, installed with pip into a venv of its own: (that venv, the version)."""
    uv_version = uv_pin()
    tools = work / "uv-tool"
    subprocess.run([python, "-m", "venv", str(tools)], check=True)
    subprocess.run(
        [str(tools / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", f"uv=={uv_version}"],
        check=True,
        env=clean_env(),
    )
    return tools, uv_version


def bench(args: argparse.Namespace, work: Path, results: list[Result], sizes: dict[str, float]) -> None:
    """Every method, one after the other; results and sizes grow as each is measured (an interrupt
    leaves what was measured so far)."""
    tools, uv_version = install_uv(args.python, work)
    uv = str(tools / "bin" / "uv")
    host_cache, mount = work / "host-cache", work / "ct-mount"
    host_cache.mkdir()
    mount.mkdir()
    print(f"{args.spec}, Python {args.python}, uv {uv_version}, work dir {work}", flush=True)
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}, cores {os.cpu_count()}")
    bench_uv(args, work, uv, host_cache=host_cache, mount=mount, results=results, sizes=sizes)
    if not args.uv_only:
        bench_pip(args, work, tools, results, sizes)


def bench_uv(
    args: argparse.Namespace,
    work: Path,
    uv: str,
    *,
    host_cache: Path,
    mount: Path,
    results: list[Result],
    sizes: dict[str, float],
) -> None:
    """The uv methods (first: their figures are the ones the role depends on; pip's take much longer);
    the host cache is removed afterwards."""

    def uv_via_mount(venv: Path) -> list[str]:
        return in_bind_mount(host_cache, mount, uv_install(uv, venv, args.spec, mount))

    def uv_same_fs(venv: Path) -> list[str]:
        return uv_install(uv, venv, args.spec, host_cache)

    results.append(measure(work, "uv cold", args.python, uv_via_mount, "empty cache, bind-mounted"))
    results.append(measure(work, "uv shared cache", args.python, uv_via_mount, "cache from uv cold, bind-mounted"))
    results.append(
        measure(
            work,
            "uv shared + bytecode",
            args.python,
            lambda venv: [*uv_via_mount(venv), "--compile-bytecode"],
            "as above, .pyc written like pip",
        )
    )
    results.append(measure(work, "uv same-fs (reference)", args.python, uv_same_fs, "same cache, no bind mount"))
    sizes["uv cache"] = du_gb(host_cache)
    shutil.rmtree(host_cache)


def bench_pip(
    args: argparse.Namespace, work: Path, tools: Path, results: list[Result], sizes: dict[str, float]
) -> None:
    """The pip methods: cold, warm (its cache removed afterwards), and from a downloaded wheelhouse."""
    pip_cache = work / "pip-cache"

    def pip(venv: Path) -> list[str]:
        return pip_install(venv, args.spec, "--cache-dir", str(pip_cache))

    results.append(measure(work, "pip cold", args.python, pip, "empty pip cache"))
    sizes["pip cache"] = du_gb(pip_cache)
    results.append(measure(work, "pip warm", args.python, pip, "pip cache from pip cold"))
    shutil.rmtree(pip_cache, ignore_errors=True)
    wheelhouse = work / "wheelhouse"
    download_s = run(
        [
            str(tools / "bin" / "pip"),
            "download",
            "--no-input",
            "--no-cache-dir",
            "-d",
            str(wheelhouse),
            args.spec,
        ],
        work / "pip-download.log",
    )
    print(f"  (pip download of the wheelhouse: {download_s:.1f} s, not part of any figure)", flush=True)
    sizes["wheelhouse"] = du_gb(wheelhouse)

    def pip_wheelhouse(venv: Path) -> list[str]:
        return pip_install(venv, args.spec, "--no-cache-dir", "--no-index", "--find-links", str(wheelhouse))

    results.append(measure(work, "pip wheelhouse", args.python, pip_wheelhouse, "all wheels local, no network"))


def report(results: list[Result], sizes: dict[str, float], keep_going: bool) -> int:
    """The table, the sizes and the comparison of the installed sets; the exit status."""
    base = next((r for r in results if r.method == "pip warm"), None) or next(
        (r for r in results if r.method.startswith("pip")), results[0] if results else None
    )
    if base is None:
        return 1
    print(f"{'method':<24}{'seconds':>9}{'vs ' + base.method:>16}{'venv GB':>9}{'links':>7}{'load 1m':>14}  note")
    for r in results:
        print(
            f"{r.method:<24}{r.seconds:9.1f}{base.seconds / r.seconds:15.1f}x{r.venv_gb:9.2f}{r.links:7d}"
            f"{r.load_before:7.2f}->{r.load_after:<5.2f}  {r.note}"
        )
    print("\n" + ", ".join(f"{k} {v:.2f} GB" for k, v in sizes.items()))
    if sizes.get("pip cache", 1.0) < 0.5:
        print("pip's cache stayed (nearly) empty: the responses carried no caching headers (Cache-Control, ETag,")
        print("Last-Modified), so pip's HTTP cache kept nothing and pip warm downloaded everything again.")
    print("links: nlink of torch/lib/libtorch_cuda.so in the venv (1 = a copy, >1 = hard-linked from the cache)")
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    reference = results[0].packages
    differ = [r.method for r in results if r.packages != reference]
    print(
        f"installed distributions: {len(reference)} in each venv; "
        + ("identical across all methods" if not differ else f"DIFFERENT from {results[0].method}: {', '.join(differ)}")
    )
    for r in results:
        if r.packages != reference:
            print(f"  {r.method}: only here {sorted(r.packages - reference)}; missing {sorted(reference - r.packages)}")
    return 1 if differ and not keep_going else 0


def main() -> int:
    args = parse_args()
    # SIGTERM (and SIGINT, which a background job ignores) stop the run: the table shows what was
    # measured, the work directory is removed.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    if os.geteuid() != 0:
        raise SystemExit("deploy_bench.py needs root: the uv runs use a private bind mount (unshare -m)")

    global TMPDIR  # noqa: PLW0603
    work = Path(tempfile.mkdtemp(prefix="gpufleet-deploy-bench-", dir=args.workdir))
    TMPDIR = work / "tmp"
    TMPDIR.mkdir()
    results: list[Result] = []
    sizes: dict[str, float] = {}
    try:
        bench(args, work, results, sizes)
    except KeyboardInterrupt:
        print("\ninterrupted: the table shows the methods measured so far", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print()
    return report(results, sizes, args.keep_going)


if __name__ == "__main__":
    sys.exit(main())
