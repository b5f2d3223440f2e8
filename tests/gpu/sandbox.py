# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Apply the sglang-server unit's sandbox to a command, the way systemd would, without systemd.

    python3 sandbox.py [--filter ENTRY ...] [--workdir DIR] [--no-mounts] -- COMMAND ...

For a GPU machine that has no systemd as PID 1 (a VM or container image): the unit's
SystemCallFilter= and friends are rebuilt here from the rendered unit's values (passed by
run_matrix.py) and applied to this process, which then execs COMMAND. README.md in this folder says
which directive is enforced by the kernel here, which is only audited, and which is left out.

Enforced (seccomp, in the same shape as systemd 252's filters, each its own filter, all with
SECCOMP_FILTER_FLAG_LOG so that every refused call is written to the kernel's audit log):
- SystemCallFilter= (an allow list; ``@default`` is always added, as systemd does), expanded with
  the group table in syscall_sets.json (``systemd-analyze syscall-filter`` + libseccomp of the host
  that generated it), SystemCallErrorNumber=EPERM for everything else, SystemCallArchitectures=native;
- RestrictAddressFamilies= (socket() with another family: EAFNOSUPPORT);
- RestrictNamespaces=yes (clone/unshare with CLONE_NEW*, setns: EPERM; clone3: ENOSYS, so that
  glibc falls back to clone, as systemd >= 247 does);
- RestrictRealtime=yes, LockPersonality=yes, RestrictSUIDSGID=yes (their seccomp rules);
- NoNewPrivileges=yes, CapabilityBoundingSet= (empty), User= (an unprivileged uid when started as root);
- ProtectSystem=strict, ReadWritePaths=, PrivateTmp=yes, ProtectHome=yes, ProtectKernelTunables=yes,
  ProtectControlGroups=yes: a private mount namespace with the same mounts (needs root; otherwise
  reported as not applied).
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import errno
import json
import os
import struct
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SETS = HERE / "syscall_sets.json"

AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000
# BPF opcodes (linux/filter.h)
LD_W_ABS = 0x20
JEQ_K = 0x15
JGE_K = 0x35
JSET_K = 0x45
AND_K = 0x54
RET_K = 0x06
# seccomp return values and flags (linux/seccomp.h)
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_ALLOW = 0x7FFF0000
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_LOG = 2
NR_SECCOMP = 317
PR_SET_NO_NEW_PRIVS = 38
PR_CAPBSET_DROP = 24
# seccomp_data offsets (x86_64, little endian): nr, arch, ip, args[6]
OFF_NR, OFF_ARCH = 0, 4


def off_arg(index: int) -> int:
    """Offset of the low 32 bits of argument ``index``."""
    return 16 + 8 * index


CLONE_NS_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x80
AF_FAMILIES = {"AF_UNIX": 1, "AF_INET": 2, "AF_INET6": 10, "AF_NETLINK": 16}
# x86_64 numbers of the calls the argument filters look at
NR = {
    "open": 2,
    "clone": 56,
    "socket": 41,
    "creat": 85,
    "chmod": 90,
    "fchmod": 91,
    "mknod": 133,
    "personality": 135,
    "sched_setscheduler": 144,
    "openat": 257,
    "mknodat": 259,
    "fchmodat": 268,
    "unshare": 272,
    "setns": 308,
    "clone3": 435,
}
S_ISUID_ISGID = 0o6000
O_CREAT = 0o100


def ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF)


def ret(value: int) -> bytes:
    return ins(RET_K, value)


def errno_ret(number: int) -> int:
    return RET_ERRNO | (number & 0xFFFF)


# ----------------------------------------------------------------------------- syscall sets


def load_sets(path: Path = SETS) -> dict:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def expand(entries: list[str], groups: dict[str, list[str]]) -> set[str]:
    """The syscall names an allow list of names and ``@groups`` stands for, ``@default`` always included."""
    names: set[str] = set()
    todo = ["@default", *entries]
    seen: set[str] = set()
    while todo:
        entry = todo.pop()
        if entry.startswith("~"):
            raise ValueError(f"{entry}: only allow lists are emulated (the unit's SystemCallFilter is one)")
        if entry in seen:
            continue
        seen.add(entry)
        if entry.startswith("@"):
            if entry not in groups:
                raise ValueError(f"{entry}: no such group in {SETS.name}")
            todo.extend(groups[entry])
        else:
            names.add(entry)
    return names


def allowed_numbers(entries: list[str], sets: dict) -> list[int]:
    numbers = sets["x86_64_numbers"]
    return sorted({numbers[name] for name in expand(entries, sets["groups"]) if name in numbers})


# ----------------------------------------------------------------------------- filters


def allow_list_filter(numbers: list[int], deny: int) -> bytes:
    prog = [ins(LD_W_ABS, OFF_ARCH), ins(JEQ_K, AUDIT_ARCH_X86_64, 1, 0), ret(RET_KILL_PROCESS)]
    prog += [ins(LD_W_ABS, OFF_NR), ins(JGE_K, X32_SYSCALL_BIT, 0, 1), ret(deny)]
    for nr in numbers:
        prog += [ins(JEQ_K, nr, 0, 1), ret(RET_ALLOW)]
    prog.append(ret(deny))
    return b"".join(prog)


def _native(prog: list[bytes]) -> list[bytes]:
    """Leave foreign architectures to the allow-list filter (it kills them)."""
    return [ins(LD_W_ABS, OFF_ARCH), ins(JEQ_K, AUDIT_ARCH_X86_64, 1, 0), ret(RET_ALLOW), *prog]


def _block(nr: int, body: list[bytes]) -> list[bytes]:
    """If the call is ``nr``: ``body`` (which ends in returns); else go on after it."""
    return [ins(LD_W_ABS, OFF_NR), ins(JEQ_K, nr, 0, len(body)), *body]


def _mask_deny(arg: int, mask: int, deny: int) -> list[bytes]:
    """arg & mask != 0 -> deny, else allow."""
    return [ins(LD_W_ABS, off_arg(arg)), ins(JSET_K, mask, 0, 1), ret(deny), ret(RET_ALLOW)]


def families_filter(families: list[str]) -> bytes:
    values = [AF_FAMILIES[name] for name in families]
    body = [ins(LD_W_ABS, off_arg(0))]
    for value in values:
        body += [ins(JEQ_K, value, 0, 1), ret(RET_ALLOW)]
    body.append(ret(errno_ret(errno.EAFNOSUPPORT)))
    return b"".join(_native([*_block(NR["socket"], body), ret(RET_ALLOW)]))


def namespaces_filter() -> bytes:
    eperm = errno_ret(errno.EPERM)
    prog = _block(NR["unshare"], _mask_deny(0, CLONE_NS_FLAGS, eperm))
    prog += _block(NR["clone"], _mask_deny(0, CLONE_NS_FLAGS, eperm))
    prog += _block(NR["setns"], [ret(eperm)])
    prog += _block(NR["clone3"], [ret(errno_ret(errno.ENOSYS))])
    return b"".join(_native([*prog, ret(RET_ALLOW)]))


def realtime_personality_filter() -> bytes:
    eperm = errno_ret(errno.EPERM)
    # RestrictRealtime: SCHED_OTHER (0), SCHED_BATCH (3), SCHED_IDLE (5) only (SCHED_RESET_ON_FORK masked)
    sched = [ins(LD_W_ABS, off_arg(1)), ins(AND_K, ~0x40000000 & 0xFFFFFFFF)]
    for policy in (0, 3, 5):
        sched += [ins(JEQ_K, policy, 0, 1), ret(RET_ALLOW)]
    sched.append(ret(eperm))
    # LockPersonality: the default persona (PER_LINUX) and the query (0xffffffff) only
    persona = [ins(LD_W_ABS, off_arg(0)), ins(JEQ_K, 0, 2, 0), ins(JEQ_K, 0xFFFFFFFF, 1, 0), ret(eperm), ret(RET_ALLOW)]
    prog = _block(NR["sched_setscheduler"], sched) + _block(NR["personality"], persona)
    return b"".join(_native([*prog, ret(RET_ALLOW)]))


def suid_filter() -> bytes:
    eperm = errno_ret(errno.EPERM)
    prog: list[bytes] = []
    for name, mode_arg in (("chmod", 1), ("fchmod", 1), ("fchmodat", 2), ("mknod", 1), ("mknodat", 2), ("creat", 1)):
        prog += _block(NR[name], _mask_deny(mode_arg, S_ISUID_ISGID, eperm))
    for name, flags_arg in (("open", 1), ("openat", 2)):  # open(path, flags, mode), openat(dirfd, path, ...)
        mode_arg = flags_arg + 1
        body = [
            ins(LD_W_ABS, off_arg(flags_arg)),
            ins(JSET_K, O_CREAT, 0, 3),
            ins(LD_W_ABS, off_arg(mode_arg)),
            ins(JSET_K, S_ISUID_ISGID, 0, 1),
            ret(eperm),
            ret(RET_ALLOW),
        ]
        prog += _block(NR[name], body)
    return b"".join(_native([*prog, ret(RET_ALLOW)]))


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install(prog: bytes, libc: ctypes.CDLL) -> None:
    count = len(prog) // 8
    if count > 4096:
        raise ValueError(f"BPF program of {count} instructions (the kernel's limit is 4096)")
    buf = ctypes.create_string_buffer(prog, len(prog))
    fprog = SockFprog(count, ctypes.cast(buf, ctypes.c_void_p))
    if libc.syscall(NR_SECCOMP, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_LOG, ctypes.byref(fprog)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp(SET_MODE_FILTER): {os.strerror(err)}")


# ----------------------------------------------------------------------------- mounts

CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18


def _enc(text: str | None) -> bytes | None:
    return text.encode() if text is not None else None


def _mount(libc: ctypes.CDLL, src: str | None, target: str, fstype: str | None, *flags_data) -> None:
    """mount(2); ``flags_data``: the flags, then optionally the data string."""
    flags, data = flags_data[0], (flags_data[1] if len(flags_data) > 1 else None)
    if libc.mount(_enc(src), target.encode(), _enc(fstype), flags, _enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {src} {target} {fstype} {flags:#x}: {os.strerror(err)}")


def _mountpoints() -> list[tuple[str, set[str]]]:
    points = []
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        for line in handle:
            fields = line.split()
            points.append((fields[4].replace("\\040", " "), set(fields[5].split(","))))
    return points


def _under(path: str, roots: tuple[str, ...] | list[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def apply_mounts(libc: ctypes.CDLL, read_write: list[str]) -> list[str]:
    """ProtectSystem=strict + ReadWritePaths + PrivateTmp + ProtectHome + ProtectKernelTunables +
    ProtectControlGroups in a private mount namespace; returns what was done, one line each."""
    done = []
    if libc.unshare(CLONE_NEWNS) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare(CLONE_NEWNS): {os.strerror(err)}")
    _mount(libc, None, "/", None, MS_REC | MS_PRIVATE)
    for path in read_write:
        _mount(libc, path, path, None, MS_BIND | MS_REC)
    for tmp in ("/tmp", "/var/tmp"):
        if os.path.isdir(tmp):
            _mount(libc, "tmpfs", tmp, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    done.append("PrivateTmp: tmpfs on /tmp and /var/tmp")
    hidden = []
    for home in ("/home", "/root", "/run/user"):
        if os.path.isdir(home) and not any(_under(rw, [home]) for rw in read_write):
            _mount(libc, "tmpfs", home, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=000")
            hidden.append(home)
    done.append(f"ProtectHome: {', '.join(hidden)} emptied (mode 000)")
    untouched = ("/dev", "/proc", "/sys", "/tmp", "/var/tmp", *read_write, *hidden)
    remounted = 0
    for point, _opts in _mountpoints():
        if _under(point, untouched):
            continue
        _mount(libc, None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | _kept_flags(point))
        remounted += 1
    done.append(f"ProtectSystem=strict: {remounted} mounts read-only; ReadWritePaths: {', '.join(read_write)}")
    for path in ("/proc/sys", "/sys", "/sys/fs/cgroup"):
        if not os.path.isdir(path):
            continue
        if not any(point == path for point, _opts in _mountpoints()):
            _mount(libc, path, path, None, MS_BIND | MS_REC)
        _mount(libc, None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | _kept_flags(path))
    done.append("ProtectKernelTunables/ProtectControlGroups: /proc/sys, /sys, /sys/fs/cgroup read-only")
    return done


def _kept_flags(point: str) -> int:
    opts = next((o for p, o in reversed(_mountpoints()) if p == point), set())
    return (
        (MS_NOSUID if "nosuid" in opts else 0)
        | (MS_NODEV if "nodev" in opts else 0)
        | (MS_NOEXEC if "noexec" in opts else 0)
    )


# ----------------------------------------------------------------------------- privileges


def drop_privileges(libc: ctypes.CDLL, uid: int, gid: int) -> None:
    """CapabilityBoundingSet= (empty), then User=/Group= (the kernel clears the capabilities)."""
    cap = 0
    while libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0:
        cap += 1
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--filter", action="append", default=[], help="a SystemCallFilter= entry (repeat)")
    parser.add_argument("--families", default="AF_UNIX AF_INET AF_INET6 AF_NETLINK")
    parser.add_argument("--read-write", action="append", default=[], help="a ReadWritePaths= entry (repeat)")
    parser.add_argument("--no-mounts", action="store_true", help="skip the mount namespace")
    parser.add_argument("--uid", type=int, default=65534)
    parser.add_argument("--gid", type=int, default=65534)
    parser.add_argument("--chdir", help="working directory of the command (WorkingDirectory=)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command")
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    sets = load_sets()
    applied: dict[str, object] = {"systemd_version": sets["systemd_version"], "filter": args.filter}
    if os.geteuid() == 0 and not args.no_mounts:
        try:
            applied["mounts"] = apply_mounts(libc, args.read_write)
        except OSError as exc:
            applied["mounts"] = [f"NOT APPLIED: {exc}"]
    else:
        applied["mounts"] = ["NOT APPLIED: not root" if os.geteuid() != 0 else "NOT APPLIED: --no-mounts"]
    if os.geteuid() == 0:
        drop_privileges(libc, args.uid, args.gid)
        applied["user"] = f"uid {args.uid} gid {args.gid}, no capabilities"
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    numbers = allowed_numbers(args.filter, sets)
    applied["allowed_syscalls"] = len(numbers)
    if args.chdir:
        os.chdir(args.chdir)
    print("SANDBOX_APPLIED " + json.dumps(applied, sort_keys=True), file=sys.stderr, flush=True)
    install(realtime_personality_filter(), libc)
    install(suid_filter(), libc)
    install(namespaces_filter(), libc)
    install(families_filter(args.families.split()), libc)
    install(allow_list_filter(numbers, errno_ret(errno.EPERM)), libc)  # last: nothing after it is needed
    os.execvp(command[0], command)
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
