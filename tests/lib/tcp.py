# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A threaded accept loop for the tests' small TCP servers (the SSH stand-in, the trickling HTTP server)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable


def serve_in_thread(
    sock: socket.socket, handle: Callable[[socket.socket], None], stop: threading.Event, poll_s: float = 0.2
) -> threading.Thread:
    """Accept connections on ``sock`` in a daemon thread until ``stop`` is set or the socket is closed;
    each connection is handed, in blocking mode, to ``handle`` in a daemon thread of its own."""

    def accept_loop() -> None:
        sock.settimeout(poll_s)
        while not stop.is_set():
            try:
                conn, _peer = sock.accept()
            except TimeoutError:
                continue
            except OSError:  # closed by the server's stop
                return
            conn.settimeout(None)
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept_loop, daemon=True)
    thread.start()
    return thread
