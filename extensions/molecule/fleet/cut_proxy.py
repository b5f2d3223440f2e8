# Copyright (c) gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""STAND-IN for a network that breaks mid-rollout (molecule/fleet drill U only; not part of the collection).

What it stands in for: the link to one node going down (a switch port, a host that froze) in the
middle of a rolling upgrade, while the node's SSH connection is otherwise the one every node uses
(SSH with pipelining and ControlPersist). OpenSSH then exits 255 and Ansible's ssh connection
reports the host UNREACHABLE; that is what happens here, through OpenSSH itself.

How: the node's ssh runs with ``-o ProxyCommand=python3 cut_proxy.py ...``, so its TCP stream to
sshd goes through this relay. The relay connects to sshd and copies bytes both ways; it refuses to
connect (exit 255, a message on stderr) when the file ``--cut-when`` exists, and it closes a
connection it holds as soon as the file appears (checked every 0.2 s), which ends ssh's
ControlPersist master: the node's next task opens a new connection, which is refused. The file is
read through the container's root (``/proc/<pid>/root``), so the check costs no command.

    cut_proxy.py --root /proc/<pid>/root --cut-when /path/in/container --connect 127.0.0.1:2231
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import threading

POLL_S = 0.2
CONNECT_TIMEOUT_S = 10


def cut(root: str, path: str) -> bool:
    return os.path.lexists(os.path.join(root, path.lstrip("/")))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", required=True, help="the container's root seen from here (/proc/<pid>/root)")
    ap.add_argument("--cut-when", required=True, help="path inside the container; once it exists the link is down")
    ap.add_argument("--connect", required=True, help="sshd's HOST:PORT")
    args = ap.parse_args()
    host, _sep, port = args.connect.rpartition(":")
    if cut(args.root, args.cut_when):
        print(f"cut_proxy: link to {args.connect} down ({args.cut_when} exists): no route to host", file=sys.stderr)
        return 255
    sock = socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S)
    sock.settimeout(None)
    done = threading.Event()

    def upstream() -> None:  # ssh -> sshd
        try:
            while chunk := os.read(0, 65536):
                sock.sendall(chunk)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def downstream() -> None:  # sshd -> ssh
        try:
            while chunk := sock.recv(65536):
                os.write(1, chunk)
        except OSError:
            pass
        done.set()

    for fn in (upstream, downstream):
        threading.Thread(target=fn, daemon=True).start()
    while not done.wait(POLL_S):
        if cut(args.root, args.cut_when):
            print(f"cut_proxy: link to {args.connect} went down ({args.cut_when} appeared)", file=sys.stderr)
            sock.close()
            return 255
    return 0


if __name__ == "__main__":
    sys.exit(main())
