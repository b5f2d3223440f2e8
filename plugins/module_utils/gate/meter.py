# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a trial of the throughput gate measured (stdlib only; runs on the target).

- :class:`Meter`: the counters shared by all connections of a trial (tokens, events, completed
  requests, errors, TTFT and ITL samples) and the steady-state window: it opens when every worker
  has its first token and closes when the first worker finds no request left to send (warmup ramp
  and drain tail excluded; docs/measurement.md);
- :class:`RequestMeter`: one request's clock (sent, first token, last progress) and its running
  token count, fed with the server's own ``completion_tokens`` of every checked event;
- :func:`trial_result`: the :class:`TrialResult` of a finished trial, with :func:`percentiles`.
"""

from __future__ import annotations

import math
import time
from array import array
from dataclasses import dataclass, field

__all__ = ["Meter", "RequestMeter", "TrialResult", "percentiles", "trial_result"]

NO_WINDOW = (
    "no steady-state window (every worker must get a token before the first one runs out "
    "of requests): raise requests_per_trial"
)


def percentiles(values: array | list[float], points: tuple[int, ...] = (50, 90, 99)) -> dict[str, float | None]:
    """Nearest-rank percentiles in milliseconds of values in seconds."""
    if not len(values):
        return {f"p{p}": None for p in points}
    s = sorted(values)
    out: dict[str, float | None] = {}
    for p in points:
        idx = max(0, min(len(s) - 1, math.ceil(p / 100.0 * len(s)) - 1))
        out[f"p{p}"] = round(s[idx] * 1000.0, 3)
    return out


@dataclass
class Meter:
    """Counters shared by all connections of a trial."""

    concurrency: int
    expected_tokens: int
    tokens: int = 0
    events: int = 0
    completed: int = 0
    first_token_workers: int = 0
    window_start: tuple[float, int, int] | None = None  # (time, tokens, events)
    window_end: tuple[float, int, int] | None = None
    errors: dict[str, int] = field(default_factory=dict)
    ttft: array = field(default_factory=lambda: array("d"))
    itl: array = field(default_factory=lambda: array("d"))
    abort: bool = False
    conns: list = field(default_factory=list)

    def error(self, message: str) -> None:
        """Record an error and stop the trial: no new requests, open streams are closed."""
        self.errors[message] = self.errors.get(message, 0) + 1
        if not self.abort:
            self.abort = True
            for c in self.conns:
                if c.transport is not None:
                    c.transport.close()

    def mark_start(self) -> None:
        self.window_start = (time.perf_counter(), self.tokens, self.events)

    def mark_end(self) -> None:
        if self.window_end is None:
            self.window_end = (time.perf_counter(), self.tokens, self.events)


@dataclass
class TrialResult:
    output_tokens_per_s: float
    request_throughput: float
    window_s: float
    window_tokens: int
    total_tokens: int
    completed: int
    events: int
    events_per_s: float
    duration_s: float
    ttft_ms: dict[str, float | None]
    itl_ms: dict[str, float | None]
    errors: dict[str, int]
    started: float
    ended: float

    def as_dict(self) -> dict[str, object]:
        return {
            "output_tokens_per_s": round(self.output_tokens_per_s, 3),
            "request_throughput": round(self.request_throughput, 4),
            "window_s": round(self.window_s, 4),
            "window_tokens": self.window_tokens,
            "total_tokens": self.total_tokens,
            "completed_requests": self.completed,
            "events": self.events,
            "events_per_s": round(self.events_per_s, 1),
            "duration_s": round(self.duration_s, 4),
            "ttft_ms": self.ttft_ms,
            "itl_ms": self.itl_ms,
            "errors": [{"message": m, "count": c} for m, c in sorted(self.errors.items())],
        }


class RequestMeter:
    """One request's clock and token count; feeds the trial's :class:`Meter`.

    ``t_progress`` (the last new token, or the response head) is the no-progress clock the load
    client's watchdog reads; ``t_send`` is when the request went out.
    """

    __slots__ = ("first_of_worker", "meter", "saw_first", "t_prev", "t_progress", "t_send", "tokens")

    def __init__(self, meter: Meter, first_of_worker: bool, now: float) -> None:
        self.meter = meter
        self.first_of_worker = first_of_worker
        self.t_send = self.t_progress = now
        self.t_prev = 0.0
        self.tokens = 0
        self.saw_first = False

    def progress(self, now: float) -> None:
        """Something other than a token showed the request is alive (its response head)."""
        self.t_progress = now

    def event(self, tokens: int, now: float) -> None:
        """A checked event arrived at ``now`` with the server's running ``completion_tokens``."""
        meter = self.meter
        meter.events += 1
        opens_window = False
        if not self.saw_first:
            self.saw_first = True
            self.t_prev = now
            meter.ttft.append(now - self.t_send)
            if self.first_of_worker:
                meter.first_token_workers += 1
                opens_window = meter.first_token_workers == meter.concurrency
        if tokens != self.tokens:
            delta = tokens - self.tokens
            if self.tokens:
                meter.itl.append((now - self.t_prev) / delta)
            self.t_prev = self.t_progress = now
            self.tokens = tokens
            meter.tokens += delta
        if opens_window:  # the window opens after the tokens that opened it
            meter.mark_start()


def trial_result(meter: Meter, started: float, ended: float, measure: bool) -> TrialResult:
    """The result of a finished trial; with ``measure`` a missing steady-state window is an error."""
    meter.mark_end()
    start = meter.window_start
    end = meter.window_end
    if end is None:
        raise RuntimeError("meter window has no end")
    if start is None or end[0] <= start[0] or end[1] <= start[1]:
        rate = 0.0
        window_s = 0.0
        window_tokens = 0
        events_rate = 0.0
        if measure and not meter.errors:
            meter.errors[NO_WINDOW] = 1
    else:
        window_s = end[0] - start[0]
        window_tokens = end[1] - start[1]
        rate = window_tokens / window_s
        events_rate = (end[2] - start[2]) / window_s
    duration = ended - started
    return TrialResult(
        output_tokens_per_s=rate,
        request_throughput=meter.completed / duration if duration > 0 else 0.0,
        window_s=window_s,
        window_tokens=window_tokens,
        total_tokens=meter.tokens,
        completed=meter.completed,
        events=meter.events,
        events_per_s=events_rate,
        duration_s=duration,
        ttft_ms=percentiles(meter.ttft),
        itl_ms=percentiles(meter.itl),
        errors=dict(meter.errors),
        started=started,
        ended=ended,
    )
