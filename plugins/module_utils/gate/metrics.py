# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A node's last throughput gate run as Prometheus text for node-exporter's textfile collector (stdlib only).

:func:`render` turns the gate's history record (the role's ``throughput_gate_result``: verdict, medians,
delta, key, shape, time) into the exposition format, one ``# HELP``/``# TYPE`` pair per metric. The names
and meanings are the ones docs/monitoring.md fixes and the alert rules of roles/fleet_monitoring read:
``gpufleet_gate_baseline_tokens_per_second``, ``gpufleet_gate_tolerance_ratio`` and
``gpufleet_gate_baseline_concurrency`` (GpufleetThroughputBelowBaseline compares production traffic with
them), ``gpufleet_gate_delta_ratio`` (GpufleetGateBelowBaseline: the last run's drift beyond the
tolerance), ``gpufleet_gate_timestamp_seconds`` (GpufleetGateStale). No ``node`` label: the scrape adds it.

The baseline key's parts (model, revision, profile, SGLang version, GPU model) and the verdict's reason
are label values of ``gpufleet_gate_info``, escaped by gpu_health_metrics.label_value. A record of the
wrong shape is a :class:`GateMetricsError` naming the field; nothing is rendered from it. A value the run
does not have (no baseline to compare with: no delta) has no series rather than a made-up one.
:func:`same_state` says whether two renderings say the same but for what every run measures anew (its
median, delta and time): the module reports ``changed`` only when the verdict, baseline or key changed.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from ansible_collections.gpufleet.sglang.plugins.module_utils.nvidia.gpu_health_metrics import label_value, sample_value

# the metric's value for each verdict (the gate's verdicts, module throughput_gate)
VERDICT_VALUES = {"pass": 0, "unknown": 1, "fail": 2}
KEY_LABELS = ("model", "model_revision", "profile", "sglang_version", "gpu_model")
# every run measures these anew: a change in them alone is not a change of the file's state
MEASURED = ("gpufleet_gate_output_tokens_per_second", "gpufleet_gate_delta_ratio", "gpufleet_gate_timestamp_seconds")
# name -> help text; every metric is a gauge
METRICS = {
    "gpufleet_gate_info": "The baseline key and the verdict of the last gate run (labels); always 1.",
    "gpufleet_gate_verdict": "The last gate run's verdict: 0 pass, 1 unknown, 2 fail.",
    "gpufleet_gate_failed": "1 when the last gate run failed the host (a FAIL or an error), else 0.",
    "gpufleet_gate_output_tokens_per_second": "The last gate run's median output tokens/s.",
    "gpufleet_gate_baseline_tokens_per_second": "The median output tokens/s of the baseline the gate compares with.",
    "gpufleet_gate_delta_ratio": "The last run's median against the baseline's: (current - baseline) / baseline.",
    "gpufleet_gate_tolerance_ratio": "The gate's tolerance (0.1 = a drop of 10% is allowed).",
    "gpufleet_gate_baseline_concurrency": "The concurrency the baseline was measured at.",
    "gpufleet_gate_timestamp_seconds": "When the last gate run was recorded (Unix time).",
}

__all__ = ["KEY_LABELS", "MEASURED", "METRICS", "VERDICT_VALUES", "GateMetricsError", "render", "same_state"]


class GateMetricsError(ValueError):
    """A gate record of the wrong shape; the message names the field."""


def _number(record: dict[str, Any], field: str, *, positive: bool = False) -> float | None:
    value = record.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise GateMetricsError(f"{field} is {value!r}, not a finite number")
    if positive and value <= 0:
        raise GateMetricsError(f"{field} is {value!r}, not above 0")
    return float(value)


def _text(mapping: dict[str, Any], field: str, where: str) -> str:
    value = mapping.get(field, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise GateMetricsError(f"{where}{field} is not text")
    return value


def _timestamp(record: dict[str, Any]) -> float:
    when = record.get("time")
    if not isinstance(when, str):
        raise GateMetricsError("time is not an ISO 8601 date and time")
    try:
        moment = datetime.fromisoformat(when)
    except ValueError:
        raise GateMetricsError(f"time {when!r} is not an ISO 8601 date and time") from None
    if moment.tzinfo is None:
        raise GateMetricsError(f"time {when!r} has no time zone (the gate records UTC)")
    return moment.timestamp()


def _labels(pairs: list[tuple[str, str]]) -> str:
    return "{" + ",".join(f'{name}="{label_value(value)}"' for name, value in pairs) + "}" if pairs else ""


def render(record: Any, tolerance: Any, *, baseline_written: bool = False) -> str:
    """The textfile for one node from the gate's record ``record`` and its ``tolerance``.

    ``baseline_written``: this run wrote the baseline (a first run, an update, an accepted one): the
    baseline is then the run's own median.
    """
    if not isinstance(record, dict):
        raise GateMetricsError(f"the record is a {type(record).__name__}, not a mapping")
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 < tolerance < 1:
        raise GateMetricsError(f"tolerance {tolerance!r} is not a number in (0, 1)")
    verdict = record.get("verdict")
    if not isinstance(verdict, str) or verdict not in VERDICT_VALUES:
        raise GateMetricsError(f"verdict is {verdict!r}, not one of {', '.join(VERDICT_VALUES)}")
    failed = record.get("failed")
    if not isinstance(failed, bool):
        raise GateMetricsError("failed is not true or false")
    key = record.get("key", {})
    if not isinstance(key, dict):
        raise GateMetricsError("key is not a mapping")
    shape = record.get("shape", {})
    if not isinstance(shape, dict):
        raise GateMetricsError("shape is not a mapping")
    median = _number(record, "median_output_tokens_per_s")
    baseline = _number(record, "baseline_median", positive=True)
    delta_pct = _number(record, "delta_pct")
    concurrency = _number(shape, "concurrency", positive=True)
    if baseline_written and median is not None and not failed:
        baseline, delta_pct = median, None  # the run is the new baseline: nothing to drift from yet
    info = [(name, _text(key, name, "key.")) for name in KEY_LABELS]
    info += [("verdict", verdict), ("reason", _text(record, "reason", ""))]
    values: dict[str, list[tuple[list[tuple[str, str]], float]]] = {name: [] for name in METRICS}
    values["gpufleet_gate_info"].append((info, 1))
    values["gpufleet_gate_verdict"].append(([], VERDICT_VALUES[verdict]))
    values["gpufleet_gate_failed"].append(([], 1 if failed else 0))
    for name, value in (
        ("gpufleet_gate_output_tokens_per_second", median),
        ("gpufleet_gate_baseline_tokens_per_second", baseline),
        ("gpufleet_gate_delta_ratio", None if delta_pct is None else delta_pct / 100),
        ("gpufleet_gate_tolerance_ratio", float(tolerance)),
        ("gpufleet_gate_baseline_concurrency", concurrency),
        ("gpufleet_gate_timestamp_seconds", _timestamp(record)),
    ):
        if value is not None:
            values[name].append(([], value))
    lines: list[str] = []
    for name, helptext in METRICS.items():
        if values[name]:
            lines += [f"# HELP {name} {helptext}", f"# TYPE {name} gauge"]
            lines += [f"{name}{_labels(labels)} {sample_value(value)}" for labels, value in values[name]]
    return "\n".join(lines) + "\n"


def same_state(old: str, new: str) -> bool:
    """Whether two renderings say the same but for what every run measures anew (median, delta, time)."""

    def state(text: str) -> list[str]:
        return [line for line in text.splitlines() if not line.startswith(tuple(m + " " for m in MEASURED))]

    return state(old) == state(new)
