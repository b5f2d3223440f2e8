"""Runs inside the LXC guest: opens every NVIDIA node and reports what the kernel said.

Passed nodes must exist and fail with ENXIO (the cgroup allows them; no driver is behind them).
A withheld GPU must be absent (ENOENT); after ``mknod`` of it, opening fails with EPERM (the
cgroup has no rule for it). Prints one JSON object; the verify play asserts on it.
"""

import errno
import json
import os
import stat
import sys


def try_open(path: str) -> str:
    try:
        os.close(os.open(path, os.O_RDWR))
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    return "OPENED"


passed, withheld = json.loads(sys.argv[1]), json.loads(sys.argv[2])
report = {"passed": {}, "withheld": {}}
for path in passed:
    st = os.stat(path)
    report["passed"][path] = {
        "chr": stat.S_ISCHR(st.st_mode),
        "rdev": [os.major(st.st_rdev), os.minor(st.st_rdev)],
        "open": try_open(path),
    }
for path, (major, minor) in withheld.items():
    entry = {"exists": os.path.exists(path), "open": try_open(path)}
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    entry["open_after_mknod"] = try_open(path)
    os.unlink(path)
    report["withheld"][path] = entry
with open("/proc/1/limits") as handle:
    report["limits"] = [line.strip() for line in handle if "locked" in line or "open files" in line]
vfs = os.statvfs("/dev/shm")
report["shm_bytes"] = vfs.f_blocks * vfs.f_frsize
print(json.dumps(report))
