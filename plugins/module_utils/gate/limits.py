# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every numeric bound, deadline and memory ceiling of the throughput gate, in one place (stdlib only).

:data:`BOUNDS` is the one table of option ranges; :func:`check_bounds` applies it before anything
is sent. :func:`deadlines` derives the per-operation deadlines (monotonic clock) and
:func:`trial_memory_ceiling` the most one trial can hold in memory; both are in the plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


class GateInputError(ValueError):
    """An option or a URL that cannot work; the message names it."""


@dataclass(frozen=True)
class Bound:
    low: float
    high: float
    low_open: bool = False  # the low end itself is refused
    high_open: bool = False
    integer: bool = False
    unit: str = ""

    def text(self) -> str:
        return f"{'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}" + (
            f" {self.unit}" if self.unit else ""
        )

    def holds(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below


# option -> allowed range. Upper bounds keep one run's memory and time bounded (see
# trial_memory_ceiling); they are far above any real benchmark shape.
BOUNDS: dict[str, Bound] = {
    "concurrency": Bound(1, 4096, integer=True),
    "requests_per_trial": Bound(1, 65536, integer=True),
    "input_len": Bound(1, 262144, integer=True, unit="tokens"),
    "output_len": Bound(1, 32768, integer=True, unit="tokens"),
    "warmup_requests": Bound(0, 65536, integer=True),
    "trials": Bound(1, 50, integer=True),
    # sequential design: at least 2 trials before a verdict (one lucky trial never decides); the
    # cap, the FAIL error rate beta and the indifference half-width margin (docs/measurement.md)
    "min_trials": Bound(2, 50, integer=True),
    "max_trials": Bound(2, 100, integer=True),
    "beta": Bound(0, 0.5, low_open=True, high_open=True),
    "margin": Bound(0.01, 0.5),
    "max_invalid_trials": Bound(0, 100, integer=True),
    "tolerance": Bound(0, 1, high_open=True),
    "alpha": Bound(0, 1, low_open=True, high_open=True),
    "min_output_tokens_per_s": Bound(0, 1e8, unit="tokens/s"),
    "ready_timeout": Bound(1, 86400, unit="s"),
    "request_timeout": Bound(1, 3600, unit="s"),
    "telemetry_interval_ms": Bound(50, 60000, integer=True, unit="ms"),
    "baseline[]": Bound(0, 1e8, low_open=True, unit="tokens/s"),
}
MAX_BASELINE_VALUES = 1000
# output tokens one trial may ask for (requests_per_trial x output_len): bounds the latency arrays
MAX_TRIAL_TOKENS = 1 << 22

# deadlines
REQUEST_S_PER_TOKEN = 0.5  # hard per-request ceiling: request_timeout + output_len x this
CONNECT_TIMEOUT_S = 30.0  # at most; never more than request_timeout
READY_POLL_S = 30.0  # one readiness poll (never past the ready deadline)
READY_INTERVAL_S = 2.0  # pause between readiness polls
SERVER_INFO_TIMEOUT_S = 10.0
TELEMETRY_STOP_S = 15.0  # stopping nvidia-smi and its reader (two 5 s waits and slack)

# memory
READ_SIZE = 256 * 1024  # the most asyncio hands to data_received at once
EVENT_BASE_BYTES = 64 * 1024
EVENT_BYTES_PER_TOKEN = 64  # a cumulative native event carries the text and ids of every token so far
CONN_OVERHEAD_BYTES = 8 * 1024  # transport, protocol and parser state per connection
MAX_TRIAL_MEMORY_BYTES = 2 << 30
HEAD_MAX_BYTES = 64 * 1024  # a response head (status line and headers)
HEALTH_BODY_MAX_BYTES = 1 << 20  # body of /health_generate or /server_info kept


def check_bounds(values: dict[str, object]) -> None:
    """Raise :class:`GateInputError` naming the first option outside :data:`BOUNDS` (NaN and inf included)."""
    for name, bound in BOUNDS.items():
        if name == "baseline[]":
            continue
        value = values.get(name)
        if value is None and name == "max_invalid_trials":
            continue
        _check_one(name, value, bound)
    baseline = values.get("baseline") or []
    if not isinstance(baseline, list):
        raise GateInputError(f"baseline must be a list of tokens/s values, got {type(baseline).__name__}")
    if len(baseline) > MAX_BASELINE_VALUES:
        raise GateInputError(f"baseline has {len(baseline)} values; at most {MAX_BASELINE_VALUES} are accepted")
    for i, v in enumerate(baseline):
        _check_one(f"baseline[{i}]", v, BOUNDS["baseline[]"])


def _check_one(name: str, value: object, bound: Bound) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise GateInputError(f"{name} must be a number in {bound.text()}, got {value!r}")
    if bound.integer and value != int(value):
        raise GateInputError(f"{name} must be a whole number in {bound.text()}, got {value!r}")
    if not bound.holds(float(value)):
        raise GateInputError(f"{name} must be a finite number in {bound.text()}, got {value!r}")


def request_body_bytes(input_len: int) -> int:
    """Upper bound of one request's bytes: ids of up to 5 digits plus a comma, and the JSON and head around them."""
    return 6 * input_len + 2048


def max_event_bytes(output_len: int) -> int:
    """The largest server-sent event accepted; a larger one is an error (a server that never ends an event)."""
    return EVENT_BASE_BYTES + EVENT_BYTES_PER_TOKEN * output_len


def trial_memory_ceiling(concurrency: int, requests: int, input_len: int, output_len: int) -> int:
    """Bytes one trial can hold at most.

    Per connection: one request, one read, the event being assembled, the previous event (kept to
    check the next one) and the decoded final event; per trial: one time-to-first-token per request
    and at most one inter-token latency per output token (8-byte doubles).
    """
    per_conn = request_body_bytes(input_len) + READ_SIZE + 3 * max_event_bytes(output_len) + CONN_OVERHEAD_BYTES
    return concurrency * per_conn + 8 * (requests + requests * output_len)


def check_memory(concurrency: int, requests: int, input_len: int, output_len: int) -> int:
    """The trial memory ceiling; raise :class:`GateInputError` when it exceeds :data:`MAX_TRIAL_MEMORY_BYTES`."""
    if requests * output_len > MAX_TRIAL_TOKENS:
        raise GateInputError(
            f"requests_per_trial x output_len = {requests * output_len} tokens per trial; at most "
            f"{MAX_TRIAL_TOKENS} are accepted (lower requests_per_trial or output_len)"
        )
    need = trial_memory_ceiling(concurrency, requests, input_len, output_len)
    if need > MAX_TRIAL_MEMORY_BYTES:
        raise GateInputError(
            f"one trial could hold {need / 2**20:.0f} MiB (concurrency {concurrency}, input_len {input_len}, "
            f"output_len {output_len}); the ceiling is {MAX_TRIAL_MEMORY_BYTES / 2**20:.0f} MiB: lower concurrency, "
            "input_len or output_len"
        )
    return need


@dataclass(frozen=True)
class Deadlines:
    """Seconds each operation may take at most (monotonic clock)."""

    ready_s: float
    connect_s: float
    request_idle_s: float
    request_s: float
    warmup_s: float
    trial_s: float
    max_trials: int
    run_s: float

    def as_dict(self) -> dict[str, float]:
        return {k: round(float(v), 3) for k, v in self.__dict__.items()}


def trial_deadline(requests: int, concurrency: int, request_s: float, connect_s: float) -> float:
    """A trial's deadline: one request ceiling (with its connect) per wave of ``concurrency`` requests, plus one."""
    waves = math.ceil(requests / max(1, min(concurrency, requests)))
    return (waves + 1) * (request_s + connect_s)


def deadlines(
    *,
    ready_timeout: float,
    request_timeout: float,
    output_len: int,
    concurrency: int,
    requests_per_trial: int,
    warmup_requests: int,
    trials: int,
    max_invalid_trials: int | None,
    telemetry_interval_ms: int,
    most_trials: int | None = None,
) -> Deadlines:
    """Every deadline of one run, derived from the options (all finite once :func:`check_bounds` passed).

    ``most_trials`` is the most valid trials the design can need (``gate_stats.Design.most_trials``:
    the sequential cap, or a round and the extra round); default ``2 x trials``.
    """
    connect_s = min(CONNECT_TIMEOUT_S, request_timeout)
    request_s = request_timeout + output_len * REQUEST_S_PER_TOKEN
    trial_s = trial_deadline(requests_per_trial, concurrency, request_s, connect_s)
    warmup_s = trial_deadline(warmup_requests, concurrency, request_s, connect_s) if warmup_requests else 0.0
    invalid = trials if max_invalid_trials is None else max_invalid_trials
    valid = 2 * trials if most_trials is None else most_trials
    max_trials = valid + invalid  # the most valid trials, and the retried invalid ones
    run_s = (
        ready_timeout
        + SERVER_INFO_TIMEOUT_S
        + warmup_s
        + max_trials * trial_s
        + telemetry_interval_ms / 1000.0
        + TELEMETRY_STOP_S
    )
    return Deadlines(ready_timeout, connect_s, request_timeout, request_s, warmup_s, trial_s, max_trials, run_s)
