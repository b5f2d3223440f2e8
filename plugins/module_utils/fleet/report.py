# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fleet report's data and page (stdlib only; the charts are drawn by the action fleet_report).

Inputs, all in the gate's baseline directory on the controller (docs/tuning.md):
- ``*.history.jsonl``: one gate run per line (module_utils/gate/baseline.py ``run_record``);
- ``*.sweep.json``: the last sweep of a key (module_utils/tune/profile.py).
Every number in the page's tables is read from these files and printed as stored (rounded only for
display where the column says so). Every record is outside data (docs/tuning.md, "The fleet report"):
schema-checked field by field (``run_from_record``, ``sweep_from_record``), a bad one listed under
"problems" with the file, line and field and left out, never guessed; every file confined to the
directory (confined_path); every text escaped in the page.
"""

from __future__ import annotations

import glob
import html
import json
import math
import os
from datetime import datetime, timezone
from typing import Any

from ansible_collections.gpufleet.sglang.plugins.module_utils.common.confined_path import PathError, confine, segment
from ansible_collections.gpufleet.sglang.plugins.module_utils.nvidia.gpu_health import LEVELS as HEALTH_LEVELS
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.startup_metrics import (
    STARTUP_PHASES,
    ColdStartError,
    check_cold_start,
)

# Controller-only: no module in plugins/modules may bundle this file, not even through another
# module_utils (tests/unit/test_module_rooms.py walks the imports; docs/CONTRIBUTING.md, "Where code lives").
CONTROLLER_ONLY = True


class RecordError(ValueError):
    """A record (a history line, a sweep, a candidate) of the wrong shape; the message names the field."""


def display_text(text: str) -> str:
    """``text`` as it can be shown in HTML and SVG: a character XML 1.0 does not allow (a C0 control
    other than tab, newline and return; a lone surrogate, e.g. from an undecodable file name) becomes
    U+FFFD. Without this one such character makes the chart's SVG ill-formed (the browser shows no
    chart) and a surrogate fails the write of the page."""
    return "".join(
        "\ufffd" if (ord(c) < 0x20 and c not in "\t\n\r") or 0xD800 <= ord(c) <= 0xDFFF or c in "\ufffe\uffff" else c
        for c in text
    )


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 1) if values else None


def _text(rec: dict[str, Any], field: str, default: str | None = None) -> str:
    value = rec.get(field, default)
    if value is None and default is not None:
        return default
    if not isinstance(value, str):
        raise RecordError(f"field {field!r} is {'missing' if field not in rec else 'not text'}")
    return value


def _number(rec: dict[str, Any], field: str) -> float | int | None:
    """A finite number or None (absent or null); anything else is a RecordError."""
    value = rec.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RecordError(f"field {field!r} is not a finite number")
    return value


def _dict(rec: dict[str, Any], field: str, *, required: bool = False) -> dict[str, Any]:
    value = rec.get(field)
    if value is None and not required:
        return {}
    if not isinstance(value, dict):
        raise RecordError(f"field {field!r} is {'missing' if field not in rec else 'not a mapping'}")
    return value


def parse_time(text: str) -> datetime:
    """An ISO 8601 time with a UTC offset (the gate writes ``...+00:00``); RecordError otherwise."""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise RecordError("field 'time' is not an ISO 8601 time") from None
    if when.utcoffset() is None:
        raise RecordError("field 'time' has no UTC offset")
    return when


def _power(telemetry: dict[str, Any]) -> tuple[float | None, float | None, float | None]:
    """(mean % of limit, mean W, limit W) over the GPUs of one run; None when not measured."""
    gpus = telemetry.get("gpus")
    if gpus is None:
        return None, None, None
    if not isinstance(gpus, list) or not all(isinstance(g, dict) for g in gpus):
        raise RecordError("field 'telemetry.gpus' is not a list of mappings")
    columns = {"avg_power_pct_of_limit": [], "avg_power_w": [], "power_limit_w": []}
    for gpu in gpus:
        for field, column in columns.items():
            value = _number(gpu, field)
            if value is not None:
                column.append(value)
    limits = columns["power_limit_w"]
    return _mean(columns["avg_power_pct_of_limit"]), _mean(columns["avg_power_w"]), (max(limits) if limits else None)


def _gpu_health(rec: dict[str, Any]) -> str | None:
    """The run's GPU health verdict (gate_baseline.run_record ``gpu_health``), None when not checked."""
    health = _dict(rec, "gpu_health")
    if not health:
        return None
    level = health.get("level")
    if level not in HEALTH_LEVELS:
        raise RecordError(f"field 'gpu_health.level' is not one of {', '.join(HEALTH_LEVELS)}")
    verdict = health.get("verdict")
    if not isinstance(verdict, str):
        raise RecordError(f"field 'gpu_health.verdict' is {'missing' if 'verdict' not in health else 'not text'}")
    if verdict.split(":", 1)[0] != level:
        raise RecordError("field 'gpu_health.verdict' does not start with its level")
    return verdict


def _cold_start(rec: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """The run's ``cold_start`` (startup_metrics.check_cold_start) and, when it cannot be shown, why: one of
    the wrong shape, or the gate's own ``cold_start_problem``, leaves the run shown without it."""
    stored = rec.get("cold_start_problem")
    if stored is not None:
        why = f"the gate left it out: {stored}" if isinstance(stored, str) else "cold_start_problem is not text"
        return None, why[:300]
    if rec.get("cold_start") is None:
        return None, None
    try:
        return check_cold_start(rec["cold_start"]), None
    except ColdStartError as exc:
        return None, str(exc)


def run_from_record(rec: Any, file: str) -> dict[str, Any]:
    """The report's row of one gate run record (gate_baseline.run_record); RecordError names a bad field
    (a bad ``cold_start`` does not: the run is shown without it and ``cold_start_problem`` says why)."""
    if not isinstance(rec, dict):
        raise RecordError(f"a {type(rec).__name__}, not a mapping")
    key = _dict(rec, "key", required=True)
    trials = rec.get("trials")
    if trials is not None and not isinstance(trials, list):
        raise RecordError("field 'trials' is not a list")
    failed = rec.get("failed", False)
    if not isinstance(failed, bool):
        raise RecordError("field 'failed' is not true or false")
    time = _text(rec, "time")
    parse_time(time)
    pct, watts, limit = _power(_dict(rec, "telemetry"))
    cold_start, cold_start_problem = _cold_start(rec)
    return {
        "host": _text(rec, "host", "") or _text(key, "host"),
        "time": time,
        "sglang_version": _text(key, "sglang_version"),
        "model": _text(key, "model"),
        "model_revision": _text(key, "model_revision", "unpinned"),
        "profile": _text(key, "profile"),
        "gpu_model": _text(key, "gpu_model"),
        "verdict": _text(rec, "verdict", ""),
        "reason": _text(rec, "reason", ""),
        "failed": failed,
        "median_output_tokens_per_s": _number(rec, "median_output_tokens_per_s"),
        "baseline_median": _number(rec, "baseline_median"),
        "delta_pct": _number(rec, "delta_pct"),
        "p_value": _number(rec, "p_value"),
        "trials": len(trials or []),
        "power_pct_of_limit": pct,
        "power_w": watts,
        "power_limit_w": limit,
        "gpu_health": _gpu_health(rec),
        "cold_start": cold_start,
        "cold_start_problem": cold_start_problem,
        "file": file,
    }


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _data_files(directory: str, suffix: str, problems: list[str]) -> list[tuple[str, str]]:
    """(name, path) of the directory's files ending in ``suffix``, each confined to the directory
    (a name that is not a plain file name, or a symlink out of the directory, is a problem)."""
    root = os.path.abspath(directory)
    out = []
    for found in sorted(glob.glob(os.path.join(glob.escape(root), "*" + suffix))):
        name = os.path.basename(found)
        try:
            path = confine(root, segment(name, "report input"), "report input")
        except PathError as exc:
            problems.append(f"{name}: skipped: {exc}")
            continue
        if os.path.isfile(path):
            out.append((name, path))
        else:
            problems.append(f"{name}: skipped: not a regular file")
    return out


def load_history(directory: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Every gate run of the directory, oldest first, and the problems met reading them (one per bad line)."""
    runs: list[dict[str, Any]] = []
    problems: list[str] = []
    for name, path in _data_files(directory, ".history.jsonl", problems):
        try:
            with open(path, "rb") as handle:
                lines = handle.read().split(b"\n")
        except OSError as exc:
            problems.append(f"{name}: cannot be read ({exc.strerror})")
            continue
        for number, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw.decode("utf-8"), parse_constant=_no_constants)
                run = run_from_record(rec, name)
            except (ValueError, RecordError) as exc:
                why = exc if isinstance(exc, RecordError) else "not JSON"
                problems.append(f"{name} line {number}: not a gate run record ({why})")
                continue
            runs.append(run)
            if run["cold_start_problem"]:
                problems.append(f"cold start of {name} line {number} not shown ({run['cold_start_problem']})")
    runs.sort(key=lambda r: (parse_time(r["time"]), r["host"]))
    return runs, problems


# the most of a history's end read for its last run (a run record is about 2 KiB)
LAST_RUN_TAIL_BYTES = 1 << 20


def last_run(data: bytes, key: dict[str, str]) -> dict[str, Any] | None:
    """The report's row of the newest run in a history's bytes (one key's ``*.history.jsonl``) whose
    ``key`` is ``key``, None when there is none. Only the last :data:`LAST_RUN_TAIL_BYTES` are read; a
    line that is not a valid run record (cut off, corrupt, another key) is passed over, so a damaged end
    of the file can only make an older run, or none, the newest one: never a made-up one."""
    want = dict(key)
    lines = data[-LAST_RUN_TAIL_BYTES:].split(b"\n")
    for raw in reversed(lines):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw.decode("utf-8"), parse_constant=_no_constants)
            if not isinstance(rec, dict) or rec.get("key") != want:
                continue
            return run_from_record(rec, "")
        except (ValueError, RecordError):
            continue
    return None


def passed(row: dict[str, Any] | None) -> bool:
    """Whether a run row (:func:`last_run`) is a PASS with a measured throughput."""
    return bool(
        row
        and row["verdict"].lower() == "pass"
        and not row["failed"]
        and row["median_output_tokens_per_s"] is not None
        and row["median_output_tokens_per_s"] > 0
    )


CANDIDATE_TEXT = ("flags", "status", "verdict", "reason")
CANDIDATE_NUMBERS = ("median_output_tokens_per_s", "p_vs_best", "gpu_power_pct_of_limit")


def _candidate(c: Any) -> dict[str, Any]:
    if not isinstance(c, dict):
        raise RecordError(f"a {type(c).__name__}, not a mapping")
    out: dict[str, Any] = {field: _text(c, field, "") for field in CANDIDATE_TEXT}
    out.update({field: _number(c, field) for field in CANDIDATE_NUMBERS})
    return out


def sweep_from_record(sweep: Any, file: str) -> tuple[dict[str, Any], list[str]]:
    """The report's view of one sweep file (tune_profile.write_sweep) and the problems of its candidates
    (a bad candidate is left out and named); RecordError when the sweep itself cannot be shown."""
    if not isinstance(sweep, dict):
        raise RecordError(f"a {type(sweep).__name__}, not a mapping")
    host = _text(_dict(sweep, "key", required=True), "host")
    candidates = sweep.get("candidates")
    if not isinstance(candidates, list):
        raise RecordError("field 'candidates' is not a list")
    time = _text(sweep, "time", "")
    if time:
        parse_time(time)
    best_rec = _dict(sweep, "best")
    evaluated = sweep.get("evaluated")
    if evaluated is not None and (isinstance(evaluated, bool) or not isinstance(evaluated, int)):
        raise RecordError("field 'evaluated' is not a whole number")
    beats = sweep.get("beats_original", False)
    if not isinstance(beats, bool):
        raise RecordError("field 'beats_original' is not true or false")
    good: list[dict[str, Any]] = []
    problems: list[str] = []
    for index, c in enumerate(candidates, 1):
        try:
            good.append(_candidate(c))
        except RecordError as exc:
            problems.append(f"{file}: candidate {index} left out ({exc})")
    clean = {
        "host": host,
        "time": time,
        "candidates": good,
        "best": {"flags": _text(best_rec, "flags", ""), "median": _number(best_rec, "median_output_tokens_per_s")},
        "evaluated": evaluated,
        "beats_original": beats,
        "file": file,
    }
    return clean, problems


def load_sweeps(directory: str) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The latest sweep per host, and the problems met reading them."""
    latest: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    for name, path in _data_files(directory, ".sweep.json", problems):
        try:
            with open(path, "rb") as handle:
                doc = json.loads(handle.read().decode("utf-8"), parse_constant=_no_constants)
            sweep, bad = sweep_from_record(doc, name)
        except OSError as exc:
            problems.append(f"{name}: cannot be read ({exc.strerror})")
            continue
        except (ValueError, RecordError) as exc:
            why = exc if isinstance(exc, RecordError) else "not JSON"
            problems.append(f"{name}: not a sweep record ({why})")
            continue
        problems += bad
        host = sweep["host"]
        if host not in latest or sweep["time"] > latest[host]["time"]:
            latest[host] = sweep
    return latest, problems


def markers(runs: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Per host, the runs where the SGLang release or the model revision changed (and the first run)."""
    out: list[dict[str, str]] = []
    last: dict[str, tuple[str, str]] = {}
    for r in runs:
        now = (r["sglang_version"], r["model_revision"])
        before = last.get(r["host"])
        if before != now:
            parts = []
            if before is None or before[0] != now[0]:
                parts.append(f"SGLang {now[0]}")
            if before is None or before[1] != now[1]:
                parts.append(f"model {now[1][:12]}")
            out.append({"host": r["host"], "time": r["time"], "label": ", ".join(parts)})
        last[r["host"]] = now
    return out


def _fmt(value: Any, spec: str = "") -> str:
    if value is None:
        return "-"
    if spec and isinstance(value, (int, float)) and not isinstance(value, bool):
        return format(value, spec)
    return str(value)


def _table(caption: str, cls: str, head: list[str], rows: list[list[Any]]) -> str:
    def esc(text: str) -> str:
        return html.escape(display_text(text))

    body = "".join("<tr>" + "".join(f"<td>{esc(str(c))}</td>" for c in row) + "</tr>\n" for row in rows)
    return (
        f'<table class="{cls}"><caption>{esc(caption)}</caption>\n<thead><tr>'
        + "".join(f"<th>{esc(h)}</th>" for h in head)
        + f"</tr></thead>\n<tbody>\n{body}</tbody></table>\n"
    )


RUN_COLUMNS = [
    "host",
    "time",
    "SGLang",
    "model revision",
    "profile",
    "verdict",
    "median tok/s",
    "baseline tok/s",
    "delta %",
    "p",
    "trials",
    "GPU power % of limit",
    "GPU power W",
    "limit W",
    "GPU health",
]
COLD_START_COLUMNS = [
    "host",
    "release",
    "SGLang",
    "gate run",
    "time to ready s",
    *(f"{phase} s" for phase in STARTUP_PHASES),
    "CUDA graphs s",
    "CUDA graph capture by family s",
    "median tok/s after",
]
SWEEP_COLUMNS = ["#", "flags", "status", "median tok/s", "p vs best", "GPU power % of limit", "verdict", "reason"]


def run_rows(runs: list[dict[str, Any]]) -> list[list[str]]:
    return [
        [
            r["host"],
            r["time"],
            r["sglang_version"],
            r["model_revision"],
            r["profile"],
            r["verdict"],
            _fmt(r["median_output_tokens_per_s"]),
            _fmt(r["baseline_median"]),
            _fmt(r["delta_pct"]),
            _fmt(r["p_value"], ".4g"),
            _fmt(r["trials"]),
            _fmt(r["power_pct_of_limit"]),
            _fmt(r["power_w"]),
            _fmt(r["power_limit_w"]),
            _fmt(r["gpu_health"]),
        ]
        for r in runs
    ]


def cold_start_rows(runs: list[dict[str, Any]]) -> list[list[str]]:
    """One row per start a gate run recorded, by host then time: the release, the time to ready, SGLang's
    phases, the CUDA-graph capture (total and the families that took time) and the throughput measured after."""
    starts = sorted((r for r in runs if r["cold_start"]), key=lambda r: (r["host"], parse_time(r["time"])))
    rows = []
    for r in starts:
        cs = r["cold_start"]
        graphs = cs["cuda_graph"]
        spent = [f"{family} {seconds:.1f}" for family, seconds in sorted(graphs.items()) if seconds > 0]
        rows.append(
            [
                r["host"],
                cs["release"],
                cs["sglang_version"],
                r["time"],
                _fmt(cs["ready_s"], ".1f"),
                *(_fmt(cs["phases"].get(phase), ".1f") for phase in STARTUP_PHASES),
                _fmt(round(sum(graphs.values()), 1) if graphs else None),
                ", ".join(spent) or "-",
                _fmt(r["median_output_tokens_per_s"]),
            ]
        )
    return rows


def sweep_rows(sweep: dict[str, Any]) -> list[list[str]]:
    return [
        [
            str(i),
            c["flags"],
            c["status"],
            _fmt(c["median_output_tokens_per_s"]),
            _fmt(c["p_vs_best"], ".4g"),
            _fmt(c["gpu_power_pct_of_limit"]),
            c["verdict"],
            c["reason"][:200],
        ]
        for i, c in enumerate(sweep["candidates"], 1)
    ]


# ---- alert history: Prometheus' ALERTS series (GET /api/v1/query_range, "Range queries" of its HTTP API) ----

ALERT_COLUMNS = ["alert", "node", "severity", "labels", "firing from", "last seen firing", "minutes"]
# the most series and points read from one answer (7 days at a 60 s step is 10,080 points per series)
MAX_ALERT_SERIES = 500
MAX_ALERT_POINTS = 20_000
ALERT_LABELS_SKIPPED = ("__name__", "alertname", "alertstate", "node", "severity", "instance", "job")


def _alert_series(series: Any, index: int) -> tuple[dict[str, str], list[float]]:
    """(labels, sample times) of one matrix series; RecordError names what is wrong."""
    if not isinstance(series, dict):
        raise RecordError(f"series {index} is a {type(series).__name__}, not a mapping")
    labels = series.get("metric")
    if not isinstance(labels, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        raise RecordError(f"series {index}: 'metric' is not a mapping of label names to text")
    if not isinstance(labels.get("alertname"), str) or not labels["alertname"]:
        raise RecordError(f"series {index}: no alertname label")
    values = series.get("values")
    if not isinstance(values, list) or len(values) > MAX_ALERT_POINTS:
        raise RecordError(f"series {index}: 'values' is not a list of at most {MAX_ALERT_POINTS} points")
    times = []
    for point in values:
        if not isinstance(point, list) or len(point) != 2 or not isinstance(point[1], str):
            raise RecordError(f'series {index}: a point is not [time, "value"]')
        when = point[0]
        if isinstance(when, bool) or not isinstance(when, (int, float)) or not math.isfinite(when) or when < 0:
            raise RecordError(f"series {index}: a point's time is not a Unix time")
        times.append(float(when))
    return labels, sorted(times)


def alert_episodes(answer: Any, step_s: float) -> tuple[list[dict[str, Any]], list[str]]:
    """The firing episodes in Prometheus' answer to a range query of ``ALERTS{alertstate="firing"}``: one per
    series and run of samples no more than two steps apart, oldest first; and the problems met (a wrong
    answer, or a wrong series, is named and left out, never an error)."""
    if not isinstance(answer, dict) or answer.get("status") != "success":
        why = answer.get("error") if isinstance(answer, dict) else None
        return [], [f"alert history: Prometheus did not answer with success ({display_text(str(why or answer))[:200]})"]
    data = answer.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
        return [], ["alert history: the answer is not a range query's matrix"]
    result = data["result"]
    problems = (
        []
        if len(result) <= MAX_ALERT_SERIES
        else [f"alert history: {len(result)} series, the first {MAX_ALERT_SERIES} read"]
    )
    episodes: list[dict[str, Any]] = []
    for index, series in enumerate(result[:MAX_ALERT_SERIES]):
        try:
            labels, times = _alert_series(series, index)
        except RecordError as exc:
            problems.append(f"alert history: {exc}")
            continue
        start = previous = None
        for when in [*times, math.inf]:
            if start is not None and when - previous > 2 * step_s:
                episodes.append(
                    {
                        "alert": labels["alertname"],
                        "node": labels.get("node", ""),
                        "severity": labels.get("severity", ""),
                        "labels": ", ".join(
                            f"{k}={v}" for k, v in sorted(labels.items()) if k not in ALERT_LABELS_SKIPPED
                        ),
                        "start": start,
                        "end": previous,
                    }
                )
                start = None
            if start is None:
                start = when
            previous = when
    episodes.sort(key=lambda e: (e["start"], e["alert"], e["node"], e["labels"]))
    return episodes, problems


def alert_rows(episodes: list[dict[str, Any]]) -> list[list[str]]:
    def iso(when: float) -> str:
        return datetime.fromtimestamp(when, tz=timezone.utc).isoformat(timespec="seconds")

    return [
        [
            e["alert"],
            e["node"] or "-",
            e["severity"] or "-",
            e["labels"] or "-",
            iso(e["start"]),
            iso(e["end"]),
            f"{(e['end'] - e['start']) / 60:.1f}",
        ]
        for e in episodes
    ]


CSS = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:13px}caption{text-align:left;font-weight:bold;padding:4px 0}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:left}th{background:#f2f2f2}
img{max-width:100%;border:1px solid #eee;margin:.5em 0}.problems{color:#a00}
"""


def render_html(
    title: str,
    generated: str,
    source: str,
    *,
    runs: list[dict[str, Any]],
    sweeps: dict[str, dict[str, Any]],
    charts: dict[str, str],
    problems: list[str],
    alerts: list[dict[str, Any]] | None = None,
) -> str:
    """The self-contained page: charts as data URIs (``charts``: name -> ``data:`` URI), tables, problems.
    Every text goes through ``display_text`` and ``html.escape`` (quotes too: it is safe in attributes)."""

    def esc(text: str) -> str:
        return html.escape(display_text(text))

    parts = [
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{esc(title)}</h1><p>Generated {esc(generated)} from {esc(source)}: {len(runs)} gate run(s), "
        f"{len(sweeps)} sweep(s).</p>",
    ]
    if problems:
        parts.append('<ul class="problems">' + "".join(f"<li>{esc(p)}</li>" for p in problems) + "</ul>")
    captions = {
        "throughput": "Output tok/s per host over time (gate history); "
        'dashed lines: a new SGLang release or model revision; "ready in N s": the run after a start, '
        "with that start's time to ready (table below)",
        "sweeps": "The last sweep per host: median output tok/s per candidate (failed candidates at 0)",
        "power": "GPU power per run, mean % of the enforced limit over the GPUs",
    }
    starts = (
        "<h2>Cold starts per node and release</h2><p>Time to ready: from the unit's start to its readiness "
        'answer; the phases as SGLang reports them (docs/monitoring.md, "Cold start").</p>\n'
        + _table("Cold starts, by host then time", "coldstarts", COLD_START_COLUMNS, cold_start_rows(runs))
    )
    for name, uri in charts.items():
        parts.append(
            f'<h2>{esc(captions.get(name, name))}</h2><img id="chart-{esc(name)}" alt="{esc(name)}" src="{esc(uri)}">'
        )
        if name == "throughput":
            parts.append(starts)  # next to the throughput timeline
    if "throughput" not in charts:
        parts.append(starts)
    if alerts is None:
        parts.append("<h2>Alerts</h2><p>No alert history: no Prometheus was asked (inventory group monitoring).</p>")
    else:
        parts.append(
            "<h2>Alerts</h2><p>Firing episodes of the fleet's alert rules, from Prometheus' ALERTS series "
            "(docs/monitoring.md).</p>\n" + _table("Alerts, oldest first", "alerts", ALERT_COLUMNS, alert_rows(alerts))
        )
    parts.append("<h2>Gate runs</h2>")
    parts.append(_table("Gate runs, oldest first", "runs", RUN_COLUMNS, run_rows(runs)))
    for host in sorted(sweeps):
        sweep = sweeps[host]
        best = sweep["best"]
        parts.append(
            f"<h2>Last sweep on {esc(host)}</h2><p>{esc(sweep['time'])}: {esc(_fmt(sweep['evaluated']))} "
            f"candidate(s), best {esc(best['flags'] or '-')} at {esc(_fmt(best['median']))} "
            f"tok/s; {'beats' if sweep['beats_original'] else 'does not beat'} the original significantly "
            f"(file {esc(sweep['file'])}).</p>"
        )
        parts.append(_table(f"sweep {host}", "sweep", SWEEP_COLUMNS, sweep_rows(sweep)))
    parts.append("</body></html>\n")
    return "\n".join(parts)
