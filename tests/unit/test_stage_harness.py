# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""tests/harness/stage.sh, the wrapper of every `make test` stage: its block, its exit status, and the
report of failed stages that ends make's output (a CI page shows only the last lines of a run)."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

STAGE = Path(__file__).resolve().parents[1] / "harness" / "stage.sh"


def stage(logs: Path, *argv: str, nice: str = "0", t0: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "GPUFLEET_TEST_LOGS": str(logs), "STAGE_NICE": nice}
    if t0 is not None:
        env["STAGE_T0"] = t0
    return subprocess.run(["bash", str(STAGE), *argv], capture_output=True, text=True, env=env, timeout=60, check=False)


def test_a_passing_stage_prints_its_block_and_is_not_reported(tmp_path: Path) -> None:
    out = stage(tmp_path, "quiet", "bash", "-c", "echo hello")
    assert out.returncode == 0, out.stderr
    assert "=== quiet: begin of log\nhello\n=== quiet passed in " in out.stdout
    report = stage(tmp_path, "--report")
    assert (report.returncode, report.stdout) == (0, "")


def test_a_failed_stage_keeps_its_status_and_the_report_names_it_and_why(tmp_path: Path) -> None:
    noise = "".join(f"TASK [step {i}] ok\n" for i in range(200))
    script = f"printf '%s' '{noise}'; echo 'fatal: [node2]: FAILED! => drain budget ran out'; echo done; exit 3"
    out = stage(tmp_path, "molecule-fleet", "bash", "-c", script)
    assert out.returncode == 3
    assert "=== molecule-fleet FAILED (exit 3) in " in out.stdout
    assert stage(tmp_path, "unit", "true").returncode == 0
    assert stage(tmp_path, "sanity", "bash", "-c", "echo 'ERROR: pylint: bad name'; exit 1").returncode == 1
    report = stage(tmp_path, "--report").stdout.splitlines()
    # short (its end is what a CI page shows), the failing line itself, the stages by name, last
    assert len(report) <= 8, report
    assert "fatal: [node2]: FAILED! => drain budget ran out" in report
    assert "ERROR: pylint: bad name" in report
    assert report[-1] == "=== failed stages: molecule-fleet sanity "
    assert not any("step" in line for line in report)


def test_a_bad_niceness_is_named(tmp_path: Path) -> None:
    out = stage(tmp_path, "x", "true", nice="20")
    assert out.returncode == 2
    assert "STAGE_NICE must be 0..19, not '20'" in out.stderr


def test_the_pool_start_puts_each_stage_on_the_runs_clock(tmp_path: Path) -> None:
    t0 = int(time.time()) - 100
    out = stage(tmp_path, "timed", "sleep", "1", t0=str(t0))
    assert out.returncode == 0, out.stderr
    started = re.search(r"^=== timed started at \+(\d+) s \(log: ", out.stdout, re.MULTILINE)
    ended = re.search(r"^=== timed passed in \d+ s \(CPU \d+ s\) at \+(\d+) s$", out.stdout, re.MULTILINE)
    assert started, out.stdout
    assert ended, out.stdout
    assert 100 <= int(started[1]) <= int(ended[1]) - 1 <= 160
    # without it, no clock
    assert " at +" not in stage(tmp_path, "plain", "true").stdout


def test_a_bad_pool_start_is_named(tmp_path: Path) -> None:
    out = stage(tmp_path, "x", "true", t0="yesterday")
    assert out.returncode == 2
    assert "STAGE_T0 must be seconds since the epoch, not 'yesterday'" in out.stderr
