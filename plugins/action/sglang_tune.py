# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller side of a sweep of SGLang server options (playbooks/tune.yml).

The search (module_utils/tune/search.py) proposes settings; for each one this plugin renders the
argv and options file as role sglang_server does (module_utils sglang/args.py, sglang/server_config.py),
has the node check it with SGLang's own parser (module sglang_tune_switch ``check``: a refusal is
recorded, nothing starts), switches the node to it (``switch``: journal first), waits for readiness
(module sglang_server_ready: a crash, an out-of-memory exit or a missed deadline ends the wait and
is recorded with the journal's tail) and measures it with the throughput gate's module (same shape,
same trials). Whatever happens after ``begin``, ``restore`` runs before the task returns; a sweep
cut short (Ctrl-C, lost controller) leaves the journal, and the next tune.yml restores first.

Results: the candidate table, the winner, whether it beats the original significantly; with
``sweep_dir`` the sweep is recorded next to the gate's baselines (module_utils/tune/profile.py) and,
with ``apply`` and a significant winner, the tuned profile is written there.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.sglang.plugins.module_utils.common.secret_mask import mask, secrets_of
from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.baseline import make_key
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.args import (
    SGLangArgsError,
    merge_profiles,
    render_argv,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.paths import (
    DEPLOYMENTS_DIR,
    RELEASE_LINK,
    TUNE_JOURNAL,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.server_config import (
    ServerConfigError,
    render_config,
    supports_config,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.server_ready import wait_options
from ansible_collections.gpufleet.sglang.plugins.module_utils.tune.profile import write_sweep, write_tuned
from ansible_collections.gpufleet.sglang.plugins.module_utils.tune.search import (
    MEASURED,
    CoordinateSearch,
    TuneError,
    describe,
    table,
)

ARGUMENT_SPEC: dict[str, Any] = {
    "space": {"type": "dict", "required": True},
    "base_flags": {"type": "dict", "required": True},
    "budget_s": {"type": "float", "required": True},
    "min_gain": {"type": "float", "default": 0.05},
    "alpha": {"type": "float", "default": 0.05},
    "max_passes": {"type": "int", "default": 2},
    "apply": {"type": "bool", "default": False},
    "server": {
        "type": "dict",
        "required": True,
        "options": {
            "version": {"type": "str", "required": True},
            "model_path": {"type": "str", "required": True},
            "host": {"type": "str", "default": "127.0.0.1"},
            "port": {"type": "int", "default": 30000},
            "api_key": {"type": "str", "default": "", "no_log": True},
            "service": {"type": "str", "default": "sglang-server"},
            "config_file": {"type": "str", "required": True},
            "validate": {"type": "bool", "default": True},
            "validate_python": {"type": "str", "default": ""},
            "validate_env": {"type": "dict", "default": {}},
        },
    },
    # passed on to module sglang_server_ready: its options, with a sweep's defaults
    "ready": {
        "type": "dict",
        "required": True,
        "options": wait_options(timeout_s=1800, max_restarts=1, journal_lines=20),
    },
    "gate": {"type": "dict", "required": True},
    # node paths: passed on to module sglang_tune_switch, which takes them as type path (expanded
    # on the node, not here)
    "journal": {"type": "str", "default": TUNE_JOURNAL},
    "deployments_dir": {"type": "str", "default": DEPLOYMENTS_DIR},
    "release_link": {"type": "str", "default": RELEASE_LINK},
    "sweep_dir": {"type": "str", "default": ""},
    "key": {"type": "dict", "default": {}},
}
SWITCH = "gpufleet.sglang.sglang_tune_switch"
ARGV_CHECK = "gpufleet.sglang.sglang_argv_check"
READY = "gpufleet.sglang.sglang_server_ready"
GATE = "gpufleet.sglang.throughput_gate"
STOP = "ansible.builtin.systemd_service"
OOM_MARKERS = ("out of memory", "outofmemoryerror", "cuda error: out of memory")


def candidate_flags(base: dict[str, Any], setting: dict[str, Any]) -> dict[str, Any]:
    """The candidate's flags: the setting over the node's flags; ``false``/``null`` remove a flag."""
    return merge_profiles(base, {k: (None if v is False else v) for k, v in setting.items()})


def candidate_config(server: dict[str, Any], flags: dict[str, Any]) -> str:
    """The options file of a candidate, rendered as role sglang_server does for the server's version
    (raises SGLangArgsError or ServerConfigError for flags that version does not take)."""
    base = {"model_path": server["model_path"], "host": server["host"], "port": server["port"]}
    argv = render_argv({**base, **flags}, server["version"])
    return render_config(argv, server["version"], server["api_key"])


def failure_status(ready: dict[str, Any]) -> str:
    """crashed, oom or not_ready, from a failed sglang_server_ready result."""
    text = "\n".join(str(line) for line in ready.get("journal") or []).lower()
    if any(marker in text for marker in OOM_MARKERS):
        return "oom"
    return "not_ready" if ready.get("verdict") == "timeout" else "crashed"


def power_pct(gate: dict[str, Any]) -> float | None:
    gpus = (gate.get("telemetry") or {}).get("gpus") or []
    values = [g["avg_power_pct_of_limit"] for g in gpus if g.get("avg_power_pct_of_limit") is not None]
    return round(sum(values) / len(values), 1) if values else None


@dataclass(frozen=True)
class Candidate:
    """One setting of the sweep as it is evaluated: the setting, its name in the switch journal (the flags
    where it differs from the search's start) and whether it is the original, which the node runs already."""

    setting: dict[str, Any]
    name: str
    original: bool

    @classmethod
    def of(cls, search: CoordinateSearch, setting: dict[str, Any]) -> Candidate:
        """``setting``, the search's next: the original when the search has recorded nothing yet."""
        return cls(setting, describe(setting, search.start), original=not search.entries)


class ActionModule(ActionBase):
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        super().run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        checked = ArgumentSpecValidator(ARGUMENT_SPEC).validate(dict(self._task.args))
        if checked.error_messages:
            return {"failed": True, "msg": "sglang_tune: " + "; ".join(checked.error_messages)}
        args = checked.validated_parameters
        self._secrets = sorted(
            set(secrets_of(args["gate"].get("url"), args["gate"].get("api_key")))
            | set(secrets_of(None, args["server"]["api_key"])),
            key=len,
            reverse=True,
        )
        try:
            result = self._sweep(args, task_vars)
        except (TuneError, SGLangArgsError, ServerConfigError) as exc:
            result = {"failed": True, "msg": f"sglang_tune: {exc}"}
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return mask(result, list(self._secrets))  # type: ignore[return-value]

    def _module(self, name: str, module_args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        res = self._execute_module(module_name=name, module_args=module_args, task_vars=task_vars)
        res.pop("exception", None)
        return mask(res, list(self._secrets))  # type: ignore[return-value]

    def _sweep(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        server = args["server"]
        if not supports_config(server["version"]):
            raise TuneError(f"SGLang {server['version']} has no --config; tune.yml needs SGLang >= 0.5.3")
        search = CoordinateSearch(
            args["space"],
            args["base_flags"],
            budget_s=args["budget_s"],
            min_gain=args["min_gain"],
            alpha=args["alpha"],
            max_passes=args["max_passes"],
        )
        if self._task.check_mode:
            return {"changed": False, "msg": "check mode: nothing switched", "start": search.start}
        where = {k: args[k] for k in ("journal", "deployments_dir", "release_link")}
        begun = self._module(SWITCH, dict(where, state="begin", service=server["service"]), task_vars)
        if begun.get("failed"):
            return {"failed": True, "msg": begun.get("msg"), "changed": False}
        started = time.monotonic()
        restore: dict[str, Any] = {}
        try:
            while (setting := search.next(time.monotonic() - started)) is not None:
                t0 = time.monotonic()
                outcome = self._evaluate(args, Candidate.of(search, setting), task_vars)
                outcome["elapsed_s"] = time.monotonic() - t0
                search.record(setting, outcome)
        finally:
            restore = self._module(SWITCH, dict(where, state="restore", service=server["service"]), task_vars)
        result = search.finish()
        result["wall_s"] = round(time.monotonic() - started, 1)
        result["budget_s"] = args["budget_s"]
        result["table"] = table(result)
        result["restore"] = {k: restore.get(k) for k in ("restored", "original", "files_changed", "msg", "failed")}
        if restore.get("failed"):
            result.update(
                failed=True, changed=True, msg=f"sglang_tune: the node could not be restored: {restore.get('msg')}"
            )
            return result
        ready = self._module(READY, self._ready_args(args), task_vars)
        result["restored_ready"] = bool(ready.get("ready"))
        if not ready.get("ready"):
            result.update(
                failed=True,
                changed=True,
                msg=f"sglang_tune: restored, but the original deployment is not ready: {ready.get('msg')}",
            )
            return result
        result["changed"] = True
        result["apply"] = bool(args["apply"]) and bool(result["beats_original"])
        key = {}
        if args["sweep_dir"]:
            key = make_key(**{**args["key"], "host": args["key"].get("host") or task_vars.get("inventory_hostname")})
            when = datetime.now(timezone.utc).isoformat()
            sweep = {k: v for k, v in result.items() if k not in ("table",)}
            result["sweep_file"] = write_sweep(args["sweep_dir"], key, dict(sweep, key=key, time=when))
            if result["apply"]:
                best = result["best"]
                flags = {k: (None if v is False else v) for k, v in best["setting"].items()}
                result["tuned_file"] = write_tuned(
                    args["sweep_dir"],
                    key,
                    flags,
                    {
                        "time": when,
                        "median_output_tokens_per_s": best["median_output_tokens_per_s"],
                        "original_median": (result["original"] or {}).get("median_output_tokens_per_s"),
                        "p_vs_original": result["p_best_vs_original"],
                        "flags": best["flags"],
                    },
                )
        best = result["best"] or {}
        result["msg"] = (
            f"sweep of {result['evaluated']} candidate(s) ({result['not_measured']} not measured) "
            f"in {result['wall_s']} s "
            f"(budget {args['budget_s']:g} s, {result['stopped']}): best {best.get('flags')} at "
            f"{best.get('median_output_tokens_per_s')} tok/s; "
            + ("beats the original significantly" if result["beats_original"] else "the original stays")
            + ("; written as the tuned profile" if result.get("tuned_file") else "")
            + "; the node runs its original deployment"
        )
        return result

    def _ready_args(self, args: dict[str, Any]) -> dict[str, Any]:
        return {
            "service": args["server"]["service"],
            **args["ready"],  # validated: exactly the options of wait_options
            "redact": [args["server"]["api_key"]] if args["server"]["api_key"] else [],
        }

    def _evaluate(self, args: dict[str, Any], candidate: Candidate, task_vars: dict[str, Any]) -> dict[str, Any]:
        if not candidate.original:  # the original runs already, measured as it is
            failure = self._start_candidate(args, candidate, task_vars)
            if failure is not None:
                return failure
        return self._measure(args, task_vars)

    def _start_candidate(
        self, args: dict[str, Any], candidate: Candidate, task_vars: dict[str, Any]
    ) -> dict[str, Any] | None:
        """Render, check, switch to and wait for a candidate; its outcome when it does not get ready."""
        server = args["server"]
        flags = candidate_flags(args["base_flags"], candidate.setting)
        try:
            text = candidate_config(server, flags)
        except (SGLangArgsError, ServerConfigError) as exc:
            return {"status": "refused", "reason": str(exc)}
        if server["validate"]:
            refused = self._check_candidate(server, text, task_vars)
            if refused is not None:
                return refused
        switched = self._module(
            SWITCH,
            {
                "state": "switch",
                "journal": args["journal"],
                "service": server["service"],
                "config_file": server["config_file"],
                "config_text": text,
                "candidate": candidate.name,
            },
            task_vars,
        )
        if switched.get("failed"):
            return {"status": "error", "reason": str(switched.get("msg"))}
        return self._wait_candidate(args, task_vars)

    def _check_candidate(self, server: dict[str, Any], text: str, task_vars: dict[str, Any]) -> dict[str, Any] | None:
        """SGLang's parser on the node reads the options file (module sglang_argv_check, as role
        sglang_server checks its own); the outcome when it refuses (or cannot check)."""
        checked = self._module(
            ARGV_CHECK,
            {"python": server["validate_python"], "env": server["validate_env"], "config_text": text},
            task_vars,
        )
        if checked.get("failed"):
            return {"status": "error", "reason": str(checked.get("msg"))}
        if not checked.get("ok"):
            return {"status": "refused", "reason": f"SGLang's parser: {checked.get('error')}"}
        return None

    def _wait_candidate(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any] | None:
        """Wait for the switched-to candidate; stop it and return its outcome when it does not get ready."""
        ready = self._module(READY, self._ready_args(args), task_vars)
        if ready.get("ready"):
            return None
        # a crash-looping or hung candidate stops here, not in the background of the next one
        self._module(STOP, {"name": args["server"]["service"], "state": "stopped"}, task_vars)
        return {
            "status": failure_status(ready),
            "reason": f"{ready.get('verdict', 'error')}: {ready.get('reason') or ready.get('msg')}",
            "journal": list(ready.get("journal") or [])[-args["ready"]["journal_lines"] :],
        }

    def _measure(self, args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
        """The gate's module on what the node runs now: the candidate's trials, or why there are none."""
        gate = self._module(GATE, dict(args["gate"], baseline=[], fail_on_unknown=False), task_vars)
        trials = gate.get("valid_trial_values") or []
        if gate.get("failed") or not trials:
            return {
                "status": "invalid",
                "reason": str(gate.get("msg", "no valid trials"))[:500],
                "power_pct": power_pct(gate),
            }
        return {"status": MEASURED, "trials": trials, "power_pct": power_pct(gate)}
