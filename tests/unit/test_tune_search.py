# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The search of tune.yml on the stand-in's response surface (tests/tools/tune_sim.py): best found,
failures recorded, budget respected, compared with the full grid; and its input checks."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.sglang.plugins.module_utils.tune.search import (
    CoordinateSearch,
    TuneError,
    check_space,
    describe,
    grid,
    is_better,
    table,
)
from tools import tune_sim


@pytest.mark.parametrize("seed", range(8))
def test_finds_the_grid_best_with_far_fewer_candidates(seed):
    best, rate, size = tune_sim.grid_best()
    result, spent = tune_sim.run_search(seed=seed)
    assert result["best"]["setting"] == best
    assert result["best"]["median_output_tokens_per_s"] == pytest.approx(rate, rel=0.05)
    assert result["evaluated"] < size / 4
    assert spent < tune_sim.grid_seconds() / 4
    assert result["beats_original"] is True
    assert result["stopped"] == "converged"


def test_failures_are_recorded_with_their_reason_and_the_search_goes_on():
    result, _spent = tune_sim.run_search()
    statuses = {c["status"] for c in result["candidates"]}
    assert {"crashed", "oom", "not_ready", "measured"} <= statuses
    crashed = next(c for c in result["candidates"] if c["status"] == "crashed")
    assert "FlashAttention v3" in crashed["reason"]
    assert crashed["median_output_tokens_per_s"] is None
    assert crashed["verdict"] == "crashed"
    oom = next(c for c in result["candidates"] if c["status"] == "oom")
    assert oom["setting"]["mem_fraction_static"] == 0.95
    # failures come before the best was found and after it: the search went on
    index = {id(c): i for i, c in enumerate(result["candidates"])}
    best_at = next(i for i, c in enumerate(result["candidates"]) if c["verdict"] == "best")
    assert index[id(crashed)] < best_at


@pytest.mark.parametrize("budget", [700.0, 1500.0, 3000.0, 12000.0])
def test_budget_is_respected(budget):
    result, spent = tune_sim.run_search(budget_s=budget)
    assert spent <= budget
    # every candidate after the original started only with room for itself and the restore, each as
    # long as the longest candidate before it
    at, longest = 0.0, 0.0
    for c in result["candidates"]:
        if at > 0:
            assert at + 2 * longest <= budget
        at += c["elapsed_s"]
        longest = max(longest, c["elapsed_s"])
    assert at == pytest.approx(spent)
    if result["stopped"] == "budget":
        # it stopped only because one more candidate and the restore might not have fitted
        assert spent + 2 * longest > budget
    else:
        assert result["stopped"] == "converged"


def test_a_tiny_budget_still_measures_the_original_and_keeps_it():
    result, _spent = tune_sim.run_search(budget_s=100.0)
    assert result["evaluated"] == 1
    assert result["candidates"][0]["flags"] == "original"
    assert result["stopped"] == "budget"
    assert result["winner_differs"] is False


def test_noise_alone_never_wins():
    # every value of the option gives the same rate: noise must not make a winner
    space = {"chunked_prefill_size": [8192, 8193, 8194]}
    result, _spent = tune_sim.run_search(space=space, base={"chunked_prefill_size": 8192}, noise=0.03)
    assert result["winner_differs"] is False
    assert result["best"]["flags"] == "original"


def test_a_gain_below_min_gain_does_not_win():
    # chunked_prefill_size 16384 is 2% faster on the surface: real, but below a 5% min_gain
    space = {"chunked_prefill_size": [8192, 16384]}
    result, _spent = tune_sim.run_search(space=space, base={"chunked_prefill_size": 8192}, noise=0.001)
    assert result["winner_differs"] is False
    result, _spent = tune_sim.run_search(space=space, base={"chunked_prefill_size": 8192}, noise=0.001, min_gain=0.01)
    assert result["best"]["setting"] == {"chunked_prefill_size": 16384}


def test_the_original_failing_ends_the_search():
    search = CoordinateSearch({"attention_backend": ["fa3", "triton"]}, {"attention_backend": "fa3"}, budget_s=1e6)
    setting = search.next(0.0)
    search.record(setting, {"status": "crashed", "reason": "boom", "elapsed_s": 1})
    assert search.next(1.0) is None
    assert search.finish()["stopped"] == "original_failed"


def test_table_has_a_row_per_candidate_with_the_columns():
    result, _spent = tune_sim.run_search()
    rows = table(result)
    assert rows[0].split()[:2] == ["#", "flags"]
    assert "p vs best" in rows[0]
    assert "power%" in rows[0]
    assert len(rows) == result["evaluated"] + 1
    assert any("best" in r for r in rows[1:])
    assert any("crashed: ValueError: FlashAttention v3" in r for r in rows[1:])


def test_p_value_against_the_best_is_small_for_clearly_slower_candidates():
    result, _spent = tune_sim.run_search()
    original = result["candidates"][0]
    assert original["verdict"] == "original"
    assert original["p_vs_best"] < 0.01
    best = next(c for c in result["candidates"] if c["verdict"] == "best")
    assert best["p_vs_best"] is None


def test_is_better_reads_the_gate_rule_backwards():
    assert is_better([110.0, 111, 112, 113, 114], [100.0, 101, 102, 103, 104], min_gain=0.05, alpha=0.05)[0]
    assert not is_better([103.0, 104, 105, 106, 107], [100.0, 101, 102, 103, 104], min_gain=0.05, alpha=0.05)[0]
    assert not is_better([100.0, 101, 102, 103, 104], [110.0, 111, 112, 113, 114], min_gain=0.05, alpha=0.05)[0]
    assert not is_better([], [1.0], min_gain=0.05, alpha=0.05)[0]


@pytest.mark.parametrize(
    ("space", "match"),
    [
        ({}, "non-empty mapping"),
        ([], "non-empty mapping"),
        ({"attention_backend": []}, "non-empty list"),
        ({"attention_backend": "triton"}, "non-empty list"),
        ({"--tp": [1]}, "without '--'"),
        ({"x": [1, 1]}, "listed twice"),
        ({"x": [None, False]}, "listed twice"),
        ({"x": [{"a": 1}]}, "scalars"),
        ({"x": [float("nan")]}, "scalars"),
    ],
)
def test_bad_spaces_are_refused_by_name(space, match):
    with pytest.raises(TuneError, match=match):
        check_space(space)


@pytest.mark.parametrize(
    ("kwargs", "match"), [({"budget_s": 0}, "budget"), ({"budget_s": 1, "min_gain": 1.5}, "min_gain")]
)
def test_bad_options_are_refused(kwargs, match):
    with pytest.raises(TuneError, match=match):
        CoordinateSearch({"x": [1, 2]}, {}, **kwargs)


def test_grid_and_describe():
    assert len(grid(tune_sim.SPACE)) == 3 * 2 * 3 * 3 * 2
    assert describe({"a": 1, "b": True}, {"a": 1, "b": None}) == "b=true"
    assert describe({"a": 1}, {"a": 1}) == "original"
    assert describe({"b": False}, {"b": None}) == "original"


def test_the_result_has_no_key_ansible_reads_as_a_task_status():
    # an action returns the result as the task result: "failed" or "changed" in it would be the task's
    result, _spent = tune_sim.run_search()
    assert not {"failed", "changed", "skipped", "unreachable"} & set(result)
