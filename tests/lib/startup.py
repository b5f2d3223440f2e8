# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One good cold-start record (what sglang_server_ready reads off SGLang's startup gauges and
module_utils/sglang/startup_metrics.py's ``check_cold_start`` keeps) for the tests that check it and
the gate's run record that carries it; a test varies it with ``dict(COLD_START, ready_s=...)``."""

from __future__ import annotations

COLD_START = {
    "release": "0.5.23-abc",
    "sglang_version": "0.5.23",
    "ready_s": 312.4,
    "phases": {"load_weight": 41.25, "tokenizer_e2e": 262.75},
    "cuda_graph": {"decode": 210.5},
}
