# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The throughput gate's options, their types and defaults: written here only (standard library and
ansible.module_utils only).

- the module validates its task with :data:`ARGUMENT_SPEC` (its DOCUMENTATION is checked against it
  by ansible-test sanity);
- ``GateParams`` (``gate/runner.py``) takes every default from :data:`GATE_ARGUMENT_SPEC`;
- the action plugin reads an option the task leaves out with :func:`with_defaults`;
- the role passes an option it does not compute as ``default(omit)``, and its
  ``meta/argument_specs.yml`` states the same default (``tools/role_docs`` checks that).

The module on the target bundles this file (AnsiballZ takes every module_utils a module imports,
transitively), so it imports no controller-side code: the baseline store (``gate/baseline.py``)
imports from here, never the other way round.
"""

from __future__ import annotations

import copy
from typing import Any

from ansible_collections.gpufleet.sglang.plugins.module_utils.nvidia.gpu_health import LEVELS as HEALTH_LEVELS
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang.server_ready import READY_PATH_BEFORE

# Options of the module on the target (GateParams has one field per option).
GATE_ARGUMENT_SPEC: dict[str, dict[str, object]] = {
    "url": {"type": "str", "default": "http://127.0.0.1:30000"},
    "api": {"type": "str", "choices": ["native", "openai"], "default": "native"},
    "model": {"type": "str", "default": ""},
    "api_key": {"type": "str", "no_log": True},
    "concurrency": {"type": "int", "default": 64},
    "requests_per_trial": {"type": "int", "default": 256},
    "input_len": {"type": "int", "default": 1024},
    "output_len": {"type": "int", "default": 256},
    "warmup_requests": {"type": "int", "default": 64},
    "trials": {"type": "int", "default": 5},
    "baseline": {"type": "list", "elements": "float", "default": []},
    "tolerance": {"type": "float", "default": 0.10},
    "alpha": {"type": "float", "default": 0.05},
    "design": {"type": "str", "choices": ["sequential", "fixed"], "default": "sequential"},
    "min_trials": {"type": "int", "default": 3},
    "max_trials": {"type": "int", "default": 10},
    "beta": {"type": "float", "default": 0.005},
    "margin": {"type": "float", "default": 0.05},
    "min_output_tokens_per_s": {"type": "float", "default": 0, "no_log": False},
    # the readiness path of a server older than sglang_server_ready.READY_SINCE (the role passes the
    # path of the server's own version)
    "ready_path": {"type": "str", "default": READY_PATH_BEFORE},
    "ready_timeout": {"type": "float", "default": 1800},
    "request_timeout": {"type": "float", "default": 300},
    "telemetry": {"type": "bool", "default": True},
    "nvidia_smi_path": {"type": "str", "default": "nvidia-smi"},
    "telemetry_interval_ms": {"type": "int", "default": 200},
    "max_invalid_trials": {"type": "int"},
    "fail_on_unknown": {"type": "bool", "default": True},
}

# the model revision of a server that does not load a pinned snapshot from the model store
UNPINNED = "unpinned"

# Controller-side options of the throughput_gate action; the module documents them and the
# action removes them before the module runs on the target.
CONTROLLER_ARGUMENT_SPEC: dict[str, dict[str, object]] = {
    "baseline_dir": {"type": "path"},
    "baseline_key": {
        "type": "dict",
        "no_log": False,  # a key of a baseline, not a secret
        "options": {
            "host": {"type": "str"},
            "model": {"type": "str", "required": True},
            "model_revision": {"type": "str", "default": UNPINNED},
            "profile": {"type": "str", "required": True},
            "sglang_version": {"type": "str", "required": True},
            "gpu_model": {"type": "str", "required": True},
        },
    },
    "baseline_fallback": {"type": "bool", "default": True},
    "update_baseline": {"type": "bool", "default": False},
    "accept_baseline": {"type": "bool", "default": False},
    "accept_reason": {"type": "str", "default": ""},
    # the node's GPU health when the gate ran (role sglang_server, entry point health): kept in the
    # record (the fleet report shows it) and at the end of the summary row
    "gpu_health": {
        "type": "dict",
        "options": {
            "level": {"type": "str", "choices": list(HEALTH_LEVELS), "required": True},
            "verdict": {"type": "str", "required": True},
        },
    },
    # the server's start this run saw (module_utils/sglang/startup_metrics.py check_cold_start checks it): kept in
    # the record (the fleet report shows it beside the throughput)
    "cold_start": {"type": "dict", "no_log": False},
}


# The whole task: controller-side options (the action plugin handles and removes them) are in the
# spec so that one DOCUMENTATION describes the whole task.
ARGUMENT_SPEC: dict[str, dict[str, object]] = {**GATE_ARGUMENT_SPEC, **CONTROLLER_ARGUMENT_SPEC}

_COERCE = {"int": int, "float": float, "str": str, "bool": bool}


def default(name: str) -> Any:
    """The default of module option ``name`` as the module sees it (of the option's type), or None."""
    spec = GATE_ARGUMENT_SPEC[name]
    value = copy.deepcopy(spec.get("default"))
    if value is None:
        return None
    coerce = _COERCE.get(str(spec.get("type")))
    return coerce(value) if coerce else value


def with_defaults(args: dict[str, object]) -> dict[str, object]:
    """The module options of a task: what it gives, and the default of each option it leaves out."""
    merged = {name: default(name) for name in GATE_ARGUMENT_SPEC}
    merged.update({k: v for k, v in args.items() if v is not None})
    return merged
