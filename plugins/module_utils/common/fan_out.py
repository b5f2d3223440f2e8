# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read many URLs at once within one deadline (stdlib only).

``gather`` runs ``fetch`` for each key on a bounded pool of daemon threads and returns what came
back by the deadline: each key's answer, or the exception its fetch raised. A key with no entry in
the result had no answer in time (not started, or still running at the deadline). The threads are
daemons: one stuck in a read past the deadline does not hold the caller, nor the process at exit.
A fetch is told the seconds left, so it can cap its own timeout at them.

The module ``rollout_room`` reads the fleet's nodes with it (docs/fleet-scale.md, "A look at the fleet").
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable

WORKERS = 16  # at most this many reads at once (a look over 200 nodes: 13 rounds, not 200)


class _Reads:
    """The state of one ``gather``: what is still to read, what is being read, what came back."""

    def __init__(
        self, fetch: Callable[[str, float], bytes], then: Callable[[str, bytes], Iterable[str]] | None, deadline: float
    ) -> None:
        self.fetch, self.then, self.deadline = fetch, then, deadline
        self.lock = threading.Lock()
        self.idle = threading.Condition(self.lock)  # readers waiting for a follow-up
        self.finished = threading.Condition(self.lock)  # the caller waiting for the end
        self.queue: deque[str] = deque()
        self.seen: set[str] = set()
        self.done: dict[str, bytes | Exception] = {}
        self.running = 0
        self.closed = False

    def add(self, keys: Iterable[str]) -> int:  # under the lock
        before = len(self.queue)
        for k in keys:
            if k not in self.seen:
                self.seen.add(k)
                self.queue.append(k)
        return len(self.queue) - before

    def read(self, key: str) -> tuple[bytes | Exception | None, list[str]]:
        """``key``'s answer (None past the deadline: not read) and the keys it names next."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            return None, []
        try:
            answer = self.fetch(key, left)
            return answer, list(self.then(key, answer)) if self.then is not None else []
        except Exception as exc:  # handed to the caller, which decides what counts
            return exc, []

    def work(self) -> None:
        while True:
            with self.lock:
                while not self.queue and self.running and not self.closed:
                    self.idle.wait()  # a running read may still name a follow-up
                if self.closed or not self.queue:
                    return
                key = self.queue.popleft()
                self.running += 1
            answer, more = self.read(key)
            with self.lock:
                self.running -= 1
                added = 0
                if answer is not None and not self.closed:
                    self.done[key] = answer
                    added = self.add(more)
                if not self.queue and not self.running:
                    self.idle.notify_all()  # all read: the idle readers end
                    self.finished.notify_all()
                elif added:
                    self.idle.notify(added)

    def wait(self) -> dict[str, bytes | Exception]:
        with self.lock:
            while self.queue or self.running:
                left = self.deadline - time.monotonic()
                if left <= 0:
                    break
                self.finished.wait(left)
            self.closed = True
            self.idle.notify_all()
            return dict(self.done)


def gather(
    first: Iterable[str],
    fetch: Callable[[str, float], bytes],
    *,
    deadline: float,
    then: Callable[[str, bytes], Iterable[str]] | None = None,
    workers: int = WORKERS,
) -> dict[str, bytes | Exception]:
    """``fetch(key, seconds_left)`` for each key of ``first``, each key once, on at most ``workers``
    threads, until ``deadline`` (a ``time.monotonic()`` value). After an answer, ``then(key, answer)``
    may name further keys to fetch (a second read that depends on the first), each once too.

    Returns ``{key: answer or the exception its fetch or then raised}`` for the keys that finished by
    the deadline; a key that finishes after it is dropped, whatever it answers.

    ``workers=0`` reads in the calling thread, one key after another, the same way: for answers that
    come at once (a simulation), where a thread's start and wake-up would be most of the cost. The
    deadline is then checked before each read, but a read that hangs is not cut."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
        raise ValueError(f"workers must be an integer >= 0 (0: in the calling thread), got {workers!r}")
    reads = _Reads(fetch, then, deadline)
    with reads.lock:
        count = min(workers, reads.add(first))
    if workers == 0:
        reads.work()
    for i in range(count):
        threading.Thread(target=reads.work, name=f"gather-{i}", daemon=True).start()
    return reads.wait()
