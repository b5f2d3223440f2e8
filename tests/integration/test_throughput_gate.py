# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""throughput_gate module and role, driven by ansible-runner against localhost.

The server is tests/standins/sglang_api.py (an SGLang HTTP stand-in) on a random loopback port
(the ``standin`` fixture of tests/integration/conftest.py);
GPUs are tests/standins/nvidia-smi replaying an RTX PRO 6000 profile, with a state file that sets
power and clock-event reasons. Loads are small and bounded (a few hundred requests per run).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from lib.gate_play import MODULE_PLAY, RATE, ROLE_PLAY, SHAPE, Result, role_vars, run_play

REPO = Path(__file__).resolve().parents[2]
NVIDIA_SMI = REPO / "tests" / "standins" / "nvidia-smi"


def gate(tmp_path: Path, url: str, *, check: bool = False, env=None, **args) -> Result:
    gate_args = {"url": url, "telemetry": False, **SHAPE, **args}
    return run_play(tmp_path, MODULE_PLAY, {"gate_args": gate_args}, "Run the throughput gate", check=check, env=env)


def measured_baseline(tmp_path: Path, url: str, **args) -> list[float]:
    first = gate(tmp_path, url, **args)
    assert first.rc == 0, first.output
    assert first.res["reason"] == "no_baseline"
    values = first.res["valid_trial_values"]
    assert len(values) == 5
    return values


# --------------------------------------------------------------------------- verdicts


# streams long enough (about 1 s a trial) that the client's own overhead between requests, which grows
# when the test machine is loaded, stays far inside the 5% a rate check allows (with SHAPE's 32-token
# streams, 0.26 s a trial, it did not: one failure at load 7.5)
TIMED = {"output_len": 128}


def test_passes_at_baseline_speed_and_fails_at_80_percent(tmp_path, standin):
    fast = standin(STANDIN_TOKENS_PER_S=str(RATE))
    baseline = measured_baseline(tmp_path, fast.url, **TIMED)
    # the measurement follows the configured rate (the stand-in is the ground truth)
    assert abs(sorted(baseline)[2] - RATE) / RATE < 0.05, baseline

    same = gate(tmp_path, fast.url, baseline=baseline, **TIMED)
    assert same.rc == 0, same.output
    assert same.res["verdict"] == "pass"
    assert same.res["reason"] in ("within_tolerance", "not_significant")
    assert same.res["p_value"] is not None
    # the sequential design (the default) stops at its minimum on so clear a case, and says so; on
    # a test host so loaded that the stand-in's own trials drift, the guard keeps measuring where
    # the medians contradict the PASS boundary and decides at the cap (trials per decision are
    # measured in benchmarks/gate_bench.py, not here)
    assert same.res["design"] == "sequential"
    trials = same.res["decided_after_trials"]
    assert len(same.res["valid_trial_values"]) == trials
    if same.res["stop"] == "pass_boundary":
        assert trials == 3
        assert same.res["sequential"]["llr"] <= same.res["sequential"]["lower"]
        assert "decided after 3 valid trials at the PASS boundary" in same.res["msg"]
    else:
        assert same.res["stop"] == "cap", same.res

    fast.stop()
    slow = standin(STANDIN_TOKENS_PER_S=str(RATE * 0.8))
    regressed = gate(tmp_path, slow.url, baseline=baseline, **TIMED)
    assert regressed.rc != 0, regressed.output
    assert regressed.res["verdict"] == "fail"
    assert regressed.res["reason"] == "regression"
    assert -25 < regressed.res["delta_pct"] < -15
    assert regressed.res["p_value"] < 0.05
    assert (regressed.res["decided_after_trials"], regressed.res["stop"]) == (3, "fail_boundary")
    msg = regressed.res["msg"]
    for needle in ("baseline median", "current median", "delta", "p-value", "telemetry", "decided after 3"):
        assert needle in msg, msg

    # the fixed design is still there: a round of 5, the same verdict
    fixed = gate(tmp_path, slow.url, baseline=baseline, design="fixed", **TIMED)
    assert fixed.rc != 0, fixed.output
    assert (fixed.res["verdict"], fixed.res["reason"]) == ("fail", "regression")
    assert (fixed.res["decided_after_trials"], fixed.res["stop"]) == (5, "round")
    assert fixed.res["sequential"] is None


def test_floor_fails_without_baseline(tmp_path, standin):
    server = standin(STANDIN_TOKENS_PER_S=str(RATE))
    r = gate(tmp_path, server.url, min_output_tokens_per_s=RATE * 2)
    assert r.rc != 0
    assert r.res["reason"] == "below_floor"
    assert "min_output_tokens_per_s" in r.res["msg"]


def test_short_baseline_gives_no_statistical_verdict(tmp_path, standin):
    server = standin(STANDIN_TOKENS_PER_S=str(RATE))
    # the baseline's median is the server's rate: no statistical verdict, and nothing the medians
    # contradict (a median beyond the tolerance would fail as median_beyond_tolerance: test_gate_robust)
    r = gate(tmp_path, server.url, baseline=[RATE, RATE, RATE])
    assert r.rc == 0, r.output
    assert r.res["reason"] == "baseline_insufficient"
    assert "without a statistical verdict" in r.res["msg"]


def test_openai_api_with_api_key(tmp_path, standin):
    server = standin("--api-key", "s3cret", STANDIN_TOKENS_PER_S=str(RATE))
    wrong = gate(tmp_path, server.url, api="openai", model="test/model", api_key="nope")
    assert wrong.rc != 0
    assert wrong.res["reason"] == "invalid_trials"
    assert "HTTP 401" in wrong.res["msg"]
    right = gate(tmp_path, server.url, api="openai", model="test/model", api_key="s3cret", **TIMED)
    assert right.rc == 0, right.output
    assert abs(right.res["median_output_tokens_per_s"] - RATE) / RATE < 0.05
    assert "s3cret" not in right.output


# --------------------------------------------------------------------------- faults: never a false PASS

FAULTS = {
    "http500": "HTTP 500",
    "midstream_error": "server sent an error event",
    "malformed_sse": "malformed event",
    "short_tokens": "wrong token count",
    "drop_connection": "connection closed by the server",
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_each_fault_fails_clearly(tmp_path, standin, fault):
    server = standin(STANDIN_TOKENS_PER_S=str(RATE), STANDIN_FAULT=fault)
    r = gate(tmp_path, server.url, baseline=[RATE] * 5, max_invalid_trials=1)
    assert r.rc != 0, r.output
    assert r.res["verdict"] != "pass"
    assert r.res["reason"] == "invalid_trials"
    assert FAULTS[fault] in r.res["msg"], r.res["msg"]
    assert "Traceback" not in r.output


@pytest.mark.parametrize("design", ["fixed", "sequential"])
def test_one_bad_trial_is_retried_not_counted(tmp_path, standin, design):
    # the 3rd trial's first request gets a mid-stream error; the trial is retried (128-token streams, as the
    # rate checks above: a loaded machine's client overhead stays inside the trials' spread)
    after = SHAPE["warmup_requests"] + 2 * SHAPE["requests_per_trial"]
    server = standin(
        STANDIN_TOKENS_PER_S=str(RATE),
        STANDIN_FAULT="midstream_error",
        STANDIN_FAULT_AFTER=str(after),
        STANDIN_FAULT_COUNT="1",
    )
    r = gate(tmp_path, server.url, baseline=[RATE] * 5, design=design, **TIMED)
    assert r.rc == 0, r.output
    assert r.res["verdict"] == "pass"
    assert r.res["invalid_trials"] == 1
    assert [t["valid"] for t in r.res["trials"]].count(False) == 1
    trials = r.res["decided_after_trials"]
    assert len(r.res["valid_trial_values"]) == trials
    if design == "fixed":
        assert trials == SHAPE["trials"]
    # sequential: its minimum of valid trials on so clear a case; on a test host so loaded that a trial drifts
    # (seen in make test: 1,632 tokens/s among three near 2,000) it measures on, up to its cap (the plan's)
    else:
        plan = r.res["plan"]["design"]
        assert (plan["min_trials"], plan["max_trials"]) == (3, 10), plan
        if r.res["stop"] == "pass_boundary":
            assert plan["min_trials"] <= trials < plan["max_trials"], r.res
        else:
            assert r.res["stop"] == "cap", r.res
            assert trials == plan["max_trials"], r.res


def test_unreachable_server_fails_after_ready_timeout(tmp_path, standin):
    server = standin()
    server.stop()  # the port is now closed
    r = gate(tmp_path, server.url, ready_timeout=2)
    assert r.rc != 0
    assert r.res["reason"] == "not_ready"
    assert "not ready after 2s" in r.res["msg"]


def test_waits_for_startup(tmp_path, standin):
    server = standin(STANDIN_TOKENS_PER_S=str(RATE), STANDIN_STARTUP_DELAY_S="10")
    with pytest.raises(urllib.error.HTTPError, match="503"):
        urllib.request.urlopen(server.url + "/health_generate", timeout=5)
    r = gate(tmp_path, server.url, ready_timeout=30)
    assert r.rc == 0, r.output
    assert r.res["ready"]["waited_s"] >= 2.0
    assert r.res["ready"]["version"] == "0.5.23"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ({"url": "http://[::1"}, "is not a valid URL"),
        ({"url": "https://127.0.0.1:1"}, "only http://"),
        ({"concurrency": 0}, "concurrency must be a finite number in [1, 4096], got 0"),
        ({"requests_per_trial": 4}, "requests_per_trial (4) must be >= concurrency (8)"),
        ({"tolerance": 1.5}, "tolerance must be a finite number in [0, 1), got 1.5"),
        ({"api": "openai"}, "api=openai needs model"),
        ({"baseline": [100, -1]}, "baseline[1] must be a finite number in (0, 1e+08] tokens/s"),
        ({"api": "grpc"}, "value of api must be one of"),
    ],
)
def test_bad_input_is_named(tmp_path, args, needle):
    r = gate(tmp_path, args.pop("url", "http://127.0.0.1:9"), **args)
    assert r.rc != 0
    assert needle in r.res["msg"], r.res["msg"]


def test_check_mode_sends_nothing(tmp_path, standin):
    server = standin(STANDIN_TOKENS_PER_S=str(RATE))
    r = gate(tmp_path, server.url, check=True)
    assert r.rc == 0, r.output
    assert r.res["reason"] == "check_mode"
    assert r.res["plan"]["endpoint"].endswith("/generate (stream)")
    assert server.generation_tokens() == 0


# --------------------------------------------------------------------------- telemetry


def _state(tmp_path: Path, **values) -> str:
    path = tmp_path / "smi-state.json"
    path.write_text(json.dumps({"gpus": {"*": values}}))
    return str(path)


def test_telemetry_flags_under_use(tmp_path, standin):
    server = standin(STANDIN_TOKENS_PER_S=str(RATE))
    env = {"STANDIN_NVIDIA_SMI_STATE": _state(tmp_path, power_draw_instant_w=250.0, utilization_gpu=97)}
    r = gate(tmp_path, server.url, telemetry=True, nvidia_smi_path=str(NVIDIA_SMI), env=env)
    assert r.rc == 0, r.output
    tele = r.res["telemetry"]
    assert tele["available"]
    assert len(tele["gpus"]) == 8
    assert tele["under_use"]
    assert tele["gpus"][0]["avg_power_w"] == 250.0
    assert tele["gpus"][0]["power_limit_w"] == 600.0
    assert tele["gpus"][0]["energy_j"] > 0
    assert "UNDER-USE" in r.res["msg"]

    busy = {"STANDIN_NVIDIA_SMI_STATE": _state(tmp_path, power_draw_instant_w=560.0, utilization_gpu=99)}
    r2 = gate(tmp_path, server.url, telemetry=True, nvidia_smi_path=str(NVIDIA_SMI), env=busy)
    assert r2.rc == 0, r2.output
    assert not r2.res["telemetry"]["under_use"]


def test_thermal_throttling_makes_trials_invalid(tmp_path, standin):
    server = standin(STANDIN_TOKENS_PER_S=str(RATE))
    env = {"STANDIN_NVIDIA_SMI_STATE": _state(tmp_path, power_draw_instant_w=590.0, clocks_event_reasons="0x40")}
    r = gate(tmp_path, server.url, telemetry=True, nvidia_smi_path=str(NVIDIA_SMI), env=env, max_invalid_trials=1)
    assert r.rc != 0
    assert r.res["reason"] == "invalid_trials"
    assert "GPU throttled: hw_thermal_slowdown" in r.res["msg"]


def test_missing_nvidia_smi_is_reported(tmp_path, standin):
    server = standin(STANDIN_TOKENS_PER_S=str(RATE))
    r = gate(tmp_path, server.url, telemetry=True, nvidia_smi_path="/nonexistent/nvidia-smi")
    assert r.rc == 0, r.output
    assert r.res["telemetry"]["available"] is False
    assert "not found" in r.res["telemetry"]["reason"]


# --------------------------------------------------------------------------- role


def test_role_baseline_history_and_summary(tmp_path, standin):
    fast = standin(STANDIN_TOKENS_PER_S=str(RATE))
    task = "Run the throughput gate"
    first = run_play(tmp_path, ROLE_PLAY, role_vars(tmp_path, fast.url), task)
    assert first.rc == 0, first.output
    files = sorted((tmp_path / "baselines").iterdir())
    names = [f.name for f in files]
    # a readable label plus a hash of the structured key (stored in the file)
    key = next(n for n in names if n.endswith(".json"))[: -len(".json")]
    assert key.startswith(
        "localhost__test_model__unpinned__glm5-tp8__0.5.23__NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition__"
    )
    assert names == [f"{key}.history.jsonl", f"{key}.json", f"{key}.lock"], names
    baseline_path = tmp_path / "baselines" / f"{key}.json"
    stored = json.loads(baseline_path.read_text())
    assert len(stored["trials"]) == 5
    assert stored["key"]["sglang_version"] == "0.5.23"
    summary = [m for m in first.debug_msgs if isinstance(m, list) and m and m[0].startswith("host")]
    assert summary, first.output
    assert "PASS" in summary[0][1]
    assert "no_baseline" in summary[0][1]

    second = run_play(tmp_path, ROLE_PLAY, role_vars(tmp_path, fast.url), task)
    assert second.rc == 0, second.output
    assert second.res["reason"] in ("within_tolerance", "not_significant")
    assert json.loads(baseline_path.read_text()) == stored  # not replaced without update_baseline
    # a run that cannot write the baseline stops early (at the sequential minimum of 3 when its trials
    # agree); the history says after how many and why. On a loaded test host one trial may drift
    # (seen: 1601 against 2000 tok/s) and the design rightly measures on; it still stops at a boundary
    # or the cap, never at the 5 trials a baseline needs by rule.
    second_values = second.res["valid_trial_values"]
    second_stop = (second.res["decided_after_trials"], second.res["stop"])
    assert len(second_values) == second_stop[0]
    assert second_stop[1] in ("pass_boundary", "cap"), second.res
    assert second_stop[0] >= 3
    if max(second_values) <= 1.1 * min(second_values):
        assert second_stop == (3, "pass_boundary"), second.res
    assert second.res["baseline"]["min_trials_raised_to"] is None

    fast.stop()
    slow = standin(STANDIN_TOKENS_PER_S=str(RATE * 0.8))
    third = run_play(tmp_path, ROLE_PLAY, role_vars(tmp_path, slow.url, throughput_gate_update_baseline=True), task)
    assert third.rc != 0, third.output
    assert third.res["verdict"] == "fail"
    summary = [m for m in third.debug_msgs if isinstance(m, list) and m and m[0].startswith("host")]
    assert summary, third.output
    assert "FAIL" in summary[0][1]
    assert "regression" in summary[0][1]
    # a failed run never replaces the baseline, even with update_baseline
    assert json.loads(baseline_path.read_text()) == stored
    history = [json.loads(line) for line in (tmp_path / "baselines" / f"{key}.history.jsonl").read_text().splitlines()]
    assert [h["verdict"] for h in history] == ["pass", "pass", "fail"]
    assert history[2]["failed"] is True
    assert [(h["decided_after_trials"], h["stop"]) for h in history] == [
        (5, "round"),
        second_stop,
        (5, "fail_boundary"),
    ]

    # update_baseline from a passing run replaces it
    fourth = update_on_purpose(tmp_path, slow.url, task, baseline_path)
    assert json.loads(baseline_path.read_text())["trials"] == fourth.res["valid_trial_values"]


def update_on_purpose(tmp_path, url, task, baseline_path):
    """A passing run with update_baseline, which must replace the baseline. On a loaded test host one trial
    can drift far enough (seen: 999 among 1,550-1,600 tok/s) that the run's trials are refused as a
    baseline, rightly: the baseline then stays, the reason says why, and the run is taken once more."""
    before = json.loads(baseline_path.read_text())
    for attempt in (1, 2):
        run = run_play(
            tmp_path,
            ROLE_PLAY,
            role_vars(tmp_path, url, throughput_gate_update_baseline=True, throughput_gate_tolerance=0.5),
            task,
        )
        assert run.rc == 0, run.output
        # update_baseline raises the sequential minimum to throughput_gate_trials, so the run can be stored
        assert run.res["baseline"]["min_trials_raised_to"] == 5
        assert len(run.res["valid_trial_values"]) == 5
        if run.res["baseline"]["written"] or attempt == 2:
            break
        assert "cannot be a baseline" in run.res["baseline"]["write_reason"], run.res["baseline"]
        assert json.loads(baseline_path.read_text()) == before
    assert run.res["baseline"]["written"] is True, run.res["baseline"]
    return run


def test_role_check_mode_writes_nothing(tmp_path, standin):
    server = standin(STANDIN_TOKENS_PER_S=str(RATE))
    r = run_play(tmp_path, ROLE_PLAY, role_vars(tmp_path, server.url), "Run the throughput gate", check=True)
    assert r.rc == 0, r.output
    assert r.res["reason"] == "check_mode"
    assert not (tmp_path / "baselines").exists()
    assert server.generation_tokens() == 0


def test_role_rejects_corrupt_baseline(tmp_path, standin):
    server = standin(STANDIN_TOKENS_PER_S=str(RATE))
    base = tmp_path / "baselines"
    base.mkdir()
    # a foreign file in the baseline directory (more cases in test_gate_baseline_role.py)
    (base / "localhost__test_model__glm5-tp8.json").write_text(json.dumps({"trials": ["fast", 1]}))
    r = run_play(tmp_path, ROLE_PLAY, role_vars(tmp_path, server.url), "Run the throughput gate")
    assert r.rc != 0
    assert "localhost__test_model__glm5-tp8.json is not a throughput_gate baseline" in r.output
