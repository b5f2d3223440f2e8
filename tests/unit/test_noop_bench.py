# Copyright (c) gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""benchmarks/noop_bench.py reads each play's share of a run from profile_tasks' stamps and the
changed counts from the recap: both on text shaped like ansible-playbook's own output."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import noop_bench

# profile_tasks stamps every task (at its start: the previous task's duration, then the time since
# the run began), never a play; the last stamp follows the recap
OUTPUT = """
PLAY [Proxmox hosts - NVIDIA driver] *******************************************

TASK [Gathering Facts] *********************************************************
Monday 30 November 2026  20:11:20 +0000 (0:00:00.050)       0:00:00.050 *******
ok: [lab-pve1]

TASK [gpufleet.sglang.nvidia_driver : Read the driver] *************************
Monday 30 November 2026  20:11:22 +0000 (0:00:02.000)       0:00:02.050 *******
ok: [lab-pve1]

PLAY [GPU nodes - NVIDIA userspace] ********************************************

TASK [Gathering Facts] *********************************************************
Monday 30 November 2026  20:11:30 +0000 (0:00:08.000)       0:00:10.050 *******
ok: [lab-sglang1]

PLAY [Proxmox hosts - NVIDIA driver] *******************************************

TASK [A second play of the same name] ******************************************
Monday 30 November 2026  20:11:40 +0000 (0:00:10.000)       0:00:20.050 *******
ok: [lab-pve1]

PLAY RECAP *********************************************************************
lab-pve1                   : ok=3    changed=0    unreachable=0    failed=0    skipped=0    rescued=0    ignored=0
lab-sglang1                : ok=1    changed=2    unreachable=0    failed=0    skipped=1    rescued=0    ignored=0

Monday 30 November 2026  20:11:45 +0000 (0:00:05.000)       0:00:25.050 *******
"""


def test_play_times_start_at_each_play_s_first_task_and_add_up_plays_of_one_name():
    times = noop_bench.play_times(OUTPUT)
    assert times == pytest.approx({"Proxmox hosts - NVIDIA driver": 10.0 + 5.0, "GPU nodes - NVIDIA userspace": 10.0})


def test_play_times_of_a_run_without_stamps_is_empty():
    assert noop_bench.play_times("PLAY [x] ***\nTASK [y] ***\nok: [h]\n") == {}


def test_recap_reads_ok_changed_unreachable_failed_per_host():
    assert noop_bench.recap(OUTPUT) == {"lab-pve1": (3, 0, 0, 0), "lab-sglang1": (1, 2, 0, 0)}
