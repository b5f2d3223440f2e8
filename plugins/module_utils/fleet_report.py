# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fleet report's data and page (stdlib only; the charts are drawn by the action fleet_report).

Inputs, all in the gate's baseline directory on the controller (docs/report.md):
- ``*.history.jsonl``: one gate run per line (module_utils/gate_baseline.py ``run_record``);
- ``*.sweep.json``: the last sweep of a key (module_utils/tune_profile.py).
Every number in the page's tables is read from these files and printed as stored (rounded only for
display where the column says so); a line that cannot be read is listed under "problems", never guessed.
"""

from __future__ import annotations

import glob
import html
import json
import os
from typing import Any


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 1) if values else None


def _power(telemetry: object) -> tuple[float | None, float | None, float | None]:
    """(mean % of limit, mean W, limit W) over the GPUs of one run; None when not measured."""
    gpus = telemetry.get("gpus") if isinstance(telemetry, dict) else None
    if not isinstance(gpus, list):
        return None, None, None
    pct = [
        g["avg_power_pct_of_limit"] for g in gpus if isinstance(g, dict) and g.get("avg_power_pct_of_limit") is not None
    ]
    watts = [g["avg_power_w"] for g in gpus if isinstance(g, dict) and g.get("avg_power_w") is not None]
    limits = [g["power_limit_w"] for g in gpus if isinstance(g, dict) and g.get("power_limit_w") is not None]
    return _mean(pct), _mean(watts), (max(limits) if limits else None)


def load_history(directory: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Every gate run of the directory, oldest first, and the problems met reading them."""
    runs: list[dict[str, Any]] = []
    problems: list[str] = []
    for path in sorted(glob.glob(os.path.join(glob.escape(directory), "*.history.jsonl"))):
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                    key = rec["key"]
                    pct, watts, limit = _power(rec.get("telemetry"))
                    runs.append(
                        {
                            "host": str(rec.get("host") or key["host"]),
                            "time": str(rec["time"]),
                            "sglang_version": str(key["sglang_version"]),
                            "model": str(key["model"]),
                            "model_revision": str(key.get("model_revision", "unpinned")),
                            "profile": str(key["profile"]),
                            "gpu_model": str(key["gpu_model"]),
                            "verdict": str(rec.get("verdict", "")),
                            "reason": str(rec.get("reason", "")),
                            "failed": bool(rec.get("failed")),
                            "median_output_tokens_per_s": rec.get("median_output_tokens_per_s"),
                            "baseline_median": rec.get("baseline_median"),
                            "delta_pct": rec.get("delta_pct"),
                            "p_value": rec.get("p_value"),
                            "trials": len(rec.get("trials") or []),
                            "power_pct_of_limit": pct,
                            "power_w": watts,
                            "power_limit_w": limit,
                            "file": os.path.basename(path),
                        }
                    )
                except (ValueError, KeyError, TypeError) as exc:
                    problems.append(f"{os.path.basename(path)} line {number}: not a gate run record ({exc!r})")
    runs.sort(key=lambda r: (r["time"], r["host"]))
    return runs, problems


def load_sweeps(directory: str) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The latest sweep per host, and the problems met reading them."""
    latest: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    for path in sorted(glob.glob(os.path.join(glob.escape(directory), "*.sweep.json"))):
        try:
            with open(path, encoding="utf-8") as handle:
                sweep = json.load(handle)
            host = str(sweep["key"]["host"])
            if not isinstance(sweep["candidates"], list):
                raise TypeError("candidates is not a list")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            problems.append(f"{os.path.basename(path)}: not a sweep record ({exc!r})")
            continue
        if host not in latest or str(sweep.get("time", "")) > str(latest[host].get("time", "")):
            latest[host] = dict(sweep, file=os.path.basename(path))
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
    esc = html.escape
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
        ]
        for r in runs
    ]


def sweep_rows(sweep: dict[str, Any]) -> list[list[str]]:
    return [
        [
            str(i),
            c.get("flags", ""),
            c.get("status", ""),
            _fmt(c.get("median_output_tokens_per_s")),
            _fmt(c.get("p_vs_best"), ".4g"),
            _fmt(c.get("gpu_power_pct_of_limit")),
            c.get("verdict", ""),
            (c.get("reason") or "")[:200],
        ]
        for i, c in enumerate(sweep.get("candidates") or [], 1)
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
) -> str:
    """The self-contained page: charts as data URIs (``charts``: name -> ``data:`` URI), tables, problems."""
    esc = html.escape
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
        "dashed lines: a new SGLang release or model revision",
        "sweeps": "The last sweep per host: median output tok/s per candidate (failed candidates at 0)",
        "power": "GPU power per run, mean % of the enforced limit over the GPUs",
    }
    for name, uri in charts.items():
        parts.append(
            f'<h2>{esc(captions.get(name, name))}</h2><img id="chart-{esc(name)}" alt="{esc(name)}" src="{uri}">'
        )
    parts.append("<h2>Gate runs</h2>")
    parts.append(_table("Gate runs, oldest first", "runs", RUN_COLUMNS, run_rows(runs)))
    for host in sorted(sweeps):
        sweep = sweeps[host]
        best = sweep.get("best") or {}
        parts.append(
            f"<h2>Last sweep on {esc(host)}</h2><p>{esc(str(sweep.get('time', '')))}: {sweep.get('evaluated')} "
            f"candidate(s), best {esc(str(best.get('flags')))} at {esc(_fmt(best.get('median_output_tokens_per_s')))} "
            f"tok/s; {'beats' if sweep.get('beats_original') else 'does not beat'} the original significantly "
            f"(file {esc(sweep.get('file', ''))}).</p>"
        )
        parts.append(_table(f"sweep {host}", "sweep", SWEEP_COLUMNS, sweep_rows(sweep)))
    parts.append("</body></html>\n")
    return "\n".join(parts)
