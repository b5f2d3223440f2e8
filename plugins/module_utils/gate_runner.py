# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The throughput gate end to end: readiness, warmup, trials, telemetry, decision (stdlib only).

The Ansible module is a thin shell around :func:`validate`, :func:`plan` and :func:`run_gate`.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import math
import time
from dataclasses import dataclass, field

from ansible_collections.gpufleet.sglang.plugins.module_utils.gate_client import (
    GateInputError,
    LoadClient,
    Shape,
    Target,
    TrialResult,
    raise_nofile,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate_stats import MIN_TRIALS, decide, median
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate_telemetry import (
    Sampler,
    command,
    summarize,
    summary_line,
    throttle_reasons,
)

READY_PATH = "/health_generate"


@dataclass
class GateParams:
    url: str = "http://127.0.0.1:30000"
    api: str = "native"
    model: str = ""
    api_key: str | None = None
    concurrency: int = 64
    requests_per_trial: int = 256
    input_len: int = 1024
    output_len: int = 256
    warmup_requests: int = 64
    trials: int = 5
    baseline: list[float] = field(default_factory=list)
    tolerance: float = 0.10
    alpha: float = 0.05
    min_output_tokens_per_s: float = 0.0
    ready_timeout: float = 1800.0
    request_timeout: float = 300.0
    telemetry: bool = True
    nvidia_smi_path: str = "nvidia-smi"
    telemetry_interval_ms: int = 200
    max_invalid_trials: int | None = None
    fail_on_unknown: bool = True

    def shape(self) -> Shape:
        return Shape(self.api, self.model, self.input_len, self.output_len, self.api_key)


def validate(p: GateParams) -> None:
    """Raise :class:`GateInputError` naming the first bad option."""
    Target.from_url(p.url)
    p.shape().validate()
    for name in ("concurrency", "requests_per_trial", "trials"):
        if getattr(p, name) < 1:
            raise GateInputError(f"{name} must be >= 1, got {getattr(p, name)}")
    if p.warmup_requests < 0:
        raise GateInputError(f"warmup_requests must be >= 0, got {p.warmup_requests}")
    if p.requests_per_trial < p.concurrency:
        raise GateInputError(
            f"requests_per_trial ({p.requests_per_trial}) must be >= concurrency ({p.concurrency}): "
            "a trial needs every stream busy to have a steady-state window"
        )
    if not 0 <= p.tolerance < 1:
        raise GateInputError(f"tolerance must be in [0, 1) (a fraction, 0.10 = 10%), got {p.tolerance}")
    if not 0 < p.alpha < 1:
        raise GateInputError(f"alpha must be in (0, 1), got {p.alpha}")
    if p.min_output_tokens_per_s < 0:
        raise GateInputError(f"min_output_tokens_per_s must be >= 0, got {p.min_output_tokens_per_s}")
    for name in ("ready_timeout", "request_timeout"):
        if getattr(p, name) <= 0:
            raise GateInputError(f"{name} must be > 0 seconds, got {getattr(p, name)}")
    if not 50 <= p.telemetry_interval_ms <= 60000:
        raise GateInputError(f"telemetry_interval_ms must be in [50, 60000], got {p.telemetry_interval_ms}")
    if p.max_invalid_trials is not None and p.max_invalid_trials < 0:
        raise GateInputError(f"max_invalid_trials must be >= 0, got {p.max_invalid_trials}")
    for i, v in enumerate(p.baseline):
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v <= 0:
            raise GateInputError(f"baseline[{i}] must be a positive number of tokens/s, got {v!r}")


def plan(p: GateParams) -> dict[str, object]:
    """What a run would do, without sending anything (check mode)."""
    shape = p.shape()
    return {
        "ready_check": f"GET {p.url.rstrip('/')}{READY_PATH} until 200 (up to {p.ready_timeout:g}s)",
        "endpoint": f"POST {p.url.rstrip('/')}{shape.path()} (stream)",
        "request_shape": {"input_len": p.input_len, "output_len": p.output_len, "ignore_eos": True},
        "concurrency": p.concurrency,
        "warmup_requests": p.warmup_requests,
        "trials": p.trials,
        "requests_per_trial": p.requests_per_trial,
        "baseline_trials": len(p.baseline),
        "statistical_verdict": len(p.baseline) >= MIN_TRIALS,
        "telemetry_command": command(p.nvidia_smi_path, p.telemetry_interval_ms) if p.telemetry else None,
    }


def _get(target: Target, path: str, api_key: str | None, timeout: float) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(target.host, target.port, timeout=timeout)
    try:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        conn.request("GET", target.base_path + path, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def wait_ready(p: GateParams) -> dict[str, object]:
    """Poll ``/health_generate`` (a real 1-token generation; 503 while JIT/autotune run) until 200."""
    target = Target.from_url(p.url)
    start = time.monotonic()
    deadline = start + p.ready_timeout
    last = "no answer yet"
    polls = 0
    while True:
        polls += 1
        try:
            status, body = _get(target, READY_PATH, p.api_key, timeout=min(30.0, p.ready_timeout))
            if status == 200:
                break
            last = f"HTTP {status} {body[:120].decode('utf-8', 'replace')}".strip()
        except (OSError, http.client.HTTPException) as exc:
            last = f"{type(exc).__name__}: {exc}"
        if time.monotonic() >= deadline:
            raise TimeoutError(
                f"SGLang at {p.url} not ready after {p.ready_timeout:g}s ({polls} polls of {READY_PATH}); last: {last}"
            )
        time.sleep(min(2.0, max(0.05, deadline - time.monotonic())))
    info: dict[str, object] = {"waited_s": round(time.monotonic() - start, 3)}
    try:
        status, body = _get(target, "/server_info", p.api_key, timeout=10)
        if status == 200:
            data = json.loads(body)
            if isinstance(data, dict):
                info["version"] = data.get("version")
    except (OSError, http.client.HTTPException, ValueError):
        pass
    return info


_ROW = "{:<8} {:<22} {:>11} {:>11} {:>8} {:>9} {}"
SUMMARY_HEADER = _ROW.format("verdict", "reason", "tok/s", "baseline", "delta%", "p", "gpu power")


def summary_row(result: dict[str, object]) -> str:
    """One line of the play-end summary table (columns of :data:`SUMMARY_HEADER`)."""

    def cell(value: object, fmt: str = "{}") -> str:
        return "-" if value is None else fmt.format(value)

    tele = result.get("telemetry") or {}
    gpus = tele.get("gpus") or [] if isinstance(tele, dict) else []
    pcts = [g["avg_power_pct_of_limit"] for g in gpus if g.get("avg_power_pct_of_limit") is not None]
    power = f"{sum(pcts) / len(pcts):.1f}% of limit avg, {len(gpus)} GPUs" if pcts else "n/a"
    if isinstance(tele, dict) and tele.get("under_use"):
        power += " UNDER-USE"
    if isinstance(tele, dict) and tele.get("throttled"):
        power += " THROTTLED"
    return _ROW.format(
        str(result.get("verdict", "unknown")).upper(),
        result.get("reason", ""),
        cell(result.get("median_output_tokens_per_s"), "{:.1f}"),
        cell(result.get("baseline_median"), "{:.1f}"),
        cell(result.get("delta_pct"), "{:+.1f}"),
        cell(result.get("p_value"), "{:.4f}"),
        power,
    )


def _trial_record(n: int, r: TrialResult, valid: bool, reason: str, rerun: bool) -> dict[str, object]:
    rec = {"n": n, "valid": valid, "invalid_reason": reason, "extra_round": rerun}
    rec.update(r.as_dict())
    return rec


async def _measure(p: GateParams) -> dict[str, object]:
    client = LoadClient(p.url, p.shape(), p.concurrency, p.request_timeout)
    out: dict[str, object] = {}
    warm = None
    if p.warmup_requests:
        warm = await client.run_trial(p.warmup_requests, min(p.concurrency, p.warmup_requests), measure=False)
    out["warmup"] = {
        "requests": p.warmup_requests,
        "completed": warm.completed if warm else 0,
        "errors": warm.as_dict()["errors"] if warm else [],
    }
    sampler = Sampler(p.nvidia_smi_path, p.telemetry_interval_ms) if p.telemetry else None
    if sampler is not None:
        await sampler.start()
        await asyncio.sleep(p.telemetry_interval_ms / 1000.0)  # the first sample lands before load
    records: list[dict[str, object]] = []
    valid: list[float] = []
    windows: list[tuple[float, float]] = []
    budget = p.trials if p.max_invalid_trials is None else p.max_invalid_trials
    invalid = 0
    decision = None
    rerun = False
    try:
        for round_no in (0, 1):
            want = len(valid) + p.trials
            while len(valid) < want:
                r = await client.run_trial(p.requests_per_trial)
                windows.append((r.started, r.ended))
                reason = ""
                if r.errors:
                    reason = "errors: " + "; ".join(f"{m} (x{c})" for m, c in sorted(r.errors.items()))
                elif sampler is not None and sampler.samples:
                    throttled = throttle_reasons(sampler.samples, r.started, r.ended)
                    if throttled:
                        reason = "GPU throttled: " + ", ".join(throttled)
                records.append(_trial_record(len(records) + 1, r, not reason, reason, bool(round_no)))
                if reason:
                    invalid += 1
                    if invalid > budget:
                        out.update(trials=records, windows=windows, invalid=invalid, valid=valid)
                        out["aborted"] = f"{invalid} invalid trials (allowed {budget}); last: {reason}"
                        return out
                    continue
                valid.append(r.output_tokens_per_s)
            decision = decide(
                valid,
                p.baseline,
                tolerance=p.tolerance,
                alpha=p.alpha,
                min_output_tokens_per_s=p.min_output_tokens_per_s,
            )
            if decision.verdict != "unknown" or round_no == 1:
                break
            rerun = True
    finally:
        if sampler is not None:
            await sampler.stop()
            out["telemetry_problems"] = sampler.problems
            out["samples"] = sampler.samples
    out.update(trials=records, windows=windows, invalid=invalid, valid=valid, decision=decision, rerun=rerun)
    return out


def run_gate(p: GateParams) -> tuple[bool, str, dict[str, object]]:
    """Run the gate. Returns ``(failed, message, result)``; never raises for a bad server."""
    result: dict[str, object] = {
        "verdict": "unknown",
        "reason": "",
        "trials": [],
        "median_output_tokens_per_s": None,
        "baseline_median": median(p.baseline) if p.baseline else None,
        "baseline_trials": len(p.baseline),
        "delta_pct": None,
        "p_value": None,
        "telemetry": {"available": False, "reason": "disabled" if not p.telemetry else "not started"},
        "extra_round": False,
        "invalid_trials": 0,
    }
    try:
        result["ready"] = wait_ready(p)
        result["nofile"] = raise_nofile(p.concurrency)
        out = asyncio.run(_measure(p))
    except (TimeoutError, GateInputError, ConnectionError) as exc:
        result["reason"] = "not_ready" if isinstance(exc, TimeoutError) else "error"
        return True, str(exc), result
    records = out["trials"]
    result["trials"] = records
    result["warmup"] = out.get("warmup")
    result["invalid_trials"] = out["invalid"]
    result["valid_trial_values"] = [round(v, 3) for v in out["valid"]]
    if p.telemetry:
        samples = out.get("samples") or []
        tele = summarize(samples, out["windows"])
        if not tele["available"]:
            problems = out.get("telemetry_problems") or []
            tele["reason"] = "; ".join(problems) if problems else "no samples"
        tele["problems"] = out.get("telemetry_problems") or []
        result["telemetry"] = tele
    tele_line = summary_line(result["telemetry"])  # type: ignore[arg-type]
    if out.get("aborted"):
        result["reason"] = "invalid_trials"
        return (
            True,
            f"throughput gate could not measure {p.url}: {out['aborted']}. Invalid trials are not counted as a "
            f"regression; fix the server or the request shape. {tele_line}",
            result,
        )
    d = out["decision"]
    if d is None:
        raise AssertionError("gate run returned no decision")
    result.update(
        verdict=d.verdict,
        reason=d.reason,
        median_output_tokens_per_s=round(d.current_median, 3),
        baseline_median=None if d.baseline_median is None else round(d.baseline_median, 3),
        delta_pct=None if d.delta_pct is None else round(d.delta_pct, 2),
        p_value=d.p_value,
        threshold=None if d.threshold is None else round(d.threshold, 3),
        extra_round=out["rerun"],
    )
    stats = (
        f"baseline median {result['baseline_median']} tok/s ({len(p.baseline)} trials), current median "
        f"{result['median_output_tokens_per_s']} tok/s ({len(out['valid'])} trials), delta {result['delta_pct']}%, "
        f"p-value {None if d.p_value is None else round(d.p_value, 5)} (one-sided Mann-Whitney, alpha {p.alpha}), "
        f"tolerance {p.tolerance * 100:g}%"
    )
    if d.reason == "below_floor":
        return (
            True,
            f"throughput gate FAIL: current median {result['median_output_tokens_per_s']} tok/s is below "
            f"min_output_tokens_per_s {p.min_output_tokens_per_s:g}; {stats}. {tele_line}",
            result,
        )
    if d.verdict == "fail":
        return True, f"throughput gate FAIL (regression): {stats}. {tele_line}", result
    if d.verdict == "unknown":
        msg = f"throughput gate UNKNOWN after an extra round of {p.trials} trials (inconclusive): {stats}. {tele_line}"
        return p.fail_on_unknown, msg, result
    if d.reason in ("baseline_insufficient", "no_baseline"):
        msg = (
            f"throughput gate PASS without a statistical verdict ({d.reason}: baseline has {len(p.baseline)} "
            f"trials, needs >= {MIN_TRIALS}); current median {result['median_output_tokens_per_s']} tok/s. {tele_line}"
        )
    else:
        msg = f"throughput gate PASS ({d.reason}): {stats}. {tele_line}"
    return False, msg, result
