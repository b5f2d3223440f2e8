# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A bound on a block that could block forever (an open of a FIFO, a read of /dev/zero), for the unit
tests of code that must refuse such files without opening them."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


@contextlib.contextmanager
def deadline(seconds: int = 5) -> Iterator[None]:
    """Fail the test when the block runs past ``seconds`` (SIGALRM; the main thread only). The failure
    is an AssertionError, not an OSError such as TimeoutError, so the code under test, which turns
    OSErrors into its own named errors, cannot catch it and report a hang as a refusal."""

    def expired(*args: object) -> None:
        raise AssertionError(f"blocked for more than {seconds} s (a FIFO opened for reading?)")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
