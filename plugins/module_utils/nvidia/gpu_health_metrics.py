# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A node's GPU health as Prometheus text for node-exporter's textfile collector (stdlib only; runs on the target).

:func:`render` turns the gpu_health module's result into the exposition format (Prometheus,
"Exposition formats", text format 0.0.4): one ``# HELP`` and ``# TYPE`` line per metric, then its
samples. The names, labels and meanings are the ones docs/monitoring.md fixes and the alert rules of
roles/fleet_monitoring read (``gpufleet_node_health``, ``gpufleet_gpu_health``, ...). Levels are
numbers (0 healthy, 1 degraded, 2 failed): the rules select ``== 2``. No ``node`` label: the scrape adds it.
Power series only for GPUs busy at the check (gpu_health's ``busy``): the file is one moment's reading.

Label values are outside data (nvidia-smi's UUID and bus id): :func:`label_value` escapes them as the
format asks (backslash, double quote and line feed as ``\\\\``, ``\\"`` and ``\\n``) and replaces
what is not UTF-8 (a lone surrogate) with U+FFFD, so no value can end a label or a line early.
A result of the wrong shape is a :class:`MetricsError` naming the field; nothing is rendered from it.
:func:`same_but_time` says whether two renderings differ only in the time of the check (the module
reports ``changed`` only when what the file says changed).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any

from ansible_collections.gpufleet.sglang.plugins.module_utils.common.atomic_file import FileWriteError, replace_file
from ansible_collections.gpufleet.sglang.plugins.module_utils.nvidia.gpu_health import LEVELS

# the metric's value for each level (docs/monitoring.md, "Textfile metrics")
LEVEL_VALUES = {level: rank for rank, level in enumerate(LEVELS)}
TIMESTAMP_METRIC = "gpufleet_gpu_health_timestamp_seconds"
# name -> help text; every metric is a gauge
METRICS = {
    "gpufleet_node_health": "The node's gpu_health level: 0 healthy, 1 degraded, 2 failed.",
    "gpufleet_gpu_health": "The GPU's gpu_health level: 0 healthy, 1 degraded, 2 failed.",
    "gpufleet_gpu_count": "GPUs nvidia-smi listed.",
    "gpufleet_gpu_power_draw_watts": "GPU power draw (1 s average) in W.",
    "gpufleet_gpu_power_limit_watts": "GPU enforced power limit in W.",
    TIMESTAMP_METRIC: "When the GPU health check ran (Unix time).",
}

__all__ = [
    "LEVEL_VALUES",
    "METRICS",
    "TIMESTAMP_METRIC",
    "MetricsError",
    "label_value",
    "render",
    "same_but_time",
    "sample_value",
    "write_textfile",
]


class MetricsError(ValueError):
    """A gpu_health result of the wrong shape; the message names the field."""


def label_value(text: str) -> str:
    """``text`` escaped for a label value of the text format, inside its double quotes."""
    clean = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
    return clean.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def sample_value(value: float) -> str:
    """A sample value as the text format writes it (Go float syntax; NaN and +Inf/-Inf by name)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def _level(record: dict[str, Any], where: str) -> int:
    level = record.get("level")
    if not isinstance(level, str) or level not in LEVEL_VALUES:
        raise MetricsError(f"{where}level is {level!r}, not one of {', '.join(LEVEL_VALUES)}")
    return LEVEL_VALUES[level]


def _text(record: dict[str, Any], field: str, where: str) -> str:
    value = record.get(field)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise MetricsError(f"{where}{field} is not text")
    return value


def _watts(power: Any, field: str, where: str) -> float | None:
    if power is None:
        return None
    if not isinstance(power, dict):
        raise MetricsError(f"{where}power is not a mapping")
    value = power.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MetricsError(f"{where}power.{field} is not a number")
    return float(value)


def _labels(pairs: list[tuple[str, str]]) -> str:
    return "{" + ",".join(f'{name}="{label_value(value)}"' for name, value in pairs) + "}" if pairs else ""


def _gpu_samples(
    position: int, gpu: Any, seen: set[int], samples: dict[str, list[tuple[list[tuple[str, str]], float]]]
) -> None:
    """Add one GPU's samples; a MetricsError names the field of ``gpus[position]`` that is wrong."""
    where = f"gpus[{position}]."
    if not isinstance(gpu, dict):
        raise MetricsError(f"gpus[{position}] is not a mapping")
    index = gpu.get("index")
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise MetricsError(f"{where}index is not a whole number")
    if index in seen:
        raise MetricsError(f"{where}index {index} appears twice (a series would be duplicated)")
    seen.add(index)
    gpu_label = [("gpu", str(index))]
    identity = [("uuid", _text(gpu, "uuid", where)), ("pci_bus_id", _text(gpu, "pci_bus_id", where))]
    samples["gpufleet_gpu_health"].append((gpu_label + identity, _level(gpu, where)))
    busy = gpu.get("busy", False)
    if not isinstance(busy, bool):
        raise MetricsError(f"{where}busy is not true or false")
    # power only of a GPU busy at the check: the file stays until the next one, and an idle GPU's draw
    # would read as under-use (GpufleetGpuUnderusedWithQueue) once requests wait
    for metric, field in (("gpufleet_gpu_power_draw_watts", "draw_w"), ("gpufleet_gpu_power_limit_watts", "limit_w")):
        watts = _watts(gpu.get("power"), field, where)
        if watts is not None and busy:
            samples[metric].append((gpu_label, watts))


def render(result: Any, timestamp: float) -> str:
    """The textfile for one node from the gpu_health result ``result`` checked at Unix time ``timestamp``."""
    if not isinstance(result, dict):
        raise MetricsError(f"the result is a {type(result).__name__}, not a mapping")
    if isinstance(timestamp, bool) or not isinstance(timestamp, (int, float)) or not math.isfinite(timestamp):
        raise MetricsError("the timestamp is not a finite number")
    node_level = _level(result, "")
    gpus = result.get("gpus")
    if not isinstance(gpus, list):
        raise MetricsError("gpus is not a list")
    count = result.get("gpu_count", len(gpus))
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise MetricsError("gpu_count is not a whole number")
    samples: dict[str, list[tuple[list[tuple[str, str]], float]]] = {name: [] for name in METRICS}
    samples["gpufleet_node_health"].append(([], node_level))
    samples["gpufleet_gpu_count"].append(([], count))
    seen: set[int] = set()
    for position, gpu in enumerate(gpus):
        _gpu_samples(position, gpu, seen, samples)
    samples[TIMESTAMP_METRIC].append(([], float(timestamp)))
    lines: list[str] = []
    for name, helptext in METRICS.items():
        if not samples[name]:
            continue
        lines += [f"# HELP {name} {helptext}", f"# TYPE {name} gauge"]
        lines += [f"{name}{_labels(labels)} {sample_value(value)}" for labels, value in samples[name]]
    return "\n".join(lines) + "\n"


def same_but_time(old: str, new: str) -> bool:
    """Whether two renderings say the same but for the time of the check."""

    def content(text: str) -> list[str]:
        return [line for line in text.splitlines() if not line.startswith(TIMESTAMP_METRIC + " ")]

    return content(old) == content(new)


def write_textfile(
    path: str, text: str, same: Callable[[str, str], bool] = same_but_time, create_dir: bool = False
) -> bool:
    """Put ``text`` at ``path`` atomically (a scrape reads the old file or the new one, never half of one).

    The collector reads only ``*.prom`` files of an existing directory: any other name, or a directory
    that is missing, is a MetricsError naming the fix; nothing is written then. With ``create_dir`` a
    missing directory (and its missing parents) is created, mode 0755, as the role's ``file`` task did
    before the write; an existing one is left as it is (the node exporter's role keeps its mode). Returns
    whether the file says something new (``same``, by default :func:`same_but_time`); it is rewritten in
    any case, so its time is the check's.
    """
    if not path.endswith(".prom") or os.path.basename(path) == ".prom":
        raise MetricsError(f"textfile {path!r} does not end in .prom: the textfile collector reads only *.prom files")
    directory = os.path.dirname(os.path.abspath(path))
    if create_dir and not os.path.lexists(directory):
        try:
            os.makedirs(directory, mode=0o755)
            os.chmod(directory, 0o755)
        except OSError as exc:
            raise MetricsError(f"textfile {path!r}: cannot create the directory {directory}: {exc.strerror}") from None
    if not os.path.isdir(directory):
        raise MetricsError(
            f"textfile {path!r}: the directory {directory} does not exist (create it, or point textfile at the "
            "collector's --collector.textfile.directory)"
        )
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            old: str | None = handle.read()
    except FileNotFoundError:
        old = None
    except OSError as exc:
        raise MetricsError(f"textfile {path!r} cannot be read: {exc.strerror}") from None
    try:
        replace_file(path, text.encode("utf-8"), mode=0o644)
    except FileWriteError as exc:
        raise MetricsError(str(exc)) from None
    return old is None or not same(old, text)
