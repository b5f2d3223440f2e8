"""Stand-in for NVIDIA's CUDA apt repository (developer.download.nvidia.com/compute/cuda/repos).

What it stands in for: the signed, flat apt repository that NVIDIA publishes per distro and
architecture (``repos/debian12/x86_64/`` with ``Packages``, ``Release``, ``InRelease`` at its
root), and the packages our roles install from it, under their real names and version strings:

- ``cuda-keyring`` (the repository key plus ``/etc/apt/sources.list.d/cuda-<distro>-<arch>.list``)
- ``nvidia-kernel-open-dkms`` / ``nvidia-kernel-dkms`` (open / proprietary kernel modules)
- ``nvidia-driver-cuda``, ``libcuda1``, ``nvidia-persistenced``, ``nvidia-modprobe`` (userspace)
- ``cuda-toolkit-13-0``, ``cuda-toolkit-12-8`` (the toolkit with ``nvcc``)
- ``nvidia-driver-pinning-<branch>`` and ``nvidia-driver-pinning-<version>``: NVIDIA's version-locking
  packages (NVIDIA driver installation guide, "Version locking"). Their control fields follow the
  real ones (names, ``Architecture: all``, ``Section: NVIDIA``, ``Provides``/``Conflicts``/``Replaces:
  nvidia-driver-pinning`` so that one is installed at a time, the descriptions "APT driver pinning
  file for driver branch 580" / "... for driver version 580.159.04", branch versions such as
  ``580-5``); each installs an apt preferences file at priority 1000 for its branch or version. The
  file's name and its exact lines are ours: the real package's file list was not available.
  Versioned pinning packages exist here for 580.159.04 only; 590.44.01 has the branch package only.

What differs from the real thing, and why: no kernel module can be built or loaded in a test
container, so the kernel-module packages write the text the real module exposes in
``/proc/driver/nvidia/version`` to ``/var/lib/gpufleet-standin/proc/driver/nvidia/version`` (and a
``/proc/devices`` capture beside it); tests point the roles' ``*_proc_*_path`` variables there.
``nvidia-smi`` is the replaying stand-in from ``tests/standins/nvidia-smi``; ``nvcc`` prints the
real ``nvcc --version`` text. Each distro's repository is signed with its own throw-away key made
at build time (NVIDIA signs the Debian 13 repository with a newer key than Debian 12's), which only
that distro's ``cuda-keyring`` package carries, so apt's real signature check runs and a role that
trusted a key of its own choosing would fail.

Also NVIDIA's ``.run`` installer: ``OUTDIR/runfile/NVIDIA-Linux-x86_64-<version>.run`` and ``SHA256SUMS``.

Usage: build_repo.py OUTDIR   (writes OUTDIR/<distro>/x86_64/ for debian12 and debian13)
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
STANDINS = HERE.parent
DISTROS = ("debian12", "debian13")
ARCH = "amd64"
NVIDIA_URL = "https://developer.download.nvidia.com/compute/cuda/repos"
STATE = "/var/lib/gpufleet-standin"
# the nvidia-smi -q -x report the package's stand-in prints: the healthy SM120 variant built from the real
# H200 capture (tests/unit/fixtures/nvidia/rtxpro6000-health/), installed next to its profile
SMI_XML = STANDINS.parent / "unit/fixtures/nvidia/rtxpro6000-health/healthy-idle.xml"
SMI_XML_PATH = "/etc/gpufleet-standin/nvidia-smi-q.xml"

# Driver versions in the stand-in repository. Two of them, so that a role which does not pin
# exactly would pick up the newer one: the pin test can fail.
DRIVER_VERSIONS = ("580.159.04", "590.44.01")
# (package, version, nvcc release line, nvcc build line)
TOOLKITS = (
    ("cuda-toolkit-13-0", "13.0.2-1", "release 13.0, V13.0.88", "cuda_13.0.r13.0/compiler.36424714_0"),
    ("cuda-toolkit-12-8", "12.8.1-1", "release 12.8, V12.8.93", "cuda_12.8.r12.8/compiler.35583870_0"),
)
KEYRING_VERSION = "1.1-1"
# NVIDIA's version-locking packages: the branch packages (version <branch>-<n>; the real debian12
# repository lists nvidia-driver-pinning-580 at 580-1 and 580-5) and the versioned ones.
PINNING_BRANCH_REVISION = "5"
PINNED_VERSIONS = ("580.159.04",)


def run(*cmd: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, **kw)


def build_deb(  # noqa: PLR0917 (a .deb's fields, passed positionally by every caller; PLR0913 is ignored too)
    workdir: Path,
    outdir: Path,
    name: str,
    version: str,
    arch: str,
    files: dict[str, tuple[str, int]],
    description: str,
    depends: str = "",
    conflicts: str = "",
    scripts: dict[str, str] | None = None,
    fields: dict[str, str] | None = None,
) -> Path:
    """Build one .deb from a {path: (content, mode)} mapping with dpkg-deb."""
    root = workdir / f"{name}_{version}"
    if root.exists():
        shutil.rmtree(root)
    (root / "DEBIAN").mkdir(parents=True)
    for path, (content, mode) in files.items():
        dest = root / path.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(content)
        dest.chmod(mode)
    extra = dict(fields or {})
    control = [
        f"Package: {name}",
        f"Version: {version}",
        f"Architecture: {arch}",
        "Maintainer: gpufleet test stand-in <standin@gpufleet.invalid>",
        f"Section: {extra.pop('Section', 'multiverse/devel')}",
        "Priority: optional",
    ]
    control += [f"{key}: {value}" for key, value in extra.items()]
    if depends:
        control.append(f"Depends: {depends}")
    if conflicts:
        control.append(f"Conflicts: {conflicts}")
    control.append(f"Description: {description} (gpufleet test stand-in)")
    (root / "DEBIAN" / "control").write_text("\n".join(control) + "\n")
    for script, body in (scripts or {}).items():
        path = root / "DEBIAN" / script
        path.write_text("#!/bin/sh\nset -e\n" + textwrap.dedent(body))
        path.chmod(0o755)
    deb = outdir / f"{name}_{version}_{arch}.deb"
    run("dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(deb), stdout=subprocess.DEVNULL)
    return deb


def proc_version_text(version: str, open_module: bool) -> str:
    banner = "NVIDIA UNIX Open Kernel Module for x86_64" if open_module else "NVIDIA UNIX x86_64 Kernel Module"
    return (
        f"NVRM version: {banner}  {version}  Release Build  (dvs-builder@U22-I3-AE18-23-3)"
        "  Mon Sep 29 19:46:40 UTC 2025\n"
        "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14+deb12u1) \n"
    )


PROC_DEVICES = """Character devices:
  1 mem
  4 /dev/vc/0
  4 tty
  5 /dev/tty
  5 /dev/console
  5 /dev/ptmx
 10 misc
 13 input
136 pts
195 nvidia
195 nvidiactl
195 nvidia-modeset
238 nvidia-uvm
241 nvidia-caps
242 nvidia-caps-imex-channels

Block devices:
  7 loop
259 blkext
"""

NVIDIA_MODPROBE = r"""#!/bin/sh
# Stand-in for nvidia-modprobe(1), the setuid helper that loads the NVIDIA modules and creates
# their device nodes. Options as the real tool: -u (nvidia-uvm, nvidia-uvm-tools), -c=N / -c N
# (/dev/nvidiaN and /dev/nvidiactl), -f PATH (nvidia-caps nodes for a capability file). Majors come
# from the (simulated) /proc/devices, as the real tool reads them.
set -eu
devices=/var/lib/gpufleet-standin/proc/devices
[ -r "$devices" ] || { echo "nvidia-modprobe: NVIDIA kernel module not loaded" >&2; exit 1; }
major() { awk -v n="$1" '$2 == n {print $1; exit}' "$devices"; }
node() { [ -c "$1" ] || mknod -m "$2" "$1" c "$3" "$4"; }
ctl() { node "/dev/nvidia$1" 666 "$(major nvidia)" "$1"; node /dev/nvidiactl 666 "$(major nvidiactl)" 255; }
while [ $# -gt 0 ]; do
  case "$1" in
    -u|--unified-memory)
      node /dev/nvidia-uvm 666 "$(major nvidia-uvm)" 0; node /dev/nvidia-uvm-tools 666 "$(major nvidia-uvm)" 1 ;;
    -c=*) ctl "${1#-c=}" ;;
    -c) shift; ctl "$1" ;;
    -f) shift; mkdir -p /dev/nvidia-caps
        case "$1" in
          */mig/config) node /dev/nvidia-caps/nvidia-cap1 400 "$(major nvidia-caps)" 1 ;;
          */mig/monitor) node /dev/nvidia-caps/nvidia-cap2 444 "$(major nvidia-caps)" 2 ;;
          *) echo "nvidia-modprobe: unknown capability file $1" >&2; exit 1 ;;
        esac ;;
    *) echo "nvidia-modprobe: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
"""

PERSISTENCED_UNIT = """[Unit]
Description=NVIDIA Persistence Daemon (gpufleet test stand-in)
Wants=syslog.target

[Service]
Type=forking
ExecStart=/usr/bin/nvidia-persistenced --no-persistence-mode --verbose
ExecStopPost=/bin/rm -rf /var/run/nvidia-persistenced

[Install]
WantedBy=multi-user.target
"""

PERSISTENCED = """#!/bin/sh
# Stand-in for nvidia-persistenced. The real daemon opens every GPU at start, which makes the
# driver create /dev/nvidia0..N-1 (through nvidia-modprobe); then it stays resident.
n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
i=0
while [ "$i" -lt "${n:-0}" ]; do
  nvidia-modprobe -c="$i"
  i=$((i + 1))
done
# like the real daemon: fork to the background, the parent exits (systemd Type=forking)
nohup sleep infinity >/dev/null 2>&1 &
"""


def nvcc_script(release: str, build: str) -> str:
    return f"""#!/bin/sh
# Stand-in for nvcc: prints the real `nvcc --version` text of this toolkit release.
case "$1" in
  --version|-V)
    echo "nvcc: NVIDIA (R) Cuda compiler driver"
    echo "Copyright (c) 2005-2025 NVIDIA Corporation"
    echo "Built on Wed_Aug_20_01:58:59_PM_PDT_2025"
    echo "Cuda compilation tools, {release}"
    echo "Build {build}" ;;
  *) echo "nvcc stand-in: compiling is not simulated" >&2; exit 1 ;;
esac
"""


def smi_config(version: str) -> str:
    """The stand-in nvidia-smi's profile for this package: 8 x RTX PRO 6000 at this driver version."""
    profile = json.loads((STANDINS / "nvidia" / "profiles" / "rtxpro6000-8gpu.json").read_text())
    profile["driver_version"] = version
    profile["proc_version_path"] = f"{STATE}/proc/driver/nvidia/version"
    # -q -x (gpu_health) prints the package's copy of the healthy SM120 report (SMI_XML), next to this file
    profile["q_xml"] = os.path.basename(SMI_XML_PATH)
    return json.dumps(profile, indent=2) + "\n"


def pinning_preferences(what: str, pin: str) -> str:
    """The apt preferences a pinning package installs: NVIDIA's driver packages held to one branch or version."""
    return (
        f"# NVIDIA driver pinning for {what} (gpufleet test stand-in)\n"
        "Package: *nvidia* libcuda* libnv* libxnvctrl* firmware-nvidia-gsp\n"
        f"Pin: version {pin}\n"
        "Pin-Priority: 1000\n"
    )


def build_pinning_packages(work: Path, pool: Path) -> None:
    fields = {
        "Section": "NVIDIA",
        "Provides": "nvidia-driver-pinning",
        "Conflicts": "nvidia-driver-pinning",
        "Replaces": "nvidia-driver-pinning",
    }
    branches = sorted({version.split(".", 1)[0] for version in DRIVER_VERSIONS})
    packages = [
        (branch, f"{branch}-{PINNING_BRANCH_REVISION}", f"driver branch {branch}", f"{branch}.*") for branch in branches
    ]
    packages += [(version, f"{version}-1", f"driver version {version}", f"{version}-*") for version in PINNED_VERSIONS]
    for suffix, deb_version, what, pin in packages:
        name = f"nvidia-driver-pinning-{suffix}"
        build_deb(
            work,
            pool,
            name,
            deb_version,
            "all",
            # ".pref": apt ignores preferences.d files with any other extension ("580.159.04" has one)
            {f"/etc/apt/preferences.d/{name}.pref": (pinning_preferences(what, pin), 0o644)},
            f"APT driver pinning file for {what}",
            fields=fields,
        )


def build_packages(work: Path, pool: Path) -> None:
    build_pinning_packages(work, pool)
    smi = (STANDINS / "nvidia-smi").read_text()
    for version in DRIVER_VERSIONS:
        deb_version = f"{version}-1"
        for name, open_module in (("nvidia-kernel-open-dkms", True), ("nvidia-kernel-dkms", False)):
            other = "nvidia-kernel-dkms" if open_module else "nvidia-kernel-open-dkms"
            build_deb(
                work,
                pool,
                name,
                deb_version,
                ARCH,
                {
                    f"/usr/src/nvidia-{version}/README.standin": ("stand-in kernel module sources\n", 0o644),
                    "/usr/share/gpufleet-standin/module-version": (proc_version_text(version, open_module), 0o644),
                    "/usr/share/gpufleet-standin/proc-devices": (PROC_DEVICES, 0o644),
                },
                f"NVIDIA driver {'open ' if open_module else ''}kernel module DKMS package",
                conflicts=other,
                scripts={
                    # the real postinst builds with DKMS; the module is live after modprobe/reboot
                    "postinst": f"""\
                        mkdir -p {STATE}/proc/driver/nvidia
                        cp /usr/share/gpufleet-standin/module-version {STATE}/proc/driver/nvidia/version
                        cp /usr/share/gpufleet-standin/proc-devices {STATE}/proc/devices
                        """,
                    "postrm": f"""\
                        if [ "$1" = remove ] || [ "$1" = purge ]; then
                          rm -f {STATE}/proc/driver/nvidia/version {STATE}/proc/devices
                        fi
                        """,
                },
            )
        build_deb(
            work,
            pool,
            "libcuda1",
            deb_version,
            ARCH,
            {f"/usr/lib/x86_64-linux-gnu/libcuda.so.{version}": ("stand-in\n", 0o644)},
            "NVIDIA CUDA Driver Library",
        )
        files = {
            "/usr/bin/nvidia-smi": (smi, 0o755),
            "/etc/gpufleet-standin/nvidia-smi.json": (smi_config(version), 0o644),
            SMI_XML_PATH: (SMI_XML.read_text(encoding="utf-8"), 0o644),
        }
        build_deb(
            work,
            pool,
            "nvidia-driver-cuda",
            deb_version,
            ARCH,
            files,
            "NVIDIA driver CUDA integration components",
            depends=f"libcuda1 (= {deb_version})",
        )
        build_deb(
            work,
            pool,
            "nvidia-persistenced",
            deb_version,
            ARCH,
            {
                "/usr/bin/nvidia-persistenced": (PERSISTENCED, 0o755),
                "/lib/systemd/system/nvidia-persistenced.service": (PERSISTENCED_UNIT, 0o644),
            },
            "NVIDIA Persistence Daemon",
        )
        build_deb(
            work,
            pool,
            "nvidia-modprobe",
            deb_version,
            ARCH,
            {"/usr/bin/nvidia-modprobe": (NVIDIA_MODPROBE, 0o755)},
            "Load the NVIDIA kernel driver and create device files",
        )
    for name, version, release, build in TOOLKITS:
        short = name.removeprefix("cuda-toolkit-").replace("-", ".")
        build_deb(
            work,
            pool,
            name,
            version,
            ARCH,
            {
                f"/usr/local/cuda-{short}/bin/nvcc": (nvcc_script(release, build), 0o755),
                f"/usr/local/cuda-{short}/version.json": (
                    f'{{"cuda": {{"name": "CUDA SDK", "version": "{version.split("-", maxsplit=1)[0]}"}}}}\n',
                    0o644,
                ),
            },
            f"CUDA Toolkit {short} meta-package",
        )


def runfile_script(version: str) -> str:
    """Stand-in for NVIDIA's .run installer (NVIDIA-Linux-x86_64-<version>.run, a makeself archive).

    Takes the real installer's options (--silent, --no-questions, --dkms, --kernel-module-type=open|
    proprietary, --no-kernel-modules) and installs what the packages above install: the userspace
    (nvidia-smi stand-in and its profile, nvidia-modprobe, nvidia-persistenced) and, unless
    --no-kernel-modules, the simulated kernel module's /proc text.
    """
    smi = (STANDINS / "nvidia-smi").read_text()
    parts = [
        "#!/bin/sh",
        f"# Stand-in for NVIDIA-Linux-x86_64-{version}.run (gpufleet tests/standins/nvidia_apt/build_repo.py)",
        "set -eu",
        "kernel=yes; module_type=open; silent=no",
        'for arg in "$@"; do',
        '  case "$arg" in',
        "    -s|--silent) silent=yes ;;",
        "    --no-questions|-q|--dkms) ;;",
        "    --no-kernel-modules) kernel=no ;;",
        "    --kernel-module-type=open) module_type=open ;;",
        "    --kernel-module-type=proprietary) module_type=proprietary ;;",
        "    *) echo \"ERROR: Unrecognized option '$arg'\" >&2; exit 1 ;;",
        "  esac",
        "done",
        "[ \"$silent\" = yes ] || { echo 'ERROR: this stand-in only runs with --silent' >&2; exit 1; }",
        "mkdir -p /etc/gpufleet-standin",
        "cat > /usr/bin/nvidia-smi <<'EOF_GPUFLEET_SMI'",
        smi.rstrip("\n"),
        "EOF_GPUFLEET_SMI",
        "cat > /etc/gpufleet-standin/nvidia-smi.json <<'EOF_GPUFLEET_PROFILE'",
        smi_config(version).rstrip("\n"),
        "EOF_GPUFLEET_PROFILE",
        "cat > /usr/bin/nvidia-modprobe <<'EOF_GPUFLEET_MODPROBE'",
        NVIDIA_MODPROBE.rstrip("\n"),
        "EOF_GPUFLEET_MODPROBE",
        "cat > /usr/bin/nvidia-persistenced <<'EOF_GPUFLEET_PERSISTENCED'",
        PERSISTENCED.rstrip("\n"),
        "EOF_GPUFLEET_PERSISTENCED",
        "chmod 0755 /usr/bin/nvidia-smi /usr/bin/nvidia-modprobe /usr/bin/nvidia-persistenced",
        'if [ "$kernel" = yes ]; then',
        f"  mkdir -p {STATE}/proc/driver/nvidia",
        '  if [ "$module_type" = open ]; then',
        f"    cat > {STATE}/proc/driver/nvidia/version <<'EOF_GPUFLEET_OPEN'",
        proc_version_text(version, True).rstrip("\n"),
        "EOF_GPUFLEET_OPEN",
        "  else",
        f"    cat > {STATE}/proc/driver/nvidia/version <<'EOF_GPUFLEET_PROP'",
        proc_version_text(version, False).rstrip("\n"),
        "EOF_GPUFLEET_PROP",
        "  fi",
        f"  cat > {STATE}/proc/devices <<'EOF_GPUFLEET_DEVICES'",
        PROC_DEVICES.rstrip("\n"),
        "EOF_GPUFLEET_DEVICES",
        "fi",
        "echo 'Installation of the NVIDIA Accelerated Graphics Driver for Linux-x86_64"
        f" (version: {version}) is now complete.'",
    ]
    return "\n".join(parts) + "\n"


def make_key(gnupghome: Path, distro: str) -> None:
    gnupghome.mkdir(mode=0o700, parents=True, exist_ok=True)
    run(
        "gpg",
        "--batch",
        "--homedir",
        str(gnupghome),
        "--quick-gen-key",
        "--passphrase",
        "",
        f"gpufleet stand-in CUDA repository {distro} <standin@gpufleet.invalid>",
        "rsa2048",
        "sign",
        "never",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def write_release(repo: Path, gnupghome: Path) -> None:
    packages = subprocess.run(
        ["dpkg-scanpackages", "--multiversion", "."], cwd=repo, check=True, capture_output=True, text=True
    ).stdout
    (repo / "Packages").write_text(packages)
    with gzip.open(repo / "Packages.gz", "wt") as fh:
        fh.write(packages)
    lines = [
        "Origin: NVIDIA",
        "Label: NVIDIA CUDA (gpufleet test stand-in)",
        f"Architectures: {ARCH}",
        "Date: Mon, 30 Nov 2026 00:00:00 UTC",
        "SHA256:",
    ]
    for fname in ("Packages", "Packages.gz"):
        data = (repo / fname).read_bytes()
        lines.append(f" {hashlib.sha256(data).hexdigest()} {len(data)} {fname}")
    (repo / "Release").write_text("\n".join(lines) + "\n")
    gpg = ("gpg", "--batch", "--yes", "--homedir", str(gnupghome))
    run(*gpg, "--clearsign", "-o", str(repo / "InRelease"), str(repo / "Release"))
    run(*gpg, "-abs", "-o", str(repo / "Release.gpg"), str(repo / "Release"))


def main(outdir: str) -> int:
    out = Path(outdir).resolve()
    with tempfile.TemporaryDirectory(prefix="standin-apt-") as tmp:
        work = Path(tmp)
        # One signing key per distro and OUTDIR, kept beside it: hosts that installed the keyring from an
        # earlier build must still trust a rebuilt repository, as with NVIDIA's own keys.
        keyrings = {distro: _signing_key(out, distro) for distro in DISTROS}
        pool = work / "pool"
        pool.mkdir()
        build_packages(work, pool)
        staging = out.with_name(out.name + ".new")
        shutil.rmtree(staging, ignore_errors=True)
        for distro in DISTROS:
            repo = staging / distro / "x86_64"
            repo.mkdir(parents=True)
            for deb in pool.glob("*.deb"):
                shutil.copy2(deb, repo / deb.name)
            gnupghome, keyring = keyrings[distro]
            build_deb(
                work,
                repo,
                "cuda-keyring",
                KEYRING_VERSION,
                "all",
                {
                    "/usr/share/keyrings/cuda-archive-keyring.gpg": ("", 0o644),
                    f"/etc/apt/sources.list.d/cuda-{distro}-x86_64.list": (
                        "deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg]"
                        f" {NVIDIA_URL}/{distro}/x86_64/ /\n",
                        0o644,
                    ),
                },
                "GPG keyring for the CUDA repository",
            )
            # dpkg-deb built the keyring package with an empty key file; put the real key in.
            _inject_keyring(work, repo / f"cuda-keyring_{KEYRING_VERSION}_all.deb", keyring)
            write_release(repo, gnupghome)
        (staging / "cuda-archive-keyring.gpg").write_bytes(keyrings[DISTROS[0]][1])
        runfiles = staging / "runfile"
        runfiles.mkdir()
        sums = []
        for version in DRIVER_VERSIONS:
            name = f"NVIDIA-Linux-x86_64-{version}.run"
            data = runfile_script(version).encode()
            (runfiles / name).write_bytes(data)
            sums.append(f"{hashlib.sha256(data).hexdigest()}  {name}\n")
        (runfiles / "SHA256SUMS").write_text("".join(sums))
        # Replace what is inside OUTDIR, never OUTDIR itself: running test hosts bind-mount it.
        out.mkdir(parents=True, exist_ok=True)
        for entry in staging.iterdir():
            target = out / entry.name
            if target.is_dir():
                shutil.rmtree(target)
            os.replace(entry, target)
        staging.rmdir()
    print(f"stand-in CUDA apt repository: {out}/{{{','.join(DISTROS)}}}/x86_64")
    return 0


def _signing_key(out: Path, distro: str) -> tuple[Path, bytes]:
    """(GnuPG home, exported public key) of the key that signs this distro's repository."""
    # the first distro keeps the name the single key of earlier builds had
    suffix = ".gnupg" if distro == DISTROS[0] else f".{distro}.gnupg"
    gnupghome = out.with_name(out.name + suffix)
    if not (gnupghome / "pubring.kbx").exists():
        shutil.rmtree(gnupghome, ignore_errors=True)
        make_key(gnupghome, distro)
    keyring = subprocess.run(
        ["gpg", "--batch", "--homedir", str(gnupghome), "--export"], check=True, capture_output=True
    ).stdout
    return gnupghome, keyring


def _inject_keyring(work: Path, deb: Path, keyring: bytes) -> None:
    root = work / "keyring-unpack"
    shutil.rmtree(root, ignore_errors=True)
    run("dpkg-deb", "-R", str(deb), str(root))
    (root / "usr/share/keyrings/cuda-archive-keyring.gpg").write_bytes(keyring)
    run("dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(deb), stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: build_repo.py OUTDIR")
    sys.exit(main(sys.argv[1]))
