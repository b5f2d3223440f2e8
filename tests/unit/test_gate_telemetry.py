# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Telemetry: parsing the -lms loop's lines, per-GPU summary, under-use and throttling."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.runner import _ROW, summary_row
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.telemetry import (
    QUERY_FIELDS,
    command,
    parse_sample_line,
    reason_names,
    summarize,
    telemetry_line,
    throttle_reasons,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.nvidia.smi import NvidiaParseError


def line(index: int, power: float, reasons: str = "0x0000000000000000", limit: str = "600.00") -> str:
    return f"2026/11/30 09:12:44.000, {index}, {power:.2f}, 97, 2400, {reasons}, 61, {limit}"


def samples(power: float, reasons: str = "0x0000000000000000", gpus: int = 2, n: int = 6) -> list:
    out = []
    for k in range(n):
        for g in range(gpus):
            out.append((10.0 + k * 0.2, parse_sample_line(line(g, power, reasons))))
    return out


def test_command_is_the_facts_query():
    cmd = command("/usr/bin/nvidia-smi", 200)
    assert cmd[0] == "/usr/bin/nvidia-smi"
    assert cmd[1] == "--query-gpu=" + ",".join(QUERY_FIELDS)
    assert cmd[2:] == ["--format=csv,noheader,nounits", "-lms", "200"]
    assert "total_energy_consumption" not in cmd[1]  # not a query field of nvidia-smi


def test_parse_line_types_and_na():
    row = parse_sample_line(line(3, 250.5, "0x0000000000000044"))
    assert row["index"] == 3
    assert row["power.draw.instant"] == 250.5
    assert row["clocks_event_reasons.active"] == 0x44
    assert row["enforced.power.limit"] == 600.0
    na = parse_sample_line("2026/11/30 09:12:44.000, 0, [N/A], 0, 180, [N/A], 30, [N/A]")
    assert na["power.draw.instant"] is None
    assert parse_sample_line("   \n") is None
    with pytest.raises(NvidiaParseError, match="expected 8 comma-separated values"):
        parse_sample_line("2026/11/30 09:12:44.000, 0, 12.0")


def test_reason_names():
    assert reason_names(0) == []
    assert reason_names(0x4 | 0x40) == ["sw_power_cap", "hw_thermal_slowdown"]
    assert reason_names(0x10000) == ["unknown_0x10000"]


def test_under_use_at_250_of_600_watts():
    s = summarize(samples(250.0), [(0.0, 100.0)])
    assert s["available"]
    assert s["under_use"]
    g = s["gpus"][0]
    assert g["avg_power_w"] == 250.0
    assert g["avg_power_pct_of_limit"] == pytest.approx(41.7)
    # 6 samples 0.2 s apart at 250 W: 5 intervals x 0.2 s x 250 W
    assert g["energy_j"] == pytest.approx(250.0, abs=0.1)
    assert s["energy_j"] == pytest.approx(500.0, abs=0.2)
    assert "UNDER-USE" in telemetry_line(s)
    assert not summarize(samples(560.0), [(0.0, 100.0)])["under_use"]


def test_windows_select_samples():
    s = summarize(samples(300.0), [(10.0, 10.3)])
    assert s["gpus"][0]["samples"] == 2
    assert summarize(samples(300.0), [(50.0, 60.0)])["available"] is False


def test_throttling_only_counts_heat_and_hardware():
    assert throttle_reasons(samples(590.0, "0x0000000000000004"), 0, 100) == []  # power cap is normal at TDP
    assert throttle_reasons(samples(590.0, "0x0000000000000040"), 0, 100) == ["hw_thermal_slowdown"]
    assert throttle_reasons(samples(590.0, "0x0000000000000040"), 50, 60) == []
    s = summarize(samples(590.0, "0x0000000000000020"), [])
    assert s["throttled"]
    assert "THROTTLED" in telemetry_line(s)


def test_summary_row_columns():
    row = summary_row(
        {
            "verdict": "fail",
            "reason": "regression",
            "median_output_tokens_per_s": 2990.0,
            "baseline_median": 3740.0,
            "delta_pct": -20.05,
            "p_value": 0.00397,
            "telemetry": summarize(samples(250.0), []),
        }
    )
    assert row.split()[:6] == ["FAIL", "regression", "2990.0", "3740.0", "-20.1", "0.0040"]
    assert "41.7% of limit avg, 2 GPUs UNDER-USE" in row
    assert summary_row({"verdict": "unknown", "reason": "check_mode"}).split()[:3] == ["UNKNOWN", "check_mode", "-"]


ROLE_TASKS = Path(__file__).resolve().parents[2] / "roles/throughput_gate/tasks/main.yml"


def _as_row_format(printf: str) -> str:
    """A Jinja printf format of the role (``%-8s``, ``%11s``, ``%11.1f``) as the str.format of gate_runner."""

    def one(m: re.Match) -> str:
        flag, width = m.group(1), m.group(2)
        align = "<" if flag == "-" else ">"
        return f"{{:{align}{width}}}" if width else "{}"

    return re.sub(r"%(-?)(\d*)(?:\.\d+)?[sf]", one, printf)


def test_the_roles_header_and_rows_have_summary_rows_columns():
    # the role types the header, a reused PASS's row and a FAIL row without a record itself: after the
    # host column (%-24s), the widths of summary_row (the FAIL row: its verdict column, then free text),
    # or the play-end table's columns drift apart
    formats = sorted(re.findall(r"'%-24s ([^']*)' \| format\(", ROLE_TASKS.read_text()), key=len)
    assert len(formats) == 3, formats
    fail_row, *full_rows = (_as_row_format(printf) for printf in formats)
    assert fail_row == _ROW.split(" ", maxsplit=1)[0] + " {}", formats[0]
    assert full_rows == [_ROW, _ROW], formats
