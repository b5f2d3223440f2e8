#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: throughput_gate
short_description: Measure an SGLang server's output tokens/s and fail on a statistically sound regression
version_added: "0.1.0"
description:
  - Waits until the server answers C(GET) O(ready_path) with 200 within O(ready_timeout). The default,
    C(/health_generate), runs a real one-token generation (503 while FlashInfer JIT-compiles and
    autotunes); C(/ready) (SGLang 0.5.23 and later) answers 200 once the server has warmed up.
  - Sends O(warmup_requests) requests of the benchmark's shape and discards them.
  - Runs O(trials) trials. A trial sends O(requests_per_trial) streaming requests at a fixed
    O(concurrency) (closed loop, one HTTP/1.1 keep-alive connection per stream, no pool cap, no
    per-line size limit, RLIMIT_NOFILE raised). Requests are native C(POST /generate) with
    C(input_ids) of O(input_len) tokens, C(ignore_eos) and C(max_new_tokens=output_len), or
    C(POST /v1/completions) with C(stream_options.include_usage). Tokens are the server's own
    counts (C(meta_info.completion_tokens), C(usage.completion_tokens)), never events.
  - A trial's output tokens/s is measured over its steady-state window, from the moment every
    stream has its first token until the first stream runs out of requests.
  - Every event of every stream is checked. A malformed event, an error event (with or without token
    counts), a count that goes backwards or past O(output_len), data after C([DONE]), an event larger
    than 64 KiB + 64 bytes x O(output_len), a final count other than O(output_len), an HTTP error
    status, a dropped connection or a deadline makes the request an error and its trial invalid, as
    does a GPU slowed by heat or hardware. Invalid trials are retried (up to O(max_invalid_trials))
    and never counted as a regression; every verdict message says how many there were and why.
  - "Deadlines, all on the monotonic clock: readiness ends after O(ready_timeout) however slowly the
    server answers; a request fails after O(request_timeout) without a new token and in any case
    after O(request_timeout) + O(output_len) x 0.5 s; a trial ends after (waves + 1) x (request
    ceiling + connect timeout), where a wave is O(concurrency) requests; the whole run ends after the
    sum of these for the most trials it can run. The plan (RV(plan)) lists them as C(deadlines_s)."
  - HTTP 401, 403, 404, 405 or a redirect from O(ready_path) fails at once, naming the cause.
  - "Every numeric option must be finite and inside its range (below); C(NaN) and C(inf) are refused.
    Options are checked before any request is sent, including the trial memory ceiling:
    O(concurrency) x (request + 256 KiB read + 3 x largest event + 8 KiB) + 8 bytes x (requests +
    output tokens) must stay under 2 GiB, and O(requests_per_trial) x O(output_len) under 2^22."
  - O(api_key) and a password in O(url) are masked in every message, plan and result, also in
    escaped forms; an O(api_key) with control or non-ASCII characters is refused unsent.
  - "Decision, O(design=sequential) (the default): after each valid trial, from O(min_trials) on, a
    sequential probability ratio test on log throughput compares the hypothesis 'the drop is
    O(tolerance) - O(margin)' (PASS) with 'the drop is O(tolerance) + O(margin)' (FAIL), with the
    noise estimated from the baseline's and this run's trials. It stops at the first clear verdict:
    a run whose true drop is O(tolerance) - O(margin) or less fails with probability at most about
    O(alpha), one whose drop is O(tolerance) + O(margin) or more passes with probability at most
    about O(beta). At O(max_trials) without a clear verdict, the side of the tolerance line decides.
    The result says how many trials the verdict used (RV(decided_after_trials)) and why it stopped
    (RV(stop)); docs/measurement.md in the collection explains the design and its measured error rates."
  - "Decision, O(design=fixed) (the design the gate used before the sequential one): O(trials) trials;
    FAIL iff median(current) < median(baseline) x (1 - O(tolerance)) and a one-sided Mann-Whitney test (exact) gives p <
    O(alpha); PASS if the drop is within the tolerance; a drop beyond it that is clearly not significant
    (p >= 0.5) fails as C(median_beyond_tolerance); otherwise UNKNOWN, which runs one extra round of
    O(trials) trials and decides again on all of them."
  - A baseline of fewer than 5 trials gives no statistical verdict (reason C(baseline_insufficient), a
    pass); without a usable baseline both designs measure O(trials) trials. The floor
    O(min_output_tokens_per_s) fails on its own.
  - "Whatever the design, the verdict is never PASS while the current median is below the baseline
    median by more than O(tolerance) (reason C(median_beyond_tolerance)); the sequential design
    winsorises each sample's log throughputs, and a O(baseline) with a trial more than 25% below or
    33.3% above its median is refused. An event that claims more tokens than the stream carried
    (C(output_ids), C(token_ids), else text) makes the trial invalid (C(over-reported tokens))."
  - With O(telemetry), one C(nvidia-smi --query-gpu=... -lms) loop samples all GPUs during the trials;
    the result reports per-GPU power against the enforced limit, utilization, SM clock,
    temperature, clock-event reasons and energy; average power under 50% of the limit is flagged
    C(under_use).
  - Runs on the target and uses the Python standard library only.
author:
  - gpufleet.sglang contributors (!UNKNOWN)
options:
  url:
    description:
      - Base URL of the SGLang server (C(http://) only, ASCII without spaces or control characters).
      - C(user:password@) in it is sent as HTTP Basic authentication when O(api_key) is not set.
    type: str
    default: http://127.0.0.1:30000
  api:
    description: V(native) for C(/generate) or V(openai) for C(/v1/completions).
    type: str
    choices: [native, openai]
    default: native
  model:
    description: Model name sent to the OpenAI API (required with O(api=openai)); informational for V(native).
    type: str
    default: ""
  api_key:
    description: Sent as C(Authorization Bearer) when set (the server's C(--api-key)); printable ASCII only.
    type: str
  concurrency:
    description: Number of concurrent streams (closed loop), 1 to 4096; RLIMIT_NOFILE is raised.
    type: int
    default: 64
  requests_per_trial:
    description: Requests per trial, from O(concurrency) to 65536.
    type: int
    default: 256
  input_len:
    description:
      - Prompt length in tokens, 1 to 262144 (synthetic token ids, unique per request so prefix caching cannot help).
      - Each request body is built when the request is sent, never ahead.
    type: int
    default: 1024
  output_len:
    description: Output tokens per request (C(max_new_tokens) with C(ignore_eos)), 1 to 32768.
    type: int
    default: 256
  warmup_requests:
    description: Requests sent and discarded before the trials, 0 (none) to 65536.
    type: int
    default: 64
  trials:
    description:
      - Valid trials per round, 1 to 50. O(design=fixed) runs one round and one extra round on UNKNOWN.
      - Both designs measure exactly this many when there is no usable baseline (these trials become the
        first baseline, which needs 5 or more).
    type: int
    default: 5
  design:
    description:
      - V(sequential) decides after each valid trial and stops at the first clear verdict, between
        O(min_trials) and O(max_trials) trials; V(fixed) is the fixed round of O(trials) with one extra
        round on UNKNOWN.
    type: str
    choices: [sequential, fixed]
    default: sequential
  min_trials:
    description:
      - Sequential design, 2 to 50 and at most O(max_trials) - valid trials before any verdict, so that a
        lucky trial never decides.
      - The action plugin raises it to O(trials) when the run may write a baseline (no baseline yet,
        O(update_baseline) or O(accept_baseline)), so such a run has enough trials to store.
    type: int
    default: 3
  max_trials:
    description: Sequential design, 2 to 100 - the cap on valid trials; there the side of the tolerance line decides.
    type: int
    default: 10
  beta:
    description:
      - Sequential design, in (0, 0.5) - the largest chance to PASS a run whose drop is O(tolerance) + O(margin).
    type: float
    default: 0.005
  margin:
    description:
      - Sequential design, 0.01 to 0.5 - half-width of the indifference zone around O(tolerance) (a fraction
        of the baseline). O(tolerance) + O(margin) must stay below 1.
    type: float
    default: 0.05
  baseline:
    description:
      - Output tokens/s of earlier valid trials (the baseline); at most 1000 values, each in (0, 1e8].
      - Empty or fewer than 5 values give no statistical verdict.
    type: list
    elements: float
    default: []
  tolerance:
    description: Allowed drop of the median as a fraction (0.10 = 10%), in [0, 1).
    type: float
    default: 0.10
  alpha:
    description:
      - In (0, 1). V(fixed) design - significance level of the one-sided Mann-Whitney test. V(sequential) design -
        the largest chance to FAIL a run whose drop is O(tolerance) - O(margin) (a run with no drop fails far
        less often, see docs/measurement.md).
    type: float
    default: 0.05
  min_output_tokens_per_s:
    description: Absolute floor for the median output tokens/s (0 = none), 0 to 1e8.
    type: float
    default: 0
  ready_path:
    description:
      - Readiness endpoint polled before any load, starting with C(/) (printable ASCII without spaces).
      - The role gpufleet.sglang.throughput_gate passes the path the gpufleet.sglang.sglang_server role
        waited on (C(sglang_server_facts.ready_path)) when that role ran on the host.
    type: str
    default: /health_generate
  ready_timeout:
    description:
      - Seconds to wait for O(ready_path) to answer 200 (JIT and autotune take many minutes), 1 to 86400.
      - One deadline for the whole wait, trickled answers included; each poll takes at most 30 s.
    type: float
    default: 1800
  request_timeout:
    description:
      - Seconds a request may go without a new token (or, before its first token, without its
        response head) before it counts as an error, 1 to 3600.
      - A request also fails after O(request_timeout) + O(output_len) x 0.5 s in all, however it progresses.
    type: float
    default: 300
  telemetry:
    description: Sample GPUs with nvidia-smi during the trials. If nvidia-smi cannot be found the result says so.
    type: bool
    default: true
  nvidia_smi_path:
    description: nvidia-smi executable (a name looked up in PATH, or a path).
    type: str
    default: nvidia-smi
  telemetry_interval_ms:
    description: nvidia-smi C(-lms) sampling interval, 50 to 60000.
    type: int
    default: 200
  max_invalid_trials:
    description:
      - Invalid trials tolerated (and retried) before the gate fails as unable to measure, 0 to 100.
      - Default O(trials).
    type: int
  fail_on_unknown:
    description:
      - Fail when the verdict is still UNKNOWN after the extra round (V(fixed) design; the sequential design
        always decides).
    type: bool
    default: true
  # Controller-side options: the action plugin of the same name handles them on the controller
  # and removes them before the module runs on the target.
  baseline_dir:
    description:
      - Controller directory of stored baselines and histories. When set, the action plugin
        chooses the baseline (O(baseline) must not be given), checks the directory is writable
        before any load is sent, and records the run (see the role README for the rules).
      - Files are C(<label>__<hash>.json) (baseline), C(.history.jsonl) (one JSON object per run)
        and C(.lock); the key inside the file identifies it, the name is only a label.
      - The task reports C(changed) when it wrote the baseline (the history is a log and does not count).
      - Without it the module runs with the O(baseline) given.
    type: path
  baseline_key:
    description:
      - The structured key of the stored baseline; all parts are compared exactly.
    type: dict
    suboptions:
      host:
        description: Host part; the task's C(inventory_hostname) when not set.
        type: str
      model:
        description: Model part.
        type: str
        required: true
      model_revision:
        description:
          - The model store's commit the server loads (V(unpinned) when it does not load a pinned snapshot).
          - With no baseline for this revision, the newest baseline of another revision at the same SGLang
            version is used, so a new model revision is gated like a new release.
        type: str
        default: unpinned
      profile:
        description: Server profile part (V(fast) never matches V(fast__tp8)).
        type: str
        required: true
      sglang_version:
        description:
          - SGLang version part. With no baseline for this version, the baseline of the highest
            earlier version (PEP 440 order) of the same host, model, profile and GPU model is used.
        type: str
        required: true
      gpu_model:
        description: GPU model part.
        type: str
        required: true
  baseline_fallback:
    description: Compare a key without a baseline with the highest earlier SGLang version's baseline.
    type: bool
    default: true
  update_baseline:
    description: Replace the stored baseline with this run's trials when the gate passes.
    type: bool
    default: false
  accept_baseline:
    description:
      - Make this run's trials the baseline even when they are lower (a regression accepted on
        purpose); the run then does not fail for the regression. Needs O(accept_reason) and at
        least 5 trials; invalid, unready or below-floor runs are never accepted.
      - A stored baseline that is unusable (corrupt, too short, other request shape) is replaced.
    type: bool
    default: false
  accept_reason:
    description: Why the new baseline is accepted; kept in the history with the controller user and the time.
    type: str
    default: ""
  gpu_health:
    description:
      - The node's GPU health when the gate runs (the role passes C(sglang_server_gpu_health) of the entry point
        C(health) of role sglang_server), kept in the history record (the fleet report shows it) and appended to
        the summary row (C(gpu degraded) and the reasons). Needs O(baseline_dir).
    type: dict
    suboptions:
      level:
        description: The node's level.
        type: str
        choices: [healthy, degraded, failed]
        required: true
      verdict:
        description: The node's verdict (the level and the reasons of that level).
        type: str
        required: true
  cold_start:
    description:
      - The server's start this run saw (C(release), C(sglang_version), C(ready_s), C(phases), C(cuda_graph);
        the role passes C(sglang_server_facts.cold_start) of role sglang_server's readiness wait). Checked and
        kept as C(cold_start) in the history record; one of the wrong shape is left out and named in
        C(cold_start_problem). Needs O(baseline_dir).
    type: dict
notes:
  - Check mode sends nothing and reports the plan in RV(plan).
  - The module never changes the target; C(changed) is always false.
attributes:
  check_mode:
    support: full
    description: Sends no request; returns the plan with verdict V(unknown) and reason V(check_mode).
  diff_mode:
    support: none
    description: Changes nothing on the target, so has no diff.
"""

EXAMPLES = r"""
- name: Gate a deployed server against the stored baseline
  gpufleet.sglang.throughput_gate:
    url: http://127.0.0.1:30000
    concurrency: 64
    requests_per_trial: 256
    input_len: 1024
    output_len: 256
    design: sequential
    min_trials: 3
    max_trials: 10
    baseline: [3712.4, 3740.9, 3751.0, 3733.2, 3745.6]
    tolerance: 0.10
    min_output_tokens_per_s: 3000
  register: gate

- name: OpenAI API with a key, no telemetry
  gpufleet.sglang.throughput_gate:
    url: http://10.0.0.5:30000
    api: openai
    model: zai-org/GLM-5-NVFP4
    api_key: "{{ vault_sglang_api_key }}"
    telemetry: false
"""

RETURN = r"""
verdict:
  description: V(pass), V(fail) or V(unknown) (not measured, invalid trials, check mode, or inconclusive).
  returned: always
  type: str
reason:
  description: >-
    Why: V(within_tolerance), V(regression), V(median_beyond_tolerance) (a PASS that the medians
    contradict: never a pass), V(below_floor), V(inconclusive), V(baseline_insufficient),
    V(no_baseline), V(invalid_trials), V(not_ready), V(error), V(check_mode). V(not_significant) is no
    longer produced (it became V(median_beyond_tolerance)).
  returned: always
  type: str
trials:
  description: Every trial run, valid or not, with C(output_tokens_per_s), C(request_throughput), C(ttft_ms)
    and C(itl_ms) percentiles, C(events), C(errors), C(valid), C(invalid_reason), C(extra_round).
  returned: always
  type: list
  elements: dict
valid_trial_values:
  description: Output tokens/s of the valid trials (what a new baseline stores).
  returned: when measured
  type: list
  elements: float
median_output_tokens_per_s:
  description: Median output tokens/s of the valid trials.
  returned: always
  type: float
baseline_median:
  description: Median of O(baseline), null without one.
  returned: always
  type: float
delta_pct:
  description: (current median - baseline median) / baseline median x 100.
  returned: always
  type: float
p_value:
  description: One-sided Mann-Whitney p-value (current smaller than baseline); null without a baseline.
  returned: always
  type: float
extra_round:
  description: Whether the UNKNOWN verdict triggered the extra round of trials (V(fixed) design).
  returned: always
  type: bool
design:
  description: The design that decided (O(design)).
  returned: always
  type: str
decided_after_trials:
  description: How many valid trials the verdict used; null when no verdict was reached.
  returned: always
  type: int
stop:
  description: >-
    Why the run stopped where it did - V(round) (the round of O(trials)), V(extra_round), V(pass_boundary) or
    V(fail_boundary) (the sequential test crossed a boundary), V(cap) (O(max_trials) reached); null when no
    verdict was reached.
  returned: always
  type: str
sequential:
  description: >-
    The sequential test where it stopped - C(n), C(ratio) (current over baseline, geometric means), C(llr)
    (log-likelihood ratio of FAIL over PASS), C(lower) and C(upper) (its boundaries), C(sigma) (noise used),
    C(df), C(pass_ratio), C(fail_ratio); null for the fixed design or without a usable baseline.
  returned: always
  type: dict
invalid_trials:
  description: Number of invalid trials (retried, not counted).
  returned: always
  type: int
telemetry:
  description: Per-GPU summary (C(gpus[]) with C(avg_power_w), C(power_limit_w), C(avg_power_pct_of_limit),
    C(avg_utilization_pct), C(avg_sm_clock_mhz), C(clock_event_reasons), C(throttled), C(energy_j), C(under_use)),
    plus C(available), C(under_use), C(throttled), C(energy_j).
  returned: always
  type: dict
ready:
  description: Seconds waited for readiness (C(waited_s)) and the server's C(version) from C(/server_info).
  returned: when the server became ready
  type: dict
elapsed_s:
  description:
    - Seconds the measurement itself took on the monotonic clock, from the first readiness poll to the verdict;
      the deadlines in C(deadlines_s) of RV(plan) bound it. The task's own duration adds the interpreter's start.
  returned: when the gate ran (not in check mode)
  type: float
summary_row:
  description: The host's line of the role's summary table (verdict, reason, tok/s, baseline, delta, p, GPU power).
  returned: always
  type: str
plan:
  description:
    - What the gate would run (endpoint with any URL password masked, shape, trials, telemetry command),
      C(deadlines_s) (C(ready_s), C(connect_s), C(request_idle_s), C(request_s), C(warmup_s), C(trial_s),
      C(max_trials), C(run_s)) and C(trial_memory_ceiling_bytes).
  returned: always
  type: dict
msg:
  description: >-
    The verdict in one sentence with baseline median, current median, delta %, p-value, how many trials
    were invalid and why, and telemetry.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.sglang.plugins.module_utils.common.secret_mask import mask as redact
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.limits import GateInputError
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.runner import (
    GateParams,
    plan,
    run_gate,
    secrets,
    summary_row,
    validate,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.spec import ARGUMENT_SPEC, GATE_ARGUMENT_SPEC


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = GateParams(**{k: v for k, v in module.params.items() if k in GATE_ARGUMENT_SPEC})
    hidden = secrets(params)
    module.no_log_values.update(hidden)  # Ansible then masks them in the echoed arguments too

    def finish(failed: bool, **out: object) -> None:
        """Every output of the module leaves through here: secrets masked in every form."""
        masked = redact(out, hidden)
        if failed:
            module.fail_json(**masked)  # type: ignore[arg-type]
        module.exit_json(**masked)  # type: ignore[arg-type]

    try:
        validate(params)
    except GateInputError as exc:
        finish(True, msg=f"throughput_gate: {exc}", verdict="unknown", reason="error", changed=False)
    the_plan = plan(params)
    if module.check_mode:
        finish(
            False,
            changed=False,
            verdict="unknown",
            reason="check_mode",
            plan=the_plan,
            trials=[],
            summary_row=summary_row({"verdict": "unknown", "reason": "check_mode"}),
            msg="check mode: nothing sent; see plan",
        )
    try:
        failed, message, result = run_gate(params)
    except Exception as exc:  # never a traceback: name the failure and stop the play
        finish(
            True,
            msg=f"throughput_gate: unexpected error while measuring {the_plan['endpoint']}: {exc!r}",
            verdict="unknown",
            reason="error",
            changed=False,
        )
    result["plan"] = the_plan
    result["summary_row"] = summary_row(result)
    if result.get("telemetry", {}).get("under_use"):
        module.warn("GPU under-use: average power below 50% of the limit during load (see telemetry)")
    if result.get("reason") == "baseline_insufficient":
        module.warn(f"baseline has {len(params.baseline)} trials (< 5): no statistical verdict")
    finish(failed, msg=message, changed=False, **result)


if __name__ == "__main__":
    main()
