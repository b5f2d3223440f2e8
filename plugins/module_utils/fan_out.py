# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read many URLs at once within one deadline (stdlib only).

``gather`` runs ``fetch`` for each key on a bounded pool of daemon threads and returns what came
back by the deadline: each key's answer, or the exception its fetch raised. A key with no entry in
the result had no answer in time (not started, or still running at the deadline). The threads are
daemons: one stuck in a read past the deadline does not hold the caller, nor the process at exit.
A fetch is told the seconds left, so it can cap its own timeout at them.

The module ``rollout_room`` reads the fleet's nodes with it (docs/fleet-scale.md, "A look").
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable

WORKERS = 16  # at most this many reads at once (a look over 200 nodes: 13 rounds, not 200)


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
    the deadline; a key that finishes after it is dropped, whatever it answers."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    state = threading.Condition()
    queue: deque[str] = deque()
    seen: set[str] = set()
    done: dict[str, bytes | Exception] = {}
    running = 0
    closed = False

    def add(keys: Iterable[str]) -> None:  # under state
        for k in keys:
            if k not in seen:
                seen.add(k)
                queue.append(k)

    def work() -> None:
        nonlocal running
        while True:
            with state:
                while not queue and running and not closed:
                    state.wait()  # a running read may still name a follow-up
                if closed or not queue:
                    state.notify_all()
                    return
                key = queue.popleft()
                running += 1
            left = deadline - time.monotonic()
            answer: bytes | Exception | None = None
            more: list[str] = []
            if left > 0:
                try:
                    answer = fetch(key, left)
                    more = list(then(key, answer)) if then is not None else []
                except Exception as exc:  # handed to the caller, which decides what counts
                    answer = exc
            with state:
                running -= 1
                if answer is not None and not closed:
                    done[key] = answer
                    add(more)
                state.notify_all()

    with state:
        add(first)
        count = min(workers, len(queue))
    for i in range(count):
        threading.Thread(target=work, name=f"gather-{i}", daemon=True).start()
    with state:
        while queue or running:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            state.wait(left)
        closed = True
        state.notify_all()
        return dict(done)
