# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A server's cold start: its phases read from SGLang's ``/metrics``, and the ``cold_start`` record the
facts, the gate history and the report carry (docs/monitoring.md, "Cold start"). Standard library only:
the parser runs on the node (module sglang_server_ready), the record check on the controller too.

SGLang (0.5.21 to 0.5.23, ``sglang/srt/observability/metrics_collector.py``) exports two gauges once its
engine has started, each with a ``phase`` label besides its common labels (``model_name``,
``engine_type``, ...): ``sglang:startup_time_seconds`` (phases ``load_weight``, ``kv_cache_allocation``,
``scheduler_e2e``, ``tokenizer_e2e``) and ``sglang:startup_cuda_graph_time_seconds`` (the CUDA-graph
capture per family: ``prefill``, ``decode``, ``target_verify``, ``draft_prefill``, ``draft_decode``,
``draft_extend``; 0 for a family not captured).

Everything here is outside data: a line that cannot be read, a value that is not a finite number of
seconds in range, a phase given twice, a label given twice in one sample, is a named problem and
is left out; nothing raises except ``check_cold_start`` (ColdStartError, naming the field).
"""

from __future__ import annotations

import math
import re
from typing import Any

STARTUP_METRIC = "sglang:startup_time_seconds"
CUDA_GRAPH_METRIC = "sglang:startup_cuda_graph_time_seconds"
STARTUP_PHASES = ("load_weight", "kv_cache_allocation", "scheduler_e2e", "tokenizer_e2e")
CUDA_GRAPH_PHASES = ("prefill", "decode", "target_verify", "draft_prefill", "draft_decode", "draft_extend")
GROUPS = {STARTUP_METRIC: "phases", CUDA_GRAPH_METRIC: "cuda_graph"}

MAX_SECONDS = 7 * 86400.0  # a start longer than a week is not a measurement
MAX_TEXT_BYTES = 4 << 20  # what the module reads of /metrics at most
MAX_PHASES = 32  # per group
MAX_PROBLEMS = 20
MAX_TEXT_FIELD = 200  # release, sglang_version
PHASE_RE = re.compile(r"[a-z][a-z0-9_]{0,63}")

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\\n]|\\.)*)"\s*(,?)')
# Prometheus text format values: a decimal or exponent float, NaN, +Inf/-Inf (no "_", no hex: float() takes more)
_VALUE = re.compile(r"(?:[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[+-]?Inf|NaN)")
_TIMESTAMP = re.compile(r"-?\d{1,19}")


class ColdStartError(ValueError):
    """A ``cold_start`` record of the wrong shape; the message names the field."""


def _labels(text: str) -> tuple[dict[str, str], str | None]:
    """``{...}`` contents to a dict; (labels, problem)."""
    labels: dict[str, str] = {}
    pos = 0
    while pos < len(text):
        match = _LABEL.match(text, pos)
        if not match:
            return labels, "labels cannot be read"
        name = match.group(1)
        if name in labels:
            return labels, f"label {name!r} given twice"
        labels[name] = match.group(2).replace("\\n", "\n").replace('\\"', '"').replace("\\\\", "\\")
        pos = match.end()
        if not match.group(3) and text[pos:].strip():
            return labels, "labels cannot be read"
    return labels, None


def _label_part(rest: str) -> tuple[dict[str, str], str] | str:
    """A sample's ``{...}`` (if any) and what follows it, or a problem."""
    if not rest.startswith("{"):
        return {}, rest
    end = _closing_brace(rest)
    if end < 0:
        return "labels are not closed"
    labels, problem = _labels(rest[1:end])
    return problem if problem else (labels, rest[end + 1 :])


def _sample(line: str) -> tuple[str, dict[str, str], str] | str:
    """One sample line to (name, labels, value text), or a problem."""
    name_match = _NAME.match(line)
    if not name_match:
        return "not a sample line"
    parts = _label_part(line[name_match.end() :])
    if isinstance(parts, str):
        return parts
    labels, rest = parts
    fields = rest.split()
    if not rest[:1].isspace() or not 1 <= len(fields) <= 2:
        return "not 'name{labels} value [timestamp]'"
    if not _VALUE.fullmatch(fields[0]):
        return f"value {fields[0][:40]!r} is not a number"
    if len(fields) == 2 and not _TIMESTAMP.fullmatch(fields[1]):
        return "the timestamp is not a whole number"
    return name_match.group(0), labels, fields[0]


def _closing_brace(text: str) -> int:
    """Index of the ``}`` that closes ``text``'s leading ``{`` (quotes and escapes honoured), -1 if none."""
    quoted = escaped = False
    for index, char in enumerate(text):
        if escaped:
            escaped = False
        elif char == "\\" and quoted:
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == "}" and not quoted:
            return index
    return -1


def seconds_problem(value: Any) -> str | None:
    """Why ``value`` is not a duration in seconds the record keeps (None when it is one)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "is not a number"
    if not math.isfinite(value):
        return "is not finite"
    if value < 0:
        return "is negative"
    if value > MAX_SECONDS:
        return f"is more than {MAX_SECONDS:.0f} s"
    return None


def parse_startup(text: str) -> dict[str, Any]:
    """The start's phases in Prometheus text ``text``: ``{"phases": {phase: s}, "cuda_graph": {phase: s},
    "problems": [...]}``. Only samples of the two startup gauges are read; every other line is skipped.
    A phase given twice (two series, e.g. two label sets) is left out with a problem; so is a bad sample."""
    found: dict[str, dict[str, float]] = {"phases": {}, "cuda_graph": {}}
    twice: dict[str, set[str]] = {"phases": set(), "cuda_graph": set()}
    problems: list[str] = []

    def note(problem: str) -> None:
        if len(problems) < MAX_PROBLEMS:
            problems.append(problem)
        elif len(problems) == MAX_PROBLEMS:
            problems.append("more problems left out")

    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        metric = next((m for m in GROUPS if line.startswith(m) and line[len(m) : len(m) + 1] in ("{", " ", "\t")), "")
        if not metric:
            continue  # another metric, a comment, a blank or garbage line: not ours
        group = GROUPS[metric]
        parsed = _sample(line)
        if isinstance(parsed, str):
            note(f"/metrics line {number} ({metric}): {parsed}; left out")
            continue
        labels, value_text = parsed[1], parsed[2]
        phase = labels.get("phase")
        if phase is None or not PHASE_RE.fullmatch(phase):
            note(f"/metrics line {number} ({metric}): no phase label of the form {PHASE_RE.pattern}; left out")
            continue
        value = float(value_text)
        problem = seconds_problem(value)
        if problem:
            note(f"/metrics line {number} ({metric}): phase {phase} {problem} ({value_text[:40]}); left out")
            continue
        if phase in found[group] or phase in twice[group]:
            if phase not in twice[group]:
                note(f"{metric}: phase {phase} given twice (several series?); left out")
            twice[group].add(phase)
            found[group].pop(phase, None)
            continue
        if len(found[group]) >= MAX_PHASES:
            note(f"{metric}: more than {MAX_PHASES} phases; phase {phase} left out")
            continue
        found[group][phase] = value
    if not found["phases"] and not twice["phases"]:
        note(
            f"no {STARTUP_METRIC} samples: SGLang before 0.5.21, a server without --enable-metrics, "
            "or an engine that has not finished starting"
        )
    return {"phases": found["phases"], "cuda_graph": found["cuda_graph"], "problems": problems}


def not_read(why: str) -> dict[str, Any]:
    """The result of a /metrics that could not be read: no phases, and why."""
    return {"phases": {}, "cuda_graph": {}, "problems": [f"{why}: no phases read"]}


def _text_field(rec: dict[str, Any], field: str) -> str:
    value = rec.get(field)
    if not isinstance(value, str) or not value or len(value) > MAX_TEXT_FIELD:
        raise ColdStartError(
            f"cold_start.{field} is {'missing' if field not in rec else 'not text of 1 to 200 characters'}"
        )
    return value


def _seconds_map(rec: dict[str, Any], field: str, required: bool) -> dict[str, float]:
    value = rec.get(field)
    if value is None and not required:
        return {}
    if not isinstance(value, dict):
        raise ColdStartError(f"cold_start.{field} is {'missing' if field not in rec else 'not a mapping'}")
    if len(value) > MAX_PHASES:
        raise ColdStartError(f"cold_start.{field} has more than {MAX_PHASES} phases")
    out: dict[str, float] = {}
    for phase, seconds in value.items():
        if not isinstance(phase, str) or not PHASE_RE.fullmatch(phase):
            raise ColdStartError(f"cold_start.{field} has a phase name not of the form {PHASE_RE.pattern}")
        problem = seconds_problem(seconds)
        if problem:
            raise ColdStartError(f"cold_start.{field}.{phase} {problem}")
        out[phase] = float(seconds)
    return out


def check_cold_start(rec: Any) -> dict[str, Any]:
    """The ``cold_start`` record, checked and normalised: ``{"release", "sglang_version", "ready_s",
    "phases", "cuda_graph"}``. ``ready_s`` (seconds from the wait's start to the readiness answer) and
    ``phases`` are required; ``cuda_graph`` may be empty. ColdStartError names the first wrong field."""
    if not isinstance(rec, dict):
        raise ColdStartError(f"cold_start is a {type(rec).__name__}, not a mapping")
    ready = rec.get("ready_s")
    problem = seconds_problem(ready)
    if problem:
        raise ColdStartError(f"cold_start.ready_s {'is missing' if 'ready_s' not in rec else problem}")
    out = {
        "release": _text_field(rec, "release"),
        "sglang_version": _text_field(rec, "sglang_version"),
        "ready_s": float(ready),  # type: ignore[arg-type]
        "phases": _seconds_map(rec, "phases", True),
        "cuda_graph": _seconds_map(rec, "cuda_graph", False),
    }
    if not out["phases"]:
        raise ColdStartError("cold_start.phases is empty")
    return out
