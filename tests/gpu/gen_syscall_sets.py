# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Write the syscall groups of this host's systemd, with x86_64 numbers, for tests/gpu/sandbox.py.

    python3 tests/gpu/gen_syscall_sets.py [OUT.json]     # default: tests/gpu/syscall_sets.json

The groups come from ``systemd-analyze syscall-filter`` (every ``@group`` it lists, its members as
printed: names and nested groups). The numbers come from the host's libseccomp
(``seccomp_syscall_resolve_name_arch`` for x86_64), the library systemd itself resolves names with:
a name this libseccomp does not know is left without a number, exactly as systemd leaves it out of
the filter it builds (a call newer than its table is then refused by the allow list's default).
The file records both versions. Run it on a host with the systemd the unit targets (Debian 12:
systemd 252, libseccomp 2.5.4); the GPU machine may have neither.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import subprocess
import sys
from pathlib import Path

SCMP_ARCH_X86_64 = 0xC000003E  # AUDIT_ARCH_X86_64, libseccomp's token for the arch
HERE = Path(__file__).resolve().parent


def parse_groups(text: str) -> dict[str, list[str]]:
    """``systemd-analyze syscall-filter`` output as {group: [member, ...]} (comments dropped)."""
    groups: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("@"):
            current = groups.setdefault(line.split()[0], [])
        elif current is not None and line.startswith("    ") and not line.strip().startswith("#"):
            current.append(line.strip())
    return groups


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else HERE / "syscall_sets.json"
    version = subprocess.run(["systemd-analyze", "--version"], capture_output=True, text=True, check=True)
    listing = subprocess.run(["systemd-analyze", "syscall-filter"], capture_output=True, text=True, check=True)
    groups = parse_groups(listing.stdout)
    lib = ctypes.CDLL(ctypes.util.find_library("seccomp") or "libseccomp.so.2")
    lib.seccomp_syscall_resolve_name_arch.argtypes = [ctypes.c_uint32, ctypes.c_char_p]
    lib.seccomp_syscall_resolve_name_arch.restype = ctypes.c_int
    lib.seccomp_version.restype = ctypes.c_void_p
    ver = ctypes.cast(lib.seccomp_version(), ctypes.POINTER(ctypes.c_uint * 3)).contents
    names = sorted({m for members in groups.values() for m in members if not m.startswith("@")})
    numbers = {}
    for name in names:
        nr = lib.seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, name.encode())
        if nr >= 0:
            numbers[name] = nr
    data = {
        "generated_by": "tests/gpu/gen_syscall_sets.py",
        "systemd_version": version.stdout.splitlines()[0],
        "libseccomp_version": f"{ver[0]}.{ver[1]}.{ver[2]}",
        "arch": "x86_64",
        "groups": groups,
        "x86_64_numbers": numbers,
    }
    out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{out}: {len(groups)} groups, {len(numbers)} of {len(names)} names resolved ({data['systemd_version']})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
