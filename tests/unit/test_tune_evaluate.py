# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The action's evaluation of one candidate (ActionModule._evaluate): which modules it calls, in which
order, and the outcome it records for each way a candidate can end, with the node's modules faked."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from ansible_collections.gpufleet.sglang.plugins.action.sglang_tune import (
    ARGV_CHECK,
    GATE,
    READY,
    STOP,
    SWITCH,
    ActionModule,
    Candidate,
)

ARGS: dict[str, Any] = {
    "base_flags": {"tp": 8, "attention_backend": "flashinfer"},
    "journal": "/opt/sglang/tune-journal.json",
    "server": {
        "version": "0.5.23",
        "model_path": "/srv/models/m",
        "host": "127.0.0.1",
        "port": 30000,
        "api_key": "",
        "service": "sglang-server",
        "config_file": "/etc/sglang/sglang-server.yaml",
        "validate": True,
        "validate_python": "/opt/sglang/current/venv/bin/python",
        "validate_env": {},
    },
    "ready": {"url": "http://127.0.0.1:30000", "timeout_s": 60, "poll_s": 1, "max_restarts": 1, "journal_lines": 2},
    "gate": {"url": "http://127.0.0.1:30000", "trials": 3},
}
MEASURED_GATE = {"valid_trial_values": [10.0, 11.0, 12.0], "telemetry": {"gpus": [{"avg_power_pct_of_limit": 50.0}]}}


def run(answers: dict[str, dict[str, Any]], *, first: bool = False, setting=None, args=None):
    """_evaluate with each module answering from ``answers``; returns the outcome and the calls."""
    calls: list[tuple[str, dict[str, Any]]] = []

    def module(name: str, module_args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        state = module_args.get("state")
        calls.append((name if name != SWITCH else f"{SWITCH}:{state}", module_args))
        return answers.get(name if name != SWITCH else f"{SWITCH}:{state}", {})

    action = object.__new__(ActionModule)
    action._module = module  # type: ignore[method-assign]
    search = SimpleNamespace(
        entries=[] if first else [{"status": "measured"}], start={"attention_backend": "flashinfer"}
    )
    outcome = action._evaluate(args or ARGS, Candidate.of(search, setting or {"attention_backend": "triton"}), {})
    return outcome, [call[0] for call in calls], calls


def test_the_original_is_measured_as_it_runs():
    outcome, names, _calls = run({GATE: MEASURED_GATE}, first=True)
    assert names == [GATE]
    assert outcome == {"status": "measured", "trials": [10.0, 11.0, 12.0], "power_pct": 50.0}


def test_a_candidate_is_checked_switched_made_ready_and_measured():
    outcome, names, calls = run({ARGV_CHECK: {"ok": True}, READY: {"ready": True}, GATE: MEASURED_GATE})
    assert names == [ARGV_CHECK, f"{SWITCH}:switch", READY, GATE]
    assert outcome["status"] == "measured"
    switch = calls[1][1]
    assert switch["candidate"] == "attention_backend=triton"
    assert switch["config_text"] == calls[0][1]["config_text"]
    assert calls[0][1]["python"] == ARGS["server"]["validate_python"]
    assert "triton" in switch["config_text"]
    assert calls[3][1]["baseline"] == []
    assert calls[3][1]["fail_on_unknown"] is False


def test_without_validation_there_is_no_check():
    args = dict(ARGS, server=dict(ARGS["server"], validate=False))
    _outcome, names, _calls = run({READY: {"ready": True}, GATE: MEASURED_GATE}, args=args)
    assert names == [f"{SWITCH}:switch", READY, GATE]


def test_a_flag_the_version_does_not_take_is_refused_before_any_module():
    outcome, names, _calls = run({}, setting={"no_such_flag_at_all": 1})
    assert names == []
    assert outcome["status"] == "refused"


@pytest.mark.parametrize(
    ("check", "status", "reason"),
    [
        ({"failed": True, "msg": "no python"}, "error", "no python"),
        ({"ok": False, "error": "unrecognized arguments"}, "refused", "SGLang's parser: unrecognized arguments"),
    ],
)
def test_the_parser_check_ends_a_candidate(check, status, reason):
    outcome, names, _calls = run({ARGV_CHECK: check})
    assert names == [ARGV_CHECK]
    assert outcome == {"status": status, "reason": reason}


def test_a_failed_switch_is_an_error():
    outcome, names, _calls = run({ARGV_CHECK: {"ok": True}, f"{SWITCH}:switch": {"failed": True, "msg": "x"}})
    assert names == [ARGV_CHECK, f"{SWITCH}:switch"]
    assert outcome == {"status": "error", "reason": "x"}


def test_a_candidate_that_does_not_get_ready_is_stopped():
    ready = {"ready": False, "verdict": "crashloop", "reason": "restarted 2 times", "journal": ["a", "b", "c"]}
    outcome, names, calls = run({ARGV_CHECK: {"ok": True}, READY: ready})
    assert names == [ARGV_CHECK, f"{SWITCH}:switch", READY, STOP]
    assert calls[3][1] == {"name": "sglang-server", "state": "stopped"}
    assert outcome == {"status": "crashed", "reason": "crashloop: restarted 2 times", "journal": ["b", "c"]}


@pytest.mark.parametrize(
    ("gate", "reason"),
    [({"failed": True, "msg": "boom"}, "boom"), ({"valid_trial_values": []}, "no valid trials")],
)
def test_a_measurement_without_trials_is_invalid(gate, reason):
    outcome, _names, _calls = run({GATE: gate}, first=True)
    assert outcome == {"status": "invalid", "reason": reason, "power_pct": None}
