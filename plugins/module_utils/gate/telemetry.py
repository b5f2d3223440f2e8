# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""GPU telemetry for the throughput gate: one nvidia-smi sampling loop for all GPUs (stdlib only).

docs/measurement.md: ``nvidia-smi --query-gpu=timestamp,index,power.draw.instant,utilization.gpu,
clocks.sm,clocks_event_reasons.active,temperature.gpu,enforced.power.limit
--format=csv,noheader,nounits -lms 200`` runs during the measured window. Per GPU the summary
gives average and peak power against the enforced limit, utilization, SM clock, temperature,
the clock-event (throttle) reasons seen and the energy (power integrated over the samples;
nvidia-smi has no energy query field). Average power under 50% of the limit while under load is
flagged ``under_use`` (the reference deployment drew ~250 W of 600 W before tuning).
Thermal and hardware slowdowns during a trial make it invalid (not a regression).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import shutil
import time

from ansible_collections.gpufleet.sglang.plugins.module_utils.nvidia.smi import (
    TELEMETRY_FIELDS,
    NvidiaParseError,
    parse_query_typed,
)

# the one list of telemetry fields (docs/measurement.md), shared with the nvidia-smi parsers
QUERY_FIELDS: tuple[str, ...] = TELEMETRY_FIELDS
UNDER_USE_FRACTION = 0.5

# clocks_event_reasons bits (nvml.h: nvmlClocksEventReason*)
EVENT_REASONS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
# reasons that make a trial invalid: the GPU was slowed by heat or hardware, not by our software.
# sw_power_cap is the normal state of a GPU at its power limit and is reported, not invalidating.
THROTTLE_MASK = 0x8 | 0x20 | 0x40 | 0x80


def reason_names(mask: int) -> list[str]:
    names = [name for bit, name in EVENT_REASONS.items() if mask & bit]
    unknown = mask & ~sum(EVENT_REASONS)
    if unknown:
        names.append(f"unknown_0x{unknown:x}")
    return names


def command(nvidia_smi: str, interval_ms: int) -> list[str]:
    return [
        nvidia_smi,
        f"--query-gpu={','.join(QUERY_FIELDS)}",
        "--format=csv,noheader,nounits",
        "-lms",
        str(interval_ms),
    ]


def parse_sample_line(line: str) -> dict | None:
    """One typed sample row from one line of the loop's output (None for a blank line)."""
    if not line.strip():
        return None
    rows = parse_query_typed(line, QUERY_FIELDS, source="nvidia-smi -lms")
    return rows[0] if rows else None


def throttle_reasons(samples: list[tuple[float, dict]], start: float, end: float) -> list[str]:
    """Names of thermal/hardware slowdown reasons active in samples within [start, end]."""
    mask = 0
    for t, row in samples:
        if start <= t <= end:
            mask |= (row.get("clocks_event_reasons.active") or 0) & THROTTLE_MASK
    return reason_names(mask)


def summarize(samples: list[tuple[float, dict]], windows: list[tuple[float, float]]) -> dict[str, object]:
    """Per-GPU summary of the samples that fall inside the measured windows (times: perf_counter)."""
    per_gpu: dict[int, list[tuple[float, dict]]] = {}
    for t, row in samples:
        if row.get("index") is None:
            continue
        if windows and not any(a <= t <= b for a, b in windows):
            continue
        per_gpu.setdefault(int(row["index"]), []).append((t, row))
    gpus = []
    for index in sorted(per_gpu):
        rows = per_gpu[index]
        powers = [r["power.draw.instant"] for _ts, r in rows if r.get("power.draw.instant") is not None]
        limits = [r["enforced.power.limit"] for _ts, r in rows if r.get("enforced.power.limit") is not None]
        utils = [r["utilization.gpu"] for _ts, r in rows if r.get("utilization.gpu") is not None]
        clocks = [r["clocks.sm"] for _ts, r in rows if r.get("clocks.sm") is not None]
        temps = [r["temperature.gpu"] for _ts, r in rows if r.get("temperature.gpu") is not None]
        mask = 0
        for _ts, r in rows:
            mask |= r.get("clocks_event_reasons.active") or 0
        energy = 0.0
        pts = [(t, r["power.draw.instant"]) for t, r in rows if r.get("power.draw.instant") is not None]
        for (t0, p0), (t1, p1) in itertools.pairwise(pts):
            # integrate within a window only: a gap between trials is not under load
            if not windows or any(a <= t0 and t1 <= b for a, b in windows):
                energy += (p0 + p1) / 2.0 * (t1 - t0)
        avg_power = sum(powers) / len(powers) if powers else None
        limit = max(limits) if limits else None
        pct = round(avg_power / limit * 100.0, 1) if avg_power is not None and limit else None
        gpus.append(
            {
                "index": index,
                "samples": len(rows),
                "avg_power_w": None if avg_power is None else round(avg_power, 1),
                "max_power_w": round(max(powers), 1) if powers else None,
                "power_limit_w": limit,
                "avg_power_pct_of_limit": pct,
                "avg_utilization_pct": round(sum(utils) / len(utils), 1) if utils else None,
                "avg_sm_clock_mhz": round(sum(clocks) / len(clocks)) if clocks else None,
                "min_sm_clock_mhz": min(clocks) if clocks else None,
                "max_temperature_c": max(temps) if temps else None,
                "clock_event_reasons": reason_names(mask),
                "throttled": bool(mask & THROTTLE_MASK),
                "energy_j": round(energy, 1),
                "under_use": pct is not None and pct < UNDER_USE_FRACTION * 100.0,
            }
        )
    return {
        "available": bool(gpus),
        "gpus": gpus,
        "under_use": any(g["under_use"] for g in gpus),
        "throttled": any(g["throttled"] for g in gpus),
        "energy_j": round(sum(g["energy_j"] for g in gpus), 1),
    }


def telemetry_line(summary: dict) -> str:
    """One line for a failure message: per GPU avg power/limit, utilization, SM clock, flags."""
    if not summary.get("available"):
        return f"telemetry: none ({summary.get('reason', 'no samples')})"
    parts = []
    for g in summary["gpus"]:
        flags = []
        if g["under_use"]:
            flags.append("UNDER-USE")
        if g["throttled"]:
            flags.append("THROTTLED")
        parts.append(
            f"gpu{g['index']} {g['avg_power_w']}/{g['power_limit_w']} W ({g['avg_power_pct_of_limit']}%), "
            f"util {g['avg_utilization_pct']}%, sm {g['avg_sm_clock_mhz']} MHz"
            + (f" [{' '.join(flags)}]" if flags else "")
        )
    return "telemetry: " + "; ".join(parts)


class Sampler:
    """Runs the nvidia-smi loop as a child process while the event loop measures."""

    def __init__(self, nvidia_smi: str, interval_ms: int = 200) -> None:
        self.nvidia_smi = nvidia_smi
        self.interval_ms = interval_ms
        self.samples: list[tuple[float, dict]] = []
        self.problems: list[str] = []
        self.proc: asyncio.subprocess.Process | None = None
        self.reader: asyncio.Task | None = None

    @staticmethod
    def resolve(nvidia_smi: str) -> str | None:
        return shutil.which(nvidia_smi)

    async def start(self) -> bool:
        path = self.resolve(self.nvidia_smi)
        if path is None:
            self.problems.append(f"{self.nvidia_smi} not found")
            return False
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *command(path, self.interval_ms),
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                stdin=asyncio.subprocess.DEVNULL,
            )
        except OSError as exc:
            self.problems.append(f"cannot start {path}: {exc}")
            return False
        self.reader = asyncio.create_task(self._read())
        return True

    async def _read(self) -> None:
        if self.proc is None or self.proc.stdout is None:
            return
        while True:
            line = await self.proc.stdout.readline()
            if not line:
                break
            try:
                row = parse_sample_line(line.decode("utf-8", "replace"))
            except NvidiaParseError as exc:
                if len(self.problems) < 5:
                    self.problems.append(str(exc))
                continue
            if row is not None:
                self.samples.append((time.perf_counter(), row))

    async def stop(self) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), timeout=5)
            except asyncio.TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        if self.reader is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(self.reader, timeout=5)
        if proc.stderr is not None:
            err = (await proc.stderr.read()).decode("utf-8", "replace").strip()
            if err and proc.returncode not in (0, -15):
                self.problems.append(f"nvidia-smi exited {proc.returncode}: {err[:200]}")
        if not self.samples and proc.returncode not in (None, 0, -15):
            self.problems.append(f"nvidia-smi exited {proc.returncode} without samples")
