# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller side of gpufleet.sglang.throughput_gate: baselines and history, then the module.

Without ``baseline_dir`` the task is passed to the module unchanged (a caller-supplied
``baseline``). With it, this plugin checks the directory is writable, chooses and validates the
baseline (rules in ``module_utils/gate/baseline.py``), runs the module on the target with that
baseline, and records the run under the key's lock. Everything it returns is masked for the API
key and URL credentials.

The module runs through ``_execute_module``: check mode reaches it as ``_ansible_check_mode``
(it then sends nothing and returns its plan), and with ``delegate_to`` it runs on the delegated
host while the baseline key keeps the task's ``inventory_hostname``. The module validates its
own options, so the plugin sets no ``_VALID_ARGS``; it validates and removes only its
controller-side options (``CONTROLLER_ARGUMENT_SPEC``).
"""

from __future__ import annotations

import getpass
import os
from datetime import datetime, timezone
from functools import partial
from typing import Any

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.sglang.plugins.module_utils.common.secret_mask import mask, secrets_of
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.baseline import (
    MIN_TRIALS,
    BaselineError,
    Paths,
    baseline_document,
    baseline_files,
    check_writable,
    choose,
    commit,
    make_key,
    read_file,
    run_record,
    shape_mismatch,
    shape_of,
    write_decision,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.spec import CONTROLLER_ARGUMENT_SPEC, with_defaults

MODULE = "gpufleet.sglang.throughput_gate"


def _who() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid {os.getuid()}"


def _raise_min_trials(args: dict[str, Any], trials: int) -> int | None:
    """Raise a sequential run's ``min_trials`` (and ``max_trials`` with it) to ``trials``; the new minimum, or None."""
    opts = with_defaults(args)
    if opts["design"] != "sequential":
        return None
    try:
        low = int(opts["min_trials"])  # type: ignore[call-overload]
        high = int(opts["max_trials"])  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None  # the module names a bad value
    if low >= trials:
        return None
    args["min_trials"] = trials
    args["max_trials"] = max(high, trials)
    return trials


def _controller_options(given: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """The controller-side options, checked: a BaselineError names the first bad one (nothing was sent)."""
    checked = ArgumentSpecValidator(CONTROLLER_ARGUMENT_SPEC).validate(given)
    if checked.error_messages:
        raise BaselineError("; ".join(checked.error_messages))
    opts = checked.validated_parameters
    if "baseline" in args:
        raise BaselineError(
            "baseline and baseline_dir exclude each other: with baseline_dir the stored baseline is used"
        )
    if opts["accept_baseline"] and not opts["accept_reason"].strip():
        raise BaselineError(
            "accept_baseline needs accept_reason (why a lower baseline is accepted; kept in the history)"
        )
    if not opts.get("baseline_key"):
        raise BaselineError("baseline_dir needs baseline_key (model, profile, sglang_version, gpu_model)")
    return opts


def _comparable(choice: Any, shape: dict[str, Any], accept: bool, problems: list[str]) -> list[float]:
    """The chosen baseline's trials when its request shape is this run's; [] (and a problem noted) when an
    accepted re-baseline replaces one of another shape; a BaselineError otherwise."""
    if choice.baseline is None:
        return choice.trials
    differs = shape_mismatch(choice.baseline.shape, shape)
    if not differs:
        return choice.trials
    text = (
        f"baseline file {choice.baseline.path} was measured with another request shape "
        f"({'; '.join(differs)}): not comparable"
    )
    if not accept:
        raise BaselineError(f"{text}. Restore the shape, or re-baseline on purpose with accept_baseline")
    problems.append(text)
    return []


def _trials(args: dict[str, Any]) -> int:
    """The run's trials as the module will read them (a bad value: the module names it)."""
    try:
        return int(with_defaults(args)["trials"])  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return MIN_TRIALS


def _choice(key: dict[str, str], paths: Paths, directory: str, *, fallback: bool, accept: bool) -> Any:
    """The baseline this run compares with: its own key's, else (fallback) the best earlier one."""
    exact = (paths.baseline, read_file(paths.baseline))
    others = []
    if exact[1] is None and fallback:  # the other baselines are read only for the fallback search
        for path in baseline_files(directory):
            data = read_file(path) if path != paths.baseline else None
            if data is not None:
                others.append((path, data))
    return choose(key, exact, others, fallback=fallback, tolerate=accept)


def _with_stop(res: dict[str, Any], record: dict[str, object]) -> dict[str, object]:
    """The history record with the design, the valid trials the verdict used and why the run stopped."""
    record.update(design=res.get("design"), decided_after_trials=res.get("decided_after_trials"), stop=res.get("stop"))
    return record


class ActionModule(ActionBase):
    _supports_check_mode = True
    _supports_async = False
    _secrets: tuple[str, ...] = ()

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        super().run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        args = dict(self._task.args)
        self._secrets = tuple(secrets_of(args.get("url"), args.get("api_key")))
        try:
            result = self._gate(args, task_vars)
        except BaselineError as exc:
            result = {"failed": True, "changed": False, "verdict": "unknown", "reason": "baseline_error"}
            result["msg"] = f"throughput_gate: {exc}"
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return mask(result, list(self._secrets))  # type: ignore[return-value]

    def _module(self, module_args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        """Run the module on the target; its result masked before anything uses it."""
        res = self._execute_module(module_name=MODULE, module_args=module_args, task_vars=task_vars)
        # ansible-core 2.19 turns a failure into an error-summary object holding the unmasked
        # message; keep only its traceback text, so the summary is rebuilt from the masked msg
        summary = res.pop("exception", None)
        traceback = getattr(getattr(summary, "event", None), "formatted_traceback", None)
        if traceback:
            res["exception"] = str(traceback)
        return mask(res, list(self._secrets))  # type: ignore[return-value]

    def _gate(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        given = {k: args.pop(k) for k in list(args) if k in CONTROLLER_ARGUMENT_SPEC}
        if given.get("baseline_dir") is None:
            extra = sorted(k for k, v in given.items() if k != "baseline_dir" and v not in (None, "", False))
            if extra:
                raise BaselineError(f"{', '.join(extra)} need baseline_dir (the controller's baseline directory)")
            return self._module(args, task_vars)

        opts = _controller_options(given, args)
        accept = bool(opts["accept_baseline"])
        key_args = dict(opts["baseline_key"])
        key_args["host"] = key_args.get("host") or task_vars.get("inventory_hostname")
        key = make_key(**key_args)
        directory = opts["baseline_dir"]
        paths = Paths.for_key(directory, key)
        check_mode = bool(self._task.check_mode)

        # everything that can refuse the run does so before any load is sent
        problem = check_writable(directory, create=not check_mode)
        if problem:
            raise BaselineError(f"{problem}; nothing was measured")
        trials = _trials(args)
        choice = _choice(key, paths, directory, fallback=bool(opts["baseline_fallback"]), accept=accept)
        problems = list(choice.problems)
        shape = shape_of(with_defaults(args))  # an option the task leaves out is the module's default
        compare_with = _comparable(choice, shape, accept, problems)
        if trials < MIN_TRIALS and (accept or not compare_with):
            raise BaselineError(
                f"trials={trials}: a baseline needs at least {MIN_TRIALS} trials and there is "
                f"{'a new baseline to accept' if accept else 'no baseline to compare with'} for "
                f"{os.path.basename(paths.baseline)}; run with throughput_gate_trials >= {MIN_TRIALS}"
            )

        # A run that may write the baseline measures at least `trials` valid trials, so that a sequential run
        # that would stop early still has enough to store (a baseline needs >= 5; see docs/gate-baselines.md).
        may_write = choice.exact_digest is None or bool(opts["update_baseline"]) or accept
        raised = _raise_min_trials(args, trials) if may_write and compare_with else None
        res = self._module(dict(args, baseline=compare_with), task_vars)
        used = choice.baseline if compare_with else None
        info: dict[str, Any] = {
            "dir": directory,
            "file": os.path.basename(paths.baseline),
            "history": os.path.basename(paths.history),
            "key": key,
            "source": os.path.basename(used.path) if used else None,
            "source_sglang_version": used.key["sglang_version"] if used else None,
            "fallback": choice.fallback and bool(compare_with),
            "note": choice.note,
            "problems": problems,
            "min_trials_raised_to": raised,
        }
        when = datetime.now(timezone.utc).isoformat()
        # this run's history line: one shape for check mode and a real run
        line = partial(
            run_record, key, res, info, shape, when=when, gpu_health=opts["gpu_health"], cold_start=opts["cold_start"]
        )

        if check_mode:
            info["would_write"] = (
                "only from a passing run of >= 5 trials"
                if may_write
                else "no (a baseline exists; update_baseline is off)"
            )
            res["baseline_plan"] = info
            res["record"] = _with_stop(res, line(accepted=None))
            return res

        accepted = {"by": _who(), "at": when, "reason": opts["accept_reason"]} if accept else None
        write, why = write_decision(
            res, exact_exists=choice.exact_digest is not None, update=bool(opts["update_baseline"]), accept=accept
        )
        new_doc = baseline_document(key, res["valid_trial_values"], shape, when, accepted) if write else None
        if write and accepted and res.get("failed"):
            res["failed"] = False
            res["msg"] = (
                f"baseline ACCEPTED on purpose by {accepted['by']} ({accepted['reason']}): {res.get('msg', '')}"
            )
        record = mask(_with_stop(res, line(accepted=accepted if write else None)), list(self._secrets))
        try:
            done = commit(paths, record, new_doc, expected_digest=choice.exact_digest, accept=accept)  # type: ignore[arg-type]
        except (OSError, BaselineError) as exc:
            res.update(failed=True, msg=f"throughput_gate: measured, but the run could not be recorded: {exc}")
            res["record"] = dict(record, failed=True, msg=res["msg"])  # type: ignore[arg-type]
            return res
        info.update(written=done.written, write_reason=why if done.written else f"{why}; {done.note}")
        res["baseline"] = info
        res["record"] = done.record
        res["changed"] = done.written  # the controller's baseline changed (the history is a log)
        return res
