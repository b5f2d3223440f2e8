# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""extensions/molecule/fleet/drills.py: what the drills read from a play's output (drain lines in
their old and new form, an expired drain) and from the watcher (healthy workers per sample)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

DRILLS = Path(__file__).resolve().parents[2] / "extensions" / "molecule" / "fleet" / "drills.py"


def _load():
    os.environ.setdefault("MOLECULE_INVENTORY_FILE", "/nonexistent/inventory/hosts")
    spec = importlib.util.spec_from_file_location("fleet_drills", DRILLS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


drills = _load()

NEW = (
    "node2: drained in 3.52 s (4 running, 1 queued at removal; budget 41 s; 0 straggler(s) drained),"
    " back in the gateway"
)
OLD = "node3: drained in 0.51 s (0 running request(s) at removal), back in the gateway"


def test_drain_lines_old_and_new() -> None:
    out = f'ok: [node2] => {{"msg": "{NEW}"}}\n{NEW}\n{OLD}\n'
    assert drills.drains(out) == [
        {
            "node": "node2",
            "seconds": 3.52,
            "running": 4,
            "queued": 1,
            "budget_s": "41",
            "stragglers": 0,
            "outcome": "drained",
        },
        {
            "node": "node3",
            "seconds": 0.51,
            "running": 0,
            "queued": 0,
            "budget_s": "?",
            "stragglers": 0,
            "outcome": "drained",
        },
    ]


def test_an_expired_drain_is_read_from_the_rollback_message() -> None:
    msg = (
        "node1: drain budget ran out: 2 request(s) left 2.1 s after its removal (3 running, 0 queued at"
        " removal; budget 2 s from set; sglang_gateway_drain_expired=fail)"
    )
    m = drills.EXPIRED_RE.search(msg)
    assert m is not None
    assert int(m.group(1) or m.group(2)) == 2
    m = drills.EXPIRED_RE.search("(1 running, 0 queued at removal; budget 2 s; 1 straggler(s) expired)")
    assert m is not None
    assert int(m.group(1) or m.group(2)) == 1
    assert drills.EXPIRED_RE.search(NEW) is None


def test_healthy_counts_in_a_window() -> None:
    samples = [
        {"t": 1.0, "workers": {"a": True, "b": True, "c": True}},
        {"t": 2.0, "workers": {"a": True, "b": False}},
        {"t": 3.0, "workers": None},
        {"t": 9.0, "workers": {"a": True}},
    ]
    assert drills.healthy_counts(samples, 1.0, 3.0) == [3, 1]


@given(
    node=st.integers(1, 9),
    seconds=st.decimals(0, 999, places=2),
    running=st.integers(0, 500),
    queued=st.integers(0, 500),
    budget=st.integers(1, 600),
    stragglers=st.integers(0, 500),
    outcome=st.sampled_from(["drained", "aborted", "expired"]),
    old=st.booleans(),
    noise=st.text(max_size=60),
)
def test_a_drain_line_in_any_output_reads_back(
    *, node: int, seconds, running: int, queued: int, budget: int, stragglers: int, outcome: str, old: bool, noise: str
) -> None:
    """A drain line (either form) amid arbitrary text reads back as printed; the text alone never
    raises and gives only well-formed drains."""
    if old:
        line = f"node{node}: drained in {seconds} s ({running} running request(s) at removal), back in the gateway"
        want = (running, 0, "?", 0, "drained")
    else:
        line = (
            f"node{node}: drained in {seconds} s ({running} running, {queued} queued at removal; budget {budget} s;"
            f" {stragglers} straggler(s) {outcome}), back in the gateway"
        )
        want = (running, queued, str(budget), stragglers, outcome)
    for d in drills.drains(noise):
        assert d["node"].startswith("node")
        assert d["running"] >= 0
    found = [d for d in drills.drains(f"{noise}\n{line}\n") if d["node"] == f"node{node}"]
    assert found
    if drills.drains(noise) == []:
        d = found[0]
        assert (d["running"], d["queued"], d["budget_s"], d["stragglers"], d["outcome"]) == want
        assert d["seconds"] == float(seconds)
