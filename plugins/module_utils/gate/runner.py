# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The throughput gate end to end: readiness, warmup, trials, telemetry, decision (stdlib only).

The Ansible module is a thin shell around :func:`validate`, :func:`plan` and :func:`run_gate`.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import socket
import time
from dataclasses import dataclass, field, fields

from ansible_collections.gpufleet.sglang.plugins.module_utils.common.secret_mask import secret_forms, secrets_of
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.client import (
    LoadClient,
    Shape,
    Target,
    TrialResult,
    mask_url,
    raise_nofile,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.limits import (
    HEAD_MAX_BYTES,
    HEALTH_BODY_MAX_BYTES,
    READY_INTERVAL_S,
    READY_POLL_S,
    SERVER_INFO_TIMEOUT_S,
    Deadlines,
    GateInputError,
    check_bounds,
    check_memory,
    deadlines,
    trial_memory_ceiling,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.spec import default
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.stats import (
    MIN_TRIALS,
    Decision,
    Design,
    baseline_spread_problem,
    evaluate,
    median,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.telemetry import (
    Sampler,
    command,
    summarize,
    telemetry_line,
    throttle_reasons,
)


@dataclass
class GateParams:
    """The module's options; every default is the argument spec's (gate_spec.GATE_ARGUMENT_SPEC)."""

    url: str = default("url")
    api: str = default("api")
    model: str = default("model")
    api_key: str | None = default("api_key")
    concurrency: int = default("concurrency")
    requests_per_trial: int = default("requests_per_trial")
    input_len: int = default("input_len")
    output_len: int = default("output_len")
    warmup_requests: int = default("warmup_requests")
    trials: int = default("trials")
    baseline: list[float] = field(default_factory=lambda: default("baseline"))
    tolerance: float = default("tolerance")
    alpha: float = default("alpha")
    design: str = default("design")
    min_trials: int = default("min_trials")
    max_trials: int = default("max_trials")
    beta: float = default("beta")
    margin: float = default("margin")
    min_output_tokens_per_s: float = default("min_output_tokens_per_s")
    ready_path: str = default("ready_path")
    ready_timeout: float = default("ready_timeout")
    request_timeout: float = default("request_timeout")
    telemetry: bool = default("telemetry")
    nvidia_smi_path: str = default("nvidia_smi_path")
    telemetry_interval_ms: int = default("telemetry_interval_ms")
    max_invalid_trials: int | None = default("max_invalid_trials")
    fail_on_unknown: bool = default("fail_on_unknown")

    def shape(self) -> Shape:
        return Shape(self.api, self.model, self.input_len, self.output_len, self.api_key)

    def design_rule(self) -> Design:
        return Design(name=self.design, **options_of(self, DESIGN_OPTIONS))


def options_of(p: GateParams, names: tuple[str, ...]) -> dict[str, object]:
    """``p``'s options ``names``, by name (the keyword arguments of what takes them under the same names)."""
    return {name: getattr(p, name) for name in names}


# the options the stopping rule takes: Design's fields but its name (p.design)
DESIGN_OPTIONS = tuple(f.name for f in fields(Design) if f.name != "name")
# the options the run's deadlines are worked out from: limits.deadlines's parameters but most_trials
DEADLINE_OPTIONS = tuple(name for name in inspect.signature(deadlines).parameters if name != "most_trials")


NUMERIC_OPTIONS = (
    "concurrency",
    "requests_per_trial",
    "input_len",
    "output_len",
    "warmup_requests",
    "trials",
    "min_trials",
    "max_trials",
    "max_invalid_trials",
    "tolerance",
    "alpha",
    "beta",
    "margin",
    "min_output_tokens_per_s",
    "ready_timeout",
    "request_timeout",
    "telemetry_interval_ms",
)


READY_PATH_MAX_CHARS = 1024


def check_ready_path(path: str) -> None:
    """A readiness path goes into the request line as it is: ``/`` first, then printable ASCII without spaces."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise GateInputError(f"ready_path must start with '/' (got {str(path)[:80]!r})")
    if len(path) > READY_PATH_MAX_CHARS or any(not "!" <= ch <= "~" for ch in path):
        raise GateInputError(
            f"ready_path must be printable ASCII without spaces, at most {READY_PATH_MAX_CHARS} characters "
            f"(got {path[:80]!r})"
        )


def validate(p: GateParams) -> None:
    """Raise :class:`GateInputError` naming the first bad option; nothing has been sent yet."""
    Target.from_url(p.url)
    check_ready_path(p.ready_path)
    p.shape().validate()
    values = options_of(p, NUMERIC_OPTIONS)
    values["baseline"] = p.baseline
    check_bounds(values)
    spread = baseline_spread_problem(p.baseline) if p.baseline else None
    if spread:
        raise GateInputError(f"baseline: {spread}; give a baseline measured while nothing else loaded the server")
    try:
        p.design_rule().check()
    except ValueError as exc:
        raise GateInputError(str(exc)) from None
    if p.requests_per_trial < p.concurrency:
        raise GateInputError(
            f"requests_per_trial ({p.requests_per_trial}) must be >= concurrency ({p.concurrency}): "
            "a trial needs every stream busy to have a steady-state window"
        )
    check_memory(p.concurrency, p.requests_per_trial, p.input_len, p.output_len)
    if p.warmup_requests:
        check_memory(min(p.concurrency, p.warmup_requests), p.warmup_requests, p.input_len, p.output_len)


def run_deadlines(p: GateParams) -> Deadlines:
    return deadlines(**options_of(p, DEADLINE_OPTIONS), most_trials=p.design_rule().most_trials())


def secrets(p: GateParams) -> list[str]:
    """Every form in which a secret of ``p`` could appear in a message, longest first."""
    return secret_forms(secrets_of(p.url, p.api_key))


def plan(p: GateParams) -> dict[str, object]:
    """What a run would do, without sending anything (check mode). The URL is shown masked."""
    shape = p.shape()
    url = mask_url(p.url).rstrip("/")
    dl = run_deadlines(p)
    return {
        "ready_check": f"GET {url}{p.ready_path} until 200 (up to {p.ready_timeout:g}s)",
        "endpoint": f"POST {url}{shape.path()} (stream)",
        "request_shape": {"input_len": p.input_len, "output_len": p.output_len, "ignore_eos": True},
        "concurrency": p.concurrency,
        "warmup_requests": p.warmup_requests,
        "trials": p.trials,
        "design": design_plan(p),
        "requests_per_trial": p.requests_per_trial,
        "baseline_trials": len(p.baseline),
        "statistical_verdict": len(p.baseline) >= MIN_TRIALS,
        "telemetry_command": command(p.nvidia_smi_path, p.telemetry_interval_ms) if p.telemetry else None,
        "deadlines_s": dl.as_dict(),
        "trial_memory_ceiling_bytes": trial_memory_ceiling(
            p.concurrency, p.requests_per_trial, p.input_len, p.output_len
        ),
    }


def design_plan(p: GateParams) -> dict[str, object]:
    """How the gate will decide, as the plan and the result show it."""
    if p.design == "fixed" or len(p.baseline) < MIN_TRIALS:
        rounds = "one round, and one extra round on UNKNOWN"
        if p.design != "fixed":
            rounds = "one round (no usable baseline)"
        return {"name": p.design, "valid_trials": f"{p.trials} ({rounds})", "alpha": p.alpha}
    return {
        "name": p.design,
        "valid_trials": f"{p.min_trials} to {p.max_trials}, stopping at the first clear verdict",
        "min_trials": p.min_trials,
        "max_trials": p.max_trials,
        "alpha": p.alpha,
        "beta": p.beta,
        "margin": p.margin,
        "pass_hypothesis_drop": round(max(0.0, p.tolerance - p.margin), 6),
        "fail_hypothesis_drop": round(p.tolerance + p.margin, 6),
    }


STOPS = {
    "round": "after its round of trials",
    "extra_round": "after the extra round on UNKNOWN",
    "pass_boundary": "at the PASS boundary of the sequential test",
    "fail_boundary": "at the FAIL boundary of the sequential test",
    "cap": "at the cap (max_trials); the side of the tolerance line decided",
}


class ServerRefused(GateInputError):
    """The health endpoint answered in a way that waiting cannot fix (auth, redirect, not SGLang)."""


def http_get(target: Target, path: str, auth: str, deadline: float) -> tuple[int, dict[str, str], bytes]:
    """One ``GET`` on a new connection, finished by ``deadline`` (monotonic) however the server trickles.

    Returns ``(status, headers, body)``; raises ``TimeoutError`` at the deadline, ``OSError`` or
    ``ValueError`` for a connection or a response that is not HTTP/1.x.
    """

    def left() -> float:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"GET {path} not answered in time")
        return remaining

    sock = socket.create_connection((target.host, target.port), timeout=left())
    try:
        sock.settimeout(left())
        sock.sendall(
            f"GET {target.base_path}{path} HTTP/1.1\r\nhost: {target.host_header}\r\n{auth}"
            "accept: */*\r\nconnection: close\r\n\r\n".encode("ascii")
        )
        buf = bytearray()
        head_end = -1
        status = 0
        headers: dict[str, str] = {}
        length: int | None = None
        chunked = False
        while True:
            sock.settimeout(left())
            data = sock.recv(65536)
            if data:
                buf += data
            if head_end < 0:
                head_end = buf.find(b"\r\n\r\n")
                if head_end < 0:
                    if len(buf) > HEAD_MAX_BYTES or not data:
                        raise ValueError(f"no complete HTTP response head to GET {path}")
                    continue
                status, headers = _parse_head(bytes(buf[:head_end]))
                chunked = "chunked" in headers.get("transfer-encoding", "").lower()
                cl = headers.get("content-length", "")
                length = int(cl) if cl.isdigit() else None
            body = buf[head_end + 4 :]
            if len(body) > HEALTH_BODY_MAX_BYTES:
                raise ValueError(f"response to GET {path} larger than {HEALTH_BODY_MAX_BYTES} bytes")
            if length is not None and len(body) >= length:
                return status, headers, bytes(body[:length])
            if chunked and (body.startswith(b"0\r\n\r\n") or b"\r\n0\r\n\r\n" in body):
                return status, headers, _dechunk(bytes(body))
            if not data:
                if length is not None or chunked:
                    raise ValueError(f"connection closed in the middle of the response to GET {path}")
                return status, headers, bytes(body)
    finally:
        sock.close()


def _parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise ValueError(f"not an HTTP/1.x response: {lines[0][:80]!r}")
    headers = {}
    for line in lines[1:]:
        name, _sep, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(parts[1]), headers


def _dechunk(body: bytes) -> bytes:
    out = bytearray()
    pos = 0
    while True:
        i = body.find(b"\r\n", pos)
        size = int(body[pos:i].split(b";", 1)[0], 16) if i >= 0 else -1
        if size < 0:
            raise ValueError("bad chunked encoding")
        if size == 0:
            return bytes(out)
        out += body[i + 2 : i + 2 + size]
        pos = i + 2 + size + 2


def _refusal(status: int, headers: dict[str, str], url: str, path: str) -> str | None:
    """Why a health answer will not change by waiting, or None to keep polling."""
    if status in (401, 403):
        return (
            f"HTTP {status} from {url}{path}: the server refuses the credentials; set api_key to the "
            "server's --api-key (or remove it if the server has none)"
        )
    if 300 <= status < 400:
        location = mask_url(headers.get("location", "(no Location header)"))
        return (
            f"HTTP {status} redirect from {url}{path} to {location}; the gate does not follow redirects: "
            "set url to the SGLang server itself"
        )
    if status in (404, 405):
        return f"HTTP {status} from {url}{path}: no SGLang server at this url (wrong port or path?)"
    return None


def wait_ready(p: GateParams) -> dict[str, object]:
    """Poll ``ready_path`` (``/health_generate`` by default: a real 1-token generation, 503 while JIT and
    autotune run; ``/ready`` on SGLang >= 0.5.23) until 200.

    One deadline, ``ready_timeout`` on the monotonic clock, covers every poll, including a server
    that trickles its answer. 401/403, 3xx, 404 and 405 fail at once.
    """
    target = Target.from_url(p.url)
    auth = target.auth_header(p.api_key)
    url = mask_url(p.url).rstrip("/")
    start = time.monotonic()
    deadline = start + p.ready_timeout
    last = "no answer yet"
    polls = 0
    while True:
        polls += 1
        try:
            status, headers, body = http_get(target, p.ready_path, auth, min(deadline, time.monotonic() + READY_POLL_S))
            if status == 200:
                break
            refusal = _refusal(status, headers, url, p.ready_path)
            if refusal:
                raise ServerRefused(refusal)
            last = f"HTTP {status} {body[:120].decode('utf-8', 'replace')}".strip()
        except (OSError, ValueError) as exc:
            if isinstance(exc, GateInputError):
                raise
            last = f"{type(exc).__name__}: {exc}"
        now = time.monotonic()
        if now >= deadline:
            raise TimeoutError(
                f"SGLang at {url} not ready after {p.ready_timeout:g}s ({polls} polls of {p.ready_path}); last: {last}"
            )
        time.sleep(min(READY_INTERVAL_S, deadline - now))
    info: dict[str, object] = {"waited_s": round(time.monotonic() - start, 3)}
    try:
        status, _headers, body = http_get(target, "/server_info", auth, time.monotonic() + SERVER_INFO_TIMEOUT_S)
        if status == 200:
            data = json.loads(body)
            if isinstance(data, dict):
                info["version"] = data.get("version")
    except (OSError, ValueError):
        pass
    return info


# The columns of the play-end table; its header is the throughput_gate role's "Summary" task.
_ROW = "{:<8} {:<22} {:>11} {:>11} {:>8} {:>9} {}"


def summary_row(result: dict[str, object]) -> str:
    """One line of the play-end summary table (after the host column; the role prints the header)."""

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


def invalid_summary(records: list[dict[str, object]]) -> str:
    """How many trials were invalid and why, in one clause."""
    reasons = [str(r["invalid_reason"]) for r in records if not r["valid"]]
    if not reasons:
        return "no invalid trials"
    counts: dict[str, int] = {}
    for reason in reasons:
        counts[reason] = counts.get(reason, 0) + 1
    shown = "; ".join(f"{reason} ({n} trial{'s' if n > 1 else ''})" for reason, n in list(counts.items())[:3])
    more = f"; and {len(counts) - 3} other reasons" if len(counts) > 3 else ""
    return f"{len(reasons)} invalid trial{'s' if len(reasons) > 1 else ''} retried, not counted: {shown}{more}"


async def _measure(p: GateParams, dl: Deadlines, run_end: float) -> dict[str, object]:
    client = LoadClient(p.url, p.shape(), p.concurrency, p.request_timeout)
    out: dict[str, object] = {}
    warm = None
    if p.warmup_requests:
        warm = await client.run_trial(
            p.warmup_requests,
            min(p.concurrency, p.warmup_requests),
            measure=False,
            deadline_s=max(0.001, min(dl.warmup_s, run_end - time.monotonic())),
        )
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
    decision: Decision | None = None
    rule = p.design_rule()
    try:
        while decision is None:
            left = run_end - time.monotonic()
            if left <= 0:
                out.update(trials=records, windows=windows, invalid=invalid, valid=valid)
                out["aborted"] = f"the run passed its deadline of {dl.run_s:g}s after {len(records)} trials"
                return out
            r = await client.run_trial(p.requests_per_trial, deadline_s=min(dl.trial_s, left))
            windows.append((r.started, r.ended))
            reason = ""
            if r.errors:
                reason = "errors: " + "; ".join(f"{m} (x{c})" for m, c in sorted(r.errors.items()))
            elif sampler is not None and sampler.samples:
                throttled = throttle_reasons(sampler.samples, r.started, r.ended)
                if throttled:
                    reason = "GPU throttled: " + ", ".join(throttled)
            extra = p.design == "fixed" and len(valid) >= p.trials
            records.append(_trial_record(len(records) + 1, r, not reason, reason, extra))
            if reason:
                invalid += 1
                if invalid > budget:
                    out.update(trials=records, windows=windows, invalid=invalid, valid=valid)
                    out["aborted"] = f"{invalid} invalid trials (allowed {budget}); last: {reason}"
                    return out
                continue
            valid.append(r.output_tokens_per_s)
            decision = evaluate(valid, p.baseline, rule)
    finally:
        if sampler is not None:
            await sampler.stop()
            out["telemetry_problems"] = sampler.problems
            out["samples"] = sampler.samples
    rerun = decision is not None and decision.stop == "extra_round"
    out.update(trials=records, windows=windows, invalid=invalid, valid=valid, decision=decision, rerun=rerun)
    return out


async def _bounded(p: GateParams, dl: Deadlines, run_end: float) -> dict[str, object]:
    """:func:`_measure`, stopped at the run deadline (a safety net: every part has its own deadline)."""
    try:
        return await asyncio.wait_for(_measure(p, dl, run_end), max(0.001, run_end - time.monotonic()))
    except asyncio.TimeoutError:
        return {
            "trials": [],
            "windows": [],
            "invalid": 0,
            "valid": [],
            "aborted": f"the run passed its deadline of {dl.run_s:g}s",
        }


def stop_clause(p: GateParams, d: Decision) -> str:
    """How many valid trials the verdict used and why the run stopped there, in one clause."""
    text = f"{p.design} design, decided after {d.trials} valid trials {STOPS.get(d.stop or '', '')}".rstrip()
    seq = d.sequential
    if seq:
        text += (
            f" (estimated ratio {seq['ratio']:.4f}, log-likelihood ratio {seq['llr']:.2f} against PASS <= "
            f"{seq['lower']:.2f} / FAIL >= {seq['upper']:.2f}, noise {float(seq['sigma']) * 100:.2f}%)"  # type: ignore[arg-type]
        )
    return text


def run_gate(p: GateParams) -> tuple[bool, str, dict[str, object]]:
    """Run the gate. Returns ``(failed, message, result)``; never raises for a bad server.

    ``result["elapsed_s"]`` is the run's own time on the monotonic clock, readiness included: what the
    deadlines bound, apart from the interpreter's start (which a loaded host can stretch)."""
    started = time.monotonic()
    failed, message, result = _run_gate(p)
    result["elapsed_s"] = round(time.monotonic() - started, 3)
    return failed, message, result


def _run_gate(p: GateParams) -> tuple[bool, str, dict[str, object]]:
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
        "design": p.design,
        "decided_after_trials": None,
        "stop": None,
        "sequential": None,
    }
    dl = run_deadlines(p)
    run_end = time.monotonic() + dl.run_s
    try:
        result["ready"] = wait_ready(p)
        result["nofile"] = raise_nofile(p.concurrency)
        out = asyncio.run(_bounded(p, dl, run_end))
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
    tele_line = telemetry_line(result["telemetry"])  # type: ignore[arg-type]
    invalid_line = invalid_summary(records)
    if out.get("aborted"):
        result["reason"] = "invalid_trials"
        return (
            True,
            f"throughput gate could not measure {mask_url(p.url)}: {out['aborted']}. Invalid trials are not "
            f"counted as a regression; fix the server or the request shape. {invalid_line}. {tele_line}",
            result,
        )
    d = out["decision"]
    if d is None:
        raise RuntimeError("gate run returned no decision")
    result.update(
        verdict=d.verdict,
        reason=d.reason,
        median_output_tokens_per_s=round(d.current_median, 3),
        baseline_median=None if d.baseline_median is None else round(d.baseline_median, 3),
        delta_pct=None if d.delta_pct is None else round(d.delta_pct, 2),
        p_value=d.p_value,
        threshold=None if d.threshold is None else round(d.threshold, 3),
        extra_round=out["rerun"],
        decided_after_trials=d.trials,
        stop=d.stop,
        sequential=d.sequential,
    )
    stats = (
        f"baseline median {result['baseline_median']} tok/s ({len(p.baseline)} trials), current median "
        f"{result['median_output_tokens_per_s']} tok/s ({len(out['valid'])} trials), delta {result['delta_pct']}%, "
        f"p-value {None if d.p_value is None else round(d.p_value, 5)} (one-sided Mann-Whitney, alpha {p.alpha}), "
        f"tolerance {p.tolerance * 100:g}%; {stop_clause(p, d)}; {invalid_line}"
    )
    if d.reason == "below_floor":
        return (
            True,
            f"throughput gate FAIL: current median {result['median_output_tokens_per_s']} tok/s is below "
            f"min_output_tokens_per_s {p.min_output_tokens_per_s:g}; {stats}. {tele_line}",
            result,
        )
    if d.verdict == "fail":
        return True, f"throughput gate FAIL ({d.reason}): {stats}. {tele_line}", result
    if d.verdict == "unknown":
        msg = f"throughput gate UNKNOWN after an extra round of {p.trials} trials (inconclusive): {stats}. {tele_line}"
        return p.fail_on_unknown, msg, result
    if d.reason in ("baseline_insufficient", "no_baseline"):
        msg = (
            f"throughput gate PASS without a statistical verdict ({d.reason}: baseline has {len(p.baseline)} "
            f"trials, needs >= {MIN_TRIALS}); current median {result['median_output_tokens_per_s']} tok/s; "
            f"{invalid_line}. {tele_line}"
        )
    else:
        msg = f"throughput gate PASS ({d.reason}): {stats}. {tele_line}"
    return False, msg, result
