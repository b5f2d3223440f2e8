# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Closed-loop load client for SGLang's streaming endpoints (stdlib only, one process, asyncio).

Why it looks like this (docs/measurement.md): the clients of the usual benchmarks lose throughput
to a new connection per request, connection pools capped at 100, 64 KB read buffers and 128 KB
line limits, file-descriptor limits and tokenizer CPU. Here:

- ``concurrency`` workers, each with its own HTTP/1.1 keep-alive connection (no pool cap), send
  one request after another (closed loop at fixed concurrency);
- RLIMIT_NOFILE is raised to fit the connections;
- responses are read by :class:`gate_http.StreamConnection`, an ``asyncio.Protocol`` that decodes
  chunked transfer encoding and splits events itself, with no per-line or per-event size limit;
- tokens are the server's own running ``completion_tokens``; every event is checked by
  :class:`gate_sse.StreamChecker` (malformed, error, backwards, after ``[DONE]``, final count, and a
  count beyond the ``output_ids`` / ``token_ids`` / text the stream carried: ``over-reported tokens``);
- throughput is measured by :mod:`gate_meter` over the steady-state window: from the moment every
  worker has its first token until the first worker finds no request left to send (warmup ramp
  and drain tail excluded).

A trial with any error (HTTP status, error event, malformed event, dropped connection, timeout,
a token count other than the one asked for) is reported as invalid, never as slow.

Deadlines (monotonic clock, :mod:`gate_limits`): a request fails when it makes no progress (a new
token, or its response head) for ``request_timeout`` seconds, and in any case after
``request_timeout + output_len x REQUEST_S_PER_TOKEN``; a trial stops at its own deadline.

The public surface: :class:`LoadClient` and :func:`raise_nofile`, and the types they take and
return (:class:`Shape`, :class:`Target`, :class:`TrialResult`), re-exported from the modules that
define them.
"""

from __future__ import annotations

import asyncio
import math
import time

from ansible_collections.gpufleet.sglang.plugins.module_utils.common.secret_mask import mask_url
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.http import (
    Shape,
    StreamConnection,
    Target,
    build_request,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.limits import (
    CONNECT_TIMEOUT_S,
    REQUEST_S_PER_TOKEN,
    GateInputError,
    trial_deadline,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.meter import Meter, TrialResult, trial_result

try:  # not on every platform; the module reports what it could do
    import resource
except ImportError:  # pragma: no cover
    resource = None  # type: ignore[assignment]

_FD_HEADROOM = 128


__all__ = ["GateInputError", "LoadClient", "Shape", "Target", "TrialResult", "mask_url", "raise_nofile"]


def raise_nofile(needed: int) -> dict[str, int]:
    """Raise the soft RLIMIT_NOFILE to fit ``needed`` descriptors; error if the hard limit cannot."""
    if resource is None:  # pragma: no cover
        return {"soft": -1, "hard": -1}
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = needed + _FD_HEADROOM
    if soft != resource.RLIM_INFINITY and soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            raise GateInputError(
                f"concurrency needs about {want} open files but the hard RLIMIT_NOFILE is {hard}; "
                "raise it (LimitNOFILE / ulimit -Hn) or lower concurrency"
            )
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        soft = want
    return {"soft": int(soft), "hard": int(hard)}


class LoadClient:
    """Runs trials against one server. ``serial`` keeps prompts unique across trials."""

    def __init__(self, url: str, shape: Shape, concurrency: int, request_timeout: float) -> None:
        shape.validate()
        if concurrency < 1:
            raise GateInputError(f"concurrency must be >= 1, got {concurrency}")
        if not (math.isfinite(request_timeout) and request_timeout > 0):
            raise GateInputError(f"request_timeout must be a finite number > 0, got {request_timeout}")
        self.target = Target.from_url(url)
        self.shape = shape
        self.concurrency = concurrency
        self.request_timeout = request_timeout
        self.connect_timeout = min(CONNECT_TIMEOUT_S, request_timeout)
        self.request_ceiling = request_timeout + shape.output_len * REQUEST_S_PER_TOKEN
        self.serial = 0

    async def _open(self, meter: Meter) -> StreamConnection:
        loop = asyncio.get_running_loop()
        try:
            _transport, proto = await asyncio.wait_for(
                loop.create_connection(lambda: StreamConnection(meter, self.shape), self.target.host, self.target.port),
                timeout=self.connect_timeout,
            )
        except (OSError, asyncio.TimeoutError) as exc:
            raise ConnectionError(
                f"cannot connect to {self.target.host}:{self.target.port}: {exc or type(exc).__name__}"
            ) from None
        return proto

    async def run_trial(
        self, requests: int, concurrency: int | None = None, measure: bool = True, deadline_s: float | None = None
    ) -> TrialResult:
        """Send ``requests`` requests at fixed concurrency; measure the steady-state window.

        With ``measure=False`` (warmup) a missing steady-state window is not an error. The trial
        stops, as an error, after ``deadline_s`` seconds (default: :func:`gate_limits.trial_deadline`).
        """
        conc = min(concurrency or self.concurrency, requests)
        if requests < 1:
            raise GateInputError(f"requests must be >= 1, got {requests}")
        if deadline_s is None:
            deadline_s = trial_deadline(requests, conc, self.request_ceiling, self.connect_timeout)
        meter = Meter(concurrency=conc, expected_tokens=self.shape.output_len)
        remaining = [requests]
        t0 = time.perf_counter()
        dog = asyncio.create_task(self._watchdog(meter, t0 + deadline_s, deadline_s))
        try:
            await asyncio.gather(*(self._worker(meter, remaining) for _worker in range(conc)))
        finally:
            dog.cancel()
            for c in meter.conns:
                if c.transport is not None:
                    c.transport.close()
        return trial_result(meter, t0, time.perf_counter(), measure)

    async def _worker(self, meter: Meter, remaining: list[int]) -> None:
        """One closed-loop worker: a request after another on its connection until none is left."""
        conn: StreamConnection | None = None
        first = True
        while not meter.abort:
            if remaining[0] <= 0:
                meter.mark_end()
                break
            remaining[0] -= 1
            if conn is None or conn.lost or conn.close_after:
                try:
                    conn = await self._open(meter)
                except ConnectionError as exc:
                    meter.error(str(exc))
                    break
                meter.conns.append(conn)
            self.serial += 1
            await conn.send(build_request(self.target, self.shape, self.serial), first)
            first = False

    async def _watchdog(self, meter: Meter, trial_end: float, deadline_s: float) -> None:
        """Every 0.25 s: stop the trial past its deadline, fail requests without progress or past their ceiling."""
        idle = self.request_timeout
        ceiling = self.request_ceiling
        while True:
            await asyncio.sleep(0.25)
            now = time.perf_counter()
            if now >= trial_end and not meter.abort:
                meter.error(f"the trial ran past its deadline of {deadline_s:g}s")
            for c in meter.conns:
                if c.state == "idle":
                    continue
                if now - c.request.t_progress > idle:
                    c._fail(f"no progress (no new token) for {idle:g}s (request_timeout)")
                elif now - c.request.t_send > ceiling:
                    c._fail(
                        f"request still running after {ceiling:g}s, its hard ceiling "
                        f"(request_timeout + output_len x {REQUEST_S_PER_TOKEN:g}s)"
                    )
