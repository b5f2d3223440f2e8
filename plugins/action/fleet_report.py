# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller only: the fleet report (playbooks/report.yml), one self-contained HTML page.

Reads the gate's history and the sweeps in ``baseline_dir`` (module_utils/fleet/report.py: every
record schema-checked, a bad one listed under problems), draws three charts with matplotlib (SVG,
embedded as data URIs: the page needs nothing else; record text is drawn as text, never as
mathtext) and writes ``dest`` atomically. Nothing runs on the managed hosts.
"""

from __future__ import annotations

import base64
import io
import os
from datetime import datetime, timezone
from typing import Any

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.sglang.plugins.module_utils.fleet.report import (
    alert_episodes,
    display_text,
    load_history,
    load_sweeps,
    markers,
    parse_time,
    render_html,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.baseline import atomic_write

ARGUMENT_SPEC = {
    "baseline_dir": {"type": "path", "required": True},
    "dest": {"type": "path", "required": True},
    "title": {"type": "str", "default": "gpufleet.sglang fleet report"},
    "alerts": {"type": "raw"},
    "alerts_step_s": {"type": "float", "default": 60.0},
}


def _svg_uri(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    return "data:image/svg+xml;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _per_host_lines(ax: Any, runs: list[dict[str, Any]], hosts: list[str], key: str, **style: Any) -> None:
    """One line per host: its runs' ``key`` over time (runs without it left out; a host with none, no line)."""
    for host in hosts:
        pts = [(parse_time(r["time"]), r[key]) for r in runs if r["host"] == host and r[key] is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], **style, label=display_text(host))


def _throughput_chart(plt: Any, runs: list[dict[str, Any]], hosts: list[str]) -> str:
    """Output tok/s per host over time, releases and model revisions marked, each start's time to ready."""
    fig, ax = plt.subplots(figsize=(11, 4))
    _per_host_lines(ax, runs, hosts, "median_output_tokens_per_s", marker="o")
    for m in markers(runs):
        ax.axvline(parse_time(m["time"]), color="grey", linestyle="--", linewidth=0.8)
        ax.annotate(
            display_text(f"{m['host']}: {m['label']}"),
            (parse_time(m["time"]), 0),
            xycoords=("data", "axes fraction"),
            rotation=90,
            fontsize=7,
            va="bottom",
            ha="right",
            color="dimgrey",
        )
    for r in runs:  # a run after a start the gate recorded: its time to ready beside the point
        if r["cold_start"] and r["median_output_tokens_per_s"] is not None:
            ax.annotate(
                f"ready in {r['cold_start']['ready_s']:.0f} s",
                (parse_time(r["time"]), r["median_output_tokens_per_s"]),
                textcoords="offset points",
                xytext=(4, 6),
                fontsize=7,
                color="dimgrey",
            )
    ax.set_ylabel("output tok/s (median of trials)")
    ax.set_ylim(bottom=0)
    if hosts:
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no gate runs yet", transform=ax.transAxes, ha="center")
    fig.autofmt_xdate()
    uri = _svg_uri(fig)
    plt.close(fig)
    return uri


def charts(runs: list[dict[str, Any]], sweeps: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The three charts as SVG data URIs (a chart without data says so in its picture)."""
    import matplotlib  # noqa: PLC0415 - controller-only dependency (requirements.txt), loaded when used

    matplotlib.use("Agg")
    # text from the records (hosts, flags, versions) is drawn as given: no $...$ mathtext, no TeX
    matplotlib.rcParams.update({"text.parse_math": False, "text.usetex": False})
    from matplotlib import pyplot as plt  # noqa: PLC0415

    out: dict[str, str] = {}
    hosts = sorted({r["host"] for r in runs})

    out["throughput"] = _throughput_chart(plt, runs, hosts)

    rows = [(h, c) for h in sorted(sweeps) for c in sweeps[h].get("candidates") or []]
    fig, ax = plt.subplots(figsize=(11, max(2.5, 0.28 * len(rows) + 1)))
    if rows:
        labels = [display_text(f"{h}: {c.get('flags', '')}"[:90]) for h, c in rows]
        values = [c.get("median_output_tokens_per_s") or 0.0 for _h, c in rows]
        colors = [
            "tab:green"
            if str(c.get("verdict", "")).startswith(("best", "original (best)"))
            else ("tab:red" if c.get("status") != "measured" else "tab:blue")
            for _h, c in rows
        ]
        ax.barh(range(len(rows)), values, color=colors)
        ax.set_yticks(range(len(rows)), labels, fontsize=7)
        ax.invert_yaxis()
        for i, (_h, c) in enumerate(rows):
            if c.get("status") != "measured":
                ax.text(0, i, display_text(f" {c.get('status')}"), va="center", fontsize=7, color="tab:red")
        ax.set_xlabel("median output tok/s")
    else:
        ax.text(0.5, 0.5, "no sweeps yet (playbooks/tune.yml)", transform=ax.transAxes, ha="center")
    out["sweeps"] = _svg_uri(fig)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(11, 3.5))
    _per_host_lines(ax, runs, hosts, "power_pct_of_limit", marker="s", linestyle=":")
    ax.axhline(100, color="tab:red", linewidth=1, label="power limit")
    ax.axhline(50, color="tab:orange", linewidth=0.8, linestyle="--", label="under-use (50%)")
    ax.set_ylim(0, 110)
    ax.set_ylabel("GPU power, % of limit")
    ax.legend(fontsize=8)
    fig.autofmt_xdate()
    out["power"] = _svg_uri(fig)
    plt.close(fig)
    return out


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        super().run(tmp, task_vars)
        checked = ArgumentSpecValidator(ARGUMENT_SPEC).validate(dict(self._task.args))
        if checked.error_messages:
            return {"failed": True, "msg": "fleet_report: " + "; ".join(checked.error_messages)}
        args = checked.validated_parameters
        directory = args["baseline_dir"]
        if not os.path.isdir(directory):
            return {"failed": True, "msg": f"fleet_report: {directory} is not a directory (the gate's baselines)"}
        runs, problems = load_history(directory)
        sweeps, sweep_problems = load_sweeps(directory)
        problems += sweep_problems
        alerts = None
        if args["alerts"] is not None:
            if not args["alerts_step_s"] > 0:
                return {"failed": True, "msg": f"fleet_report: alerts_step_s must be > 0, got {args['alerts_step_s']}"}
            alerts, alert_problems = alert_episodes(args["alerts"], args["alerts_step_s"])
            problems += alert_problems
        result = {
            "changed": False,
            "runs": len(runs),
            "sweeps": sorted(sweeps),
            "problems": problems,
            "dest": args["dest"],
            "alerts": None if alerts is None else len(alerts),
        }
        if self._task.check_mode:
            result["msg"] = f"check mode: would write {args['dest']} from {len(runs)} run(s), {len(sweeps)} sweep(s)"
            return result
        try:
            pictures = charts(runs, sweeps)
        except ImportError as exc:
            return {
                "failed": True,
                "msg": f"fleet_report: matplotlib is needed on the controller (pip install -r requirements.txt): {exc}",
            }
        page = render_html(
            args["title"],
            datetime.now(timezone.utc).isoformat(timespec="seconds"),
            directory,
            runs=runs,
            sweeps=sweeps,
            charts=pictures,
            problems=problems,
            alerts=alerts,
        )
        os.makedirs(os.path.dirname(os.path.abspath(args["dest"])), exist_ok=True)
        atomic_write(args["dest"], page)
        result.update(
            changed=True,
            msg=f"wrote {args['dest']}: {len(runs)} gate run(s), {len(sweeps)} sweep(s)"
            + (f", {len(problems)} problem(s)" if problems else ""),
        )
        return result
