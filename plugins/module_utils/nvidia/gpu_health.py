# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Health verdicts for the GPUs of one node (stdlib only; runs on the target), for the gpu_health module.

Inputs are what a failing card shows: ``nvidia-smi -q -x`` (parsed by
:func:`nvidia_smi.parse_smi_xml`) and the ``NVRM: Xid`` lines of the kernel log
(:func:`nvidia_smi.parse_xid_lines`). :func:`evaluate` turns them into a verdict per GPU and one for
the node: ``healthy``, ``degraded: <why>`` (serve, but look at it) or ``failed: <why>`` (keep the node
out). Reasons are joined with ``; `` in a fixed order (node first, then GPUs by index; per GPU: Xid,
trouble values, recovery action, row remapping, ECC, retired pages, PCIe link, clocks, power, persistence).
:func:`evaluate` never raises on outside data: output it cannot parse is itself a ``failed`` reason.
The rules and their sources are in docs/gpu-health.md.
"""

from __future__ import annotations

from collections.abc import Callable

from ansible_collections.gpufleet.sglang.plugins.module_utils.nvidia.smi import (
    CLOCK_EVENT_REASONS,
    NvidiaParseError,
    classify_smi_failure,
    parse_smi_xml,
    parse_xid_lines,
    pci_key,
)

HEALTHY, DEGRADED, FAILED = "healthy", "degraded", "failed"
# the levels, best first (their position is their rank and the metric's value, docs/monitoring.md)
LEVELS = (HEALTHY, DEGRADED, FAILED)
_RANK = {level: rank for rank, level in enumerate(LEVELS)}

# NVIDIA's immediate-action "resolution buckets" (Xid catalog) that take a node out of service:
# the GPU must be reset, the node or VM rebooted, or an ECC/NVLink/mechanical workflow followed.
FAILED_BUCKETS = frozenset(
    {
        "RESET_GPU",
        "RESTART_BM",
        "RESTART_VM",
        "WORKFLOW_XID_48",
        "WORKFLOW_NVLINK_ERR",
        "WORKFLOW_NVLINK5_ERR",
        "CHECK_MECHANICALS",
    }
)

# Xid code -> (NVIDIA's mnemonic, immediate-action bucket, what it means in a few words). From NVIDIA's
# Xid catalog (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html) and its machine-readable copy
# in NVIDIA/NVSentinel (xiderrorsmapping.csv); docs/gpu-health.md holds the same table with sources (a unit
# test keeps the two equal). A code not listed is "degraded" with its number only.
XID_CATALOG: dict[int, tuple[str, str, str]] = {
    8: ("ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "RESTART_APP", "GPU stopped processing"),
    13: ("ROBUST_CHANNEL_GR_EXCEPTION", "RESTART_APP", "graphics engine exception"),
    31: ("ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "RESTART_APP", "GPU memory page fault"),
    32: ("ROBUST_CHANNEL_PBDMA_ERROR", "RESTART_APP", "invalid or corrupted push buffer stream"),
    43: ("ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "IGNORE", "GPU stopped processing (channel reset)"),
    45: ("ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "WORKFLOW_XID_45", "preemptive cleanup after earlier errors"),
    46: ("ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "RESET_GPU", "GPU stopped processing (timeout)"),
    48: ("ROBUST_CHANNEL_GPU_ECC_DBE", "WORKFLOW_XID_48", "double bit ECC error"),
    54: ("SILENT_RUNNING_PWR_REDUCED_CLOCKING", "CHECK_MECHANICALS", "clocks reduced for power (auxiliary power)"),
    62: ("PMU_HALT_ERROR", "RESET_GPU", "internal micro-controller halt"),
    63: ("INFOROM_DRAM_RETIREMENT_EVENT", "IGNORE", "row remapping or page retirement recorded"),
    64: ("INFOROM_DRAM_RETIREMENT_FAILURE", "RESET_GPU", "row remapping or page retirement failed"),
    74: ("NVLINK_ERROR", "WORKFLOW_NVLINK_ERR", "NVLink error"),
    79: ("ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "RESTART_BM", "GPU has fallen off the bus"),
    92: ("EXCESSIVE_SBE_INTERRUPTS", "IGNORE", "high single-bit ECC error rate"),
    94: ("ROBUST_CHANNEL_CONTAINED_ERROR", "RESTART_APP", "contained ECC error"),
    95: ("ROBUST_CHANNEL_UNCONTAINED_ERROR", "RESET_GPU", "uncontained ECC error"),
    109: ("ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "RESET_GPU", "context switch timeout"),
    110: ("SEC_FAULT_ERROR", "RESET_GPU", "security fault"),
    119: ("GSP_RPC_TIMEOUT", "RESET_GPU", "GSP RPC timeout"),
    120: ("GSP_ERROR", "RESET_GPU", "GSP error"),
    121: ("C2C_ERROR", "IGNORE", "C2C link error"),
    136: ("ALI_TRAINING_FAIL", "RESET_GPU", "NVLink training failed"),
    140: ("UNRECOVERABLE_ECC_ERROR_ESCAPE", "RESET_GPU", "unrecovered ECC error"),
    143: ("GPU_INIT_ERROR", "RESET_GPU", "GPU initialisation failed"),
    144: ("NVLINK_SAW_ERROR", "WORKFLOW_NVLINK5_ERR", "NVLink error"),
    145: ("NVLINK_RLW_ERROR", "WORKFLOW_NVLINK5_ERR", "NVLink error"),
    146: ("NVLINK_TLW_ERROR", "WORKFLOW_NVLINK5_ERR", "NVLink error"),
    147: ("NVLINK_TREX_ERROR", "WORKFLOW_NVLINK5_ERR", "NVLink error"),
    148: ("NVLINK_NVLPW_CTRL_ERROR", "WORKFLOW_NVLINK5_ERR", "NVLink error"),
    149: ("NVLINK_NETIR_ERROR", "WORKFLOW_NVLINK5_ERR", "NVLink error"),
    150: ("NVLINK_MSE_ERROR", "WORKFLOW_NVLINK5_ERR", "NVLink error"),
    151: ("ROBUST_CHANNEL_KEY_ROTATION_ERROR", "RESTART_VM", "key rotation error"),
    154: ("GPU_RECOVERY_ACTION_CHANGED", "FOLLOW_OTHER_XID", "recovery action changed"),
    155: ("NVLINK_SW_DEFINED_ERROR", "RESET_GPU", "NVLink error"),
    156: ("RESOURCE_RETIREMENT_EVENT", "RESET_GPU", "resource retirement"),
    158: ("GPU_FATAL_TIMEOUT", "RESET_GPU", "fatal timeout"),
    160: ("CHANNEL_RETIREMENT_EVENT", "RESTART_BM", "channel retirement"),
}

# Module option defaults (the module's argument_spec and DOCUMENTATION use these).
DEFAULTS: dict = {
    "busy_utilization_percent": 50,
    "min_power_percent": 45.0,
    "max_volatile_correctable_ecc": 100,
    "degrading_clock_events": ["hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown"],
    "require_persistence_mode": True,
    "pcie_check_idle": False,
    "xid_ignore_codes": [],
    "expected_gpu_count": None,
}
KERNEL_LOG_SOURCES = ("journalctl", "dmesg", "file", "text", "none")
# node: the kernel log is the node's own, an Xid of a GPU nvidia-smi does not list is the node's (it fell
# off the bus); host: the log is the host's (a container's Proxmox host) and carries the Xid lines of every
# GPU on it, so one that nvidia-smi does not list is another guest's, not this node's
KERNEL_LOG_SCOPES = ("node", "host")
# what journalctl prints (on stdout) when it found nothing
JOURNAL_NO_ENTRIES = "-- No entries --"
# journalctl's notice (on stderr, exit 0) to a user who may not read the system journal: its -k output is
# then empty, which must not pass for "no Xid". (That is why the command has no -q: -q hides the notice.)
JOURNAL_HIDDEN_HINT = "not seeing messages from other users and the system"
FAIL_ON = ("none", "degraded", "failed")

Run = Callable[[list[str]], "tuple[int, str, str]"]

__all__ = [
    "DEFAULTS",
    "FAIL_ON",
    "KERNEL_LOG_SCOPES",
    "KERNEL_LOG_SOURCES",
    "LEVELS",
    "XID_CATALOG",
    "GpuHealthError",
    "check_options",
    "collect",
    "evaluate",
    "fails",
    "gpu_reasons",
    "kernel_log_argv",
    "read_kernel_log",
    "read_smi_xml",
    "verdict",
    "xid_level",
]


class GpuHealthError(ValueError):
    """A module option is wrong (the message names it and the fix); never raised for what a GPU reports."""


# --------------------------------------------------------------------------- options


def _percent(options: dict, key: str) -> None:
    value = options[key]
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= 100:
        raise GpuHealthError(f"{key} must be a number from 0 to 100, got {value!r}")


def check_options(options: dict) -> dict:
    """The thresholds of :data:`DEFAULTS` overlaid with ``options`` (module params), checked."""
    merged = {**DEFAULTS, **{key: options[key] for key in DEFAULTS if options.get(key) is not None}}
    _percent(merged, "busy_utilization_percent")
    _percent(merged, "min_power_percent")
    if not isinstance(merged["max_volatile_correctable_ecc"], int) or merged["max_volatile_correctable_ecc"] < 0:
        raise GpuHealthError(
            f"max_volatile_correctable_ecc must be a count >= 0, got {merged['max_volatile_correctable_ecc']!r}"
        )
    unknown = [name for name in merged["degrading_clock_events"] if name not in CLOCK_EVENT_REASONS]
    if unknown:
        raise GpuHealthError(
            f"degrading_clock_events names unknown reason(s) {unknown}; known: {', '.join(CLOCK_EVENT_REASONS)}"
        )
    expected = merged["expected_gpu_count"]
    if expected is not None and (not isinstance(expected, int) or isinstance(expected, bool) or expected < 1):
        raise GpuHealthError(f"expected_gpu_count must be a count >= 1 (or null), got {expected!r}")
    bad_codes = [code for code in merged["xid_ignore_codes"] if not isinstance(code, int) or code < 0]
    if bad_codes:
        raise GpuHealthError(f"xid_ignore_codes must be Xid numbers, got {bad_codes}")
    return merged


def kernel_log_argv(source: str, since: str | None, path: str | None) -> list[str] | None:
    """The command that reads the kernel log (None for ``file`` and ``none``), after checking the options.

    ``journalctl -k`` reads the current boot only; ``since`` narrows it (``--since=``, any time journalctl
    accepts: ``-1h``, ``2026-12-01 10:00``, ``today``). ``dmesg`` is the ring buffer (since boot, or less
    when it wrapped) and takes no ``since``.
    """
    if source not in KERNEL_LOG_SOURCES:
        raise GpuHealthError(f"kernel_log must be one of {', '.join(KERNEL_LOG_SOURCES)}, got {source!r}")
    if source in ("text", "none") and path:
        raise GpuHealthError(f"kernel_log_path is only read with kernel_log=file (kernel_log is {source})")
    if source == "file" and not path:
        raise GpuHealthError("kernel_log=file needs kernel_log_path (a saved journalctl -k or dmesg output)")
    if source != "file" and path:
        raise GpuHealthError(f"kernel_log_path is only read with kernel_log=file (kernel_log is {source})")
    if since is not None:
        if source != "journalctl":
            raise GpuHealthError(f"since applies to kernel_log=journalctl only (kernel_log is {source})")
        if not since.strip() or len(since) > 64 or any(not ch.isprintable() for ch in since):
            raise GpuHealthError(f"since must be a journalctl time of at most 64 printable characters, got {since!r}")
    if source == "journalctl":
        return ["journalctl", "-k", "--no-pager", "-o", "short-iso"] + ([f"--since={since}"] if since else [])
    if source == "dmesg":
        return ["dmesg"]
    return None


# --------------------------------------------------------------------------- rules


def xid_level(code: int) -> str:
    """``failed`` when NVIDIA's immediate action for the Xid takes the node out, else ``degraded``."""
    entry = XID_CATALOG.get(code)
    return FAILED if entry and entry[1] in FAILED_BUCKETS else DEGRADED


def _xid_reasons(events: list[dict], ignore: list[int], where: str = "") -> list[tuple[str, str]]:
    counts: dict[int, int] = {}
    for event in events:
        if event["code"] not in ignore:
            counts[event["code"]] = counts.get(event["code"], 0) + 1
    reasons = []
    for code in sorted(counts):
        words = XID_CATALOG[code][2] if code in XID_CATALOG else "not in the catalog table"
        times = f" x{counts[code]}" if counts[code] > 1 else ""
        reasons.append((xid_level(code), f"xid {code}{times} ({words}){where}"))
    return reasons


def _remap_reasons(rows: dict) -> list[tuple[str, str]]:
    reasons = []
    if rows["failure"]:
        reasons.append((FAILED, "row remapping failed"))
    if rows["pending"]:
        reasons.append((DEGRADED, "row remap pending (reset the GPU to apply it)"))
    exhausted = rows["histogram"].get("none")
    if exhausted:
        reasons.append((DEGRADED, f"no spare rows left in {exhausted} bank(s)"))
    return reasons


def _ecc_reasons(ecc: dict, max_correctable: int) -> list[tuple[str, str]]:
    reasons = []
    if ecc["unrepairable_memory"]:
        reasons.append((FAILED, "unrepairable memory"))
    if ecc["sram_threshold_exceeded"]:
        reasons.append((FAILED, "SRAM ECC error threshold exceeded"))
    volatile = ecc["volatile"]
    uncorrectable = sum(v or 0 for k, v in volatile.items() if "uncorrectable" in k)
    correctable = sum(v or 0 for k, v in volatile.items() if "correctable" in k and "uncorrectable" not in k)
    if uncorrectable:
        reasons.append((FAILED, f"{uncorrectable} uncorrectable ECC error(s) since the driver loaded"))
    if correctable > max_correctable:
        reasons.append(
            (DEGRADED, f"{correctable} correctable ECC errors since the driver loaded (> {max_correctable})")
        )
    for key, words in (("channel_repair_pending", "memory channel"), ("tpc_repair_pending", "TPC")):
        if ecc[key]:
            reasons.append((DEGRADED, f"{words} repair pending (reset the GPU)"))
    if ecc["enabled"] is False:
        reasons.append((DEGRADED, "ECC disabled"))
    return reasons


def _retired_reasons(pages: dict) -> list[tuple[str, str]]:
    if pages["pending_retirement"] or pages["pending_blacklist"]:
        return [(DEGRADED, "page retirement pending (reset the GPU)")]
    return []


def _busy(gpu: dict, options: dict) -> bool:
    util = gpu["utilization_gpu"]
    return util is not None and util >= options["busy_utilization_percent"] and not gpu["clock_events"]["gpu_idle"]


def _pcie_reasons(gpu: dict, options: dict) -> list[tuple[str, str]]:
    link = gpu["pcie"]
    if None in (link["gen_current"], link["gen_max"], link["width_current"], link["width_max"]):
        return []
    if not (_busy(gpu, options) or options["pcie_check_idle"]):
        return []
    if link["gen_current"] < link["gen_max"] or link["width_current"] < link["width_max"]:
        return [
            (
                DEGRADED,
                f"PCIe link Gen{link['gen_current']} x{link['width_current']} "
                f"(max Gen{link['gen_max']} x{link['width_max']})",
            )
        ]
    return []


def _clock_reasons(gpu: dict, options: dict) -> list[tuple[str, str]]:
    held = [
        name for name in CLOCK_EVENT_REASONS if gpu["clock_events"][name] and name in options["degrading_clock_events"]
    ]
    return [(DEGRADED, f"clocks held down: {', '.join(held)}")] if held else []


def _power_reasons(gpu: dict, options: dict) -> list[tuple[str, str]]:
    power = gpu["power"]
    if not _busy(gpu, options) or not power["draw_w"] or not power["limit_w"]:
        return []
    percent = 100.0 * power["draw_w"] / power["limit_w"]
    if percent < options["min_power_percent"]:
        return [
            (
                DEGRADED,
                f"under power: {power['draw_w']:.0f} W of {power['limit_w']:.0f} W ({percent:.0f}%) "
                f"at {gpu['utilization_gpu']}% utilisation",
            )
        ]
    return []


def gpu_reasons(gpu: dict, events: list[dict], options: dict) -> list[tuple[str, str]]:
    """(level, reason) pairs for one parsed GPU and its Xid events, in the documented order."""
    reasons = _xid_reasons(events, options["xid_ignore_codes"])
    if gpu["trouble"]:
        reasons.append((FAILED, f"nvidia-smi reads {', '.join(gpu['trouble'])}"))
    if gpu["recovery_action"] not in (None, "None"):
        reasons.append((FAILED, f"recovery action {gpu['recovery_action']}"))
    reasons += _remap_reasons(gpu["remapped_rows"])
    reasons += _ecc_reasons(gpu["ecc"], options["max_volatile_correctable_ecc"])
    reasons += _retired_reasons(gpu["retired_pages"])
    reasons += _pcie_reasons(gpu, options)
    reasons += _clock_reasons(gpu, options)
    reasons += _power_reasons(gpu, options)
    if options["require_persistence_mode"] and gpu["persistence_mode"] is False:
        reasons.append((DEGRADED, "persistence mode off"))
    return reasons


def verdict(reasons: list[tuple[str, str]]) -> str:
    """``healthy``, or the worst level followed by the reasons of that level joined with ``; ``."""
    if not reasons:
        return HEALTHY
    worst = _level(reasons)
    return f"{worst}: " + "; ".join(pair[1] for pair in reasons if pair[0] == worst)


def fails(level: str, fail_on: str) -> bool:
    """Whether a node at ``level`` fails the task under ``fail_on`` (``none``, ``degraded``, ``failed``)."""
    return fail_on != "none" and _RANK[level] >= _RANK[fail_on]


def _level(reasons: list[tuple[str, str]]) -> str:
    return max((pair[0] for pair in reasons), key=_RANK.__getitem__, default=HEALTHY)


# --------------------------------------------------------------------------- evaluate


def _smi_reasons(smi_xml: str | None, smi_problem: str | None) -> tuple[dict | None, list[tuple[str, str]]]:
    if smi_problem is not None:
        return None, [(FAILED, smi_problem)]
    try:
        return parse_smi_xml(smi_xml or ""), []
    except NvidiaParseError as exc:
        return None, [(FAILED, f"nvidia-smi -q -x output not understood: {exc}")]


def evaluate(
    smi_xml: str | None,
    kernel_log: str | None,
    options: dict,
    *,
    smi_problem: str | None = None,
    kernel_problem: str | None = None,
    kernel_scope: str = "node",
) -> dict:
    """The module's result keys (``verdict``, ``level``, ``reasons``, ``gpus``, ``gpu_count``, ``xid_events``,
    ``xid_unparsed``) from nvidia-smi's XML and the kernel log text (None: not read, with ``*_problem`` saying
    why). ``options`` are checked thresholds (:func:`check_options`). Never raises on the two texts."""
    parsed, node = _smi_reasons(smi_xml, smi_problem)
    xids = parse_xid_lines(kernel_log) if kernel_log is not None else {"events": [], "unparsed": []}
    if kernel_problem is not None:
        node.append((DEGRADED, f"kernel log not read: {kernel_problem}"))
    gpus = parsed["gpus"] if parsed else []
    expected = options["expected_gpu_count"]
    if parsed is not None and expected is not None and len(gpus) != expected:
        level = FAILED if len(gpus) < expected else DEGRADED
        node.append((level, f"{len(gpus)} of {expected} expected GPUs present"))
    keys = {pci_key(gpu["pci_bus_id"]): gpu["index"] for gpu in gpus}
    strangers = [event for event in xids["events"] if event["pci"] not in keys]
    # a host's log: the Xid lines of GPUs nvidia-smi does not list are other guests' (a GPU of this node
    # that fell off the bus is missing against expected_gpu_count instead)
    elsewhere = len(strangers) if kernel_scope == "host" else 0
    for pci in sorted({event["pci"] for event in strangers} if kernel_scope == "node" else ()):
        where = f" on {pci}, which nvidia-smi does not list"
        node += _xid_reasons([e for e in strangers if e["pci"] == pci], options["xid_ignore_codes"], where)
    if xids["unparsed"]:
        node.append((DEGRADED, f"{len(xids['unparsed'])} Xid line(s) in the kernel log not understood"))
    records = []
    for gpu in gpus:
        own = [event for event in xids["events"] if keys.get(event["pci"]) == gpu["index"]]
        reasons = gpu_reasons(gpu, own, options)
        records.append(
            {
                **gpu,
                "verdict": verdict(reasons),
                "level": _level(reasons),
                "reasons": [pair[1] for pair in reasons],
                "busy": _busy(gpu, options),
            }
        )
        node += [(level, f"gpu {gpu['index']}: {reason}") for level, reason in reasons]
    return {
        "verdict": verdict(node),
        "level": _level(node),
        "reasons": [pair[1] for pair in node],
        "gpu_count": len(gpus),
        "gpus": records,
        "driver_version": parsed["driver_version"] if parsed else None,
        "xid_events": [event for event in xids["events"] if kernel_scope == "node" or event["pci"] in keys],
        "xid_unparsed": xids["unparsed"],
        "xid_other_gpus": elsewhere,
    }


# --------------------------------------------------------------------------- collect (module side)


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


def read_smi_xml(smi: str | None, name: str, run: Run) -> tuple[str | None, str | None]:
    """(``nvidia-smi -q -x`` output, None) or (None, why it could not be had) for a resolved ``smi``."""
    if smi is None:
        return None, f"nvidia-smi not found at {name}"
    rc, out, err = run([smi, "-q", "-x"])
    if rc != 0:
        kind = classify_smi_failure(rc, out + err).replace("_", " ")
        return None, f"nvidia-smi -q -x failed ({kind}, exit {rc}): {_short(out + err)}"
    return out, None


def _no_kernel_messages(out: str) -> bool:
    """Whether journalctl's output holds no message at all (empty, or only its "no entries" line)."""
    return all(not line.strip() or line.strip() == JOURNAL_NO_ENTRIES for line in out.splitlines())


def _journal_problem(argv: list[str], out: str, err: str) -> str | None:
    """Why a journalctl -k run that exited 0 cannot stand for "no Xid", or None."""
    if JOURNAL_HIDDEN_HINT in err:
        return (
            "journalctl cannot see the system journal as this user (run the task with become, or add the user "
            "to the systemd-journal or adm group)"
        )
    # The whole boot (no --since) always has kernel messages where the kernel's log reaches the journal. A
    # container's journal gets none (no /dev/kmsg), so an empty one must not pass for "no Xid".
    if not any(a.startswith("--since=") for a in argv) and _no_kernel_messages(out):
        return (
            "journalctl -k shows no kernel message of this boot: a container's journal gets none; read the kernel "
            "log of its host (kernel_log: text with kernel_log_scope: host; role sglang_server: "
            "sglang_server_health_kernel_log_host)"
        )
    return None


def read_kernel_log(
    argv: list[str] | None, source: str, path: str | None, run: Run, read_file: Callable[[str], str]
) -> tuple[str | None, str | None]:
    """(kernel log text, None), or (None, why not); (None, None) with ``kernel_log: none``."""
    if source == "none":
        return None, None
    if argv is None:
        try:
            return read_file(path or ""), None
        except OSError as exc:
            return None, f"cannot read {path}: {exc.strerror}"
    rc, out, err = run(argv)
    if rc != 0:
        return None, f"{' '.join(argv)} exited {rc}: {_short(err or out)}"
    problem = _journal_problem(argv, out, err) if argv[0] == "journalctl" else None
    return (None, problem) if problem else (out, None)


def collect(params: dict, which: Callable[[str], str | None], run: Run, read_file: Callable[[str], str]) -> dict:
    """Everything the module returns, for its ``params``; raises :class:`GpuHealthError` for bad options."""
    options = check_options(params)
    argv = kernel_log_argv(params["kernel_log"], params.get("since"), params.get("kernel_log_path"))
    if params.get("fail_on", "none") not in FAIL_ON:
        raise GpuHealthError(f"fail_on must be one of {', '.join(FAIL_ON)}, got {params.get('fail_on')!r}")
    name = params["nvidia_smi_path"]
    smi_xml, smi_problem = read_smi_xml(which(name), name, run)
    scope = params.get("kernel_log_scope") or "node"
    if scope not in KERNEL_LOG_SCOPES:
        raise GpuHealthError(f"kernel_log_scope must be one of {', '.join(KERNEL_LOG_SCOPES)}, got {scope!r}")
    given = (params.get("kernel_log_text"), params.get("kernel_log_problem"))
    if params["kernel_log"] != "text" and any(value is not None for value in given):
        raise GpuHealthError("kernel_log_text and kernel_log_problem are only read with kernel_log=text")
    if params["kernel_log"] == "text":
        kernel_text, kernel_problem = (None, given[1]) if given[1] else (given[0] or "", None)
    else:
        kernel_text, kernel_problem = read_kernel_log(
            argv, params["kernel_log"], params.get("kernel_log_path"), run, read_file
        )
    result = evaluate(
        smi_xml, kernel_text, options, smi_problem=smi_problem, kernel_problem=kernel_problem, kernel_scope=scope
    )
    result["kernel_log"] = {
        "source": params["kernel_log"],
        "command": argv,
        "since": params.get("since"),
        "scope": scope,
    }
    result["thresholds"] = options
    return result
