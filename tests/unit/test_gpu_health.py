# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""gpu_health: the nvidia-smi -q -x and Xid parsers, the verdict rules, the module run as Ansible runs it.

Inputs are the real H200 capture (tests/unit/fixtures/nvidia/h200-580/nvidia-smi-q.xml), the SM120 fault
variants built from it (tests/unit/fixtures/nvidia/rtxpro6000-health/, build.py) and kernel logs in the
real Xid formats (tests/unit/fixtures/nvidia/kernel-log/)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lib.module import documented_options
from lib.nvidia import FIX, LOGS, PROFILES, STANDIN, VARIANTS, module_args, read, run_gpu_health, run_standin
from lib.playbook import REPO

from ansible_collections.gpufleet.sglang.plugins.module_utils.nvidia.gpu_health import (
    DEFAULTS,
    XID_CATALOG,
    GpuHealthError,
    check_options,
    collect,
    evaluate,
    fails,
    gpu_reasons,
    kernel_log_argv,
    read_kernel_log,
    read_smi_xml,
    xid_level,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.nvidia.smi import (
    NvidiaParseError,
    parse_query_typed,
    parse_smi_xml,
    parse_xid_lines,
    pci_key,
)
from ansible_collections.gpufleet.sglang.plugins.modules import gpu_health as module

H200_XML = FIX / "h200-580/nvidia-smi-q.xml"
LEVELS = ("healthy", "degraded", "failed")


def load_build():
    spec = importlib.util.spec_from_file_location("rtxpro6000_health_build", VARIANTS / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BUILD = load_build()


def h200(**elements: str) -> str:
    """The real H200 XML with some element texts changed (paths as in build.set_text)."""
    text = read(H200_XML)
    for path, value in elements.items():
        text = BUILD.set_text(text, path.replace("__", "/"), value)
    return text


def options(**overrides) -> dict:
    return check_options(overrides)


# --------------------------------------------------------------------------- the XML parser on the real capture


def test_parse_real_h200_xml():
    parsed = parse_smi_xml(read(H200_XML))
    assert (parsed["driver_version"], parsed["cuda_version"], parsed["attached_gpus"]) == ("580.159.04", "13.0", 1)
    (gpu,) = parsed["gpus"]
    assert (gpu["index"], gpu["pci_bus_id"], gpu["name"]) == (0, "00000000:00:06.0", "NVIDIA H200")
    assert gpu["persistence_mode"] is True
    assert gpu["recovery_action"] == "None"
    # idle (gpu_idle active, 0 %) and still at Gen5 x16 = max: this H200 did not train its link down at idle
    assert gpu["utilization_gpu"] == 0
    assert gpu["clock_events"]["gpu_idle"] is True
    assert gpu["pcie"] == {"gen_current": 5, "gen_max": 5, "width_current": 16, "width_max": 16, "replay_counter": 0}
    assert gpu["power"]["draw_w"] == 122.25
    assert gpu["power"]["limit_w"] == 700.0
    assert gpu["ecc"]["enabled"] is True
    assert gpu["ecc"]["volatile"]["dram_uncorrectable"] == 0
    assert gpu["remapped_rows"]["histogram"] == {"max": 3072, "high": 0, "partial": 0, "low": 0, "none": 0}
    assert gpu["retired_pages"] == {
        "single_bit": None,
        "double_bit": None,
        "pending_blacklist": None,
        "pending_retirement": None,
    }


def test_real_h200_is_healthy_even_when_idle_links_are_checked():
    for opts in (options(), options(pcie_check_idle=True, expected_gpu_count=1)):
        result = evaluate(read(H200_XML), read(LOGS / "journal-clean.txt"), opts)
        assert result["verdict"] == "healthy", result["reasons"]
        assert result["gpus"][0]["verdict"] == "healthy"


HEALTH_FIELDS = (
    "index",
    "pci.bus_id",
    "pcie.link.gen.current",
    "pcie.link.gen.max",
    "pcie.link.width.current",
    "pcie.link.width.max",
    "utilization.gpu",
    "power.draw",
    "power.limit",
    "clocks_event_reasons.active",
    "persistence_mode",
    "ecc.errors.uncorrected.volatile.total",
    "remapped_rows.pending",
    "remapped_rows.failure",
)


@pytest.mark.parametrize(("xml", "csv"), [("load", "load"), ("idle-after-load", "idle")])
def test_xml_agrees_with_the_query_csv_of_the_same_moment(xml, csv):
    """Real captures on an H200: the XML parse and nvidia_smi's CSV parser read the same link, load and flags."""
    (gpu,) = parse_smi_xml(read(FIX / f"h200-580/nvidia-smi-q-{xml}.xml"))["gpus"]
    (row,) = parse_query_typed(read(FIX / f"h200-580/query-health-{csv}.csv"), HEALTH_FIELDS)
    assert pci_key(gpu["pci_bus_id"]) == pci_key(row["pci.bus_id"])
    link = gpu["pcie"]
    assert (link["gen_current"], link["gen_max"], link["width_current"], link["width_max"]) == (
        row["pcie.link.gen.current"],
        row["pcie.link.gen.max"],
        row["pcie.link.width.current"],
        row["pcie.link.width.max"],
    )
    assert gpu["utilization_gpu"] == row["utilization.gpu"]
    assert gpu["power"]["limit_w"] == row["power.limit"]
    assert gpu["persistence_mode"] is row["persistence_mode"]
    mask = sum(bit for name, bit in BUILD.REASON_BITS.items() if gpu["clock_events"][name])
    assert mask == row["clocks_event_reasons.active"]
    assert (row["remapped_rows.pending"], row["remapped_rows.failure"]) == ("No", "No")


def test_real_h200_under_load_is_busy_and_healthy():
    """The real load capture: busy (99 %, gpu_idle off), so link and power are judged, and pass."""
    load = read(FIX / "h200-580/nvidia-smi-q-load.xml")
    driver_lines = read(FIX / "h200-580/dmesg-nvidia.txt")
    result = evaluate(load, driver_lines, options(expected_gpu_count=1))
    assert result["verdict"] == "healthy"
    assert result["xid_events"] == []
    assert result["gpus"][0]["clock_events"]["sw_power_cap"] is True
    strict = evaluate(load, driver_lines, options(min_power_percent=99.5))
    assert strict["verdict"] == "degraded: gpu 0: under power: 692 W of 700 W (99%) at 99% utilisation"
    idle = evaluate(read(FIX / "h200-580/nvidia-smi-q-idle-after-load.xml"), None, options(min_power_percent=99.5))
    assert idle["verdict"] == "healthy"  # idle: power not judged


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><nvidia_smi_log/>', "entity declarations"),
        (
            '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v13.dtd" [<!ELEMENT a ANY>]><nvidia_smi_log/>',
            "DOCTYPE other than",
        ),
        ('<!DOCTYPE nvidia_smi_log SYSTEM "http://example.invalid/x.dtd"><nvidia_smi_log/>', "DOCTYPE other than"),
        ("<nvidia_smi_log><gpu></nvidia_smi_log>", "not well-formed"),
        ("<html><body/></html>", "root element is <html>"),
        ("<nvidia_smi_log><gpu id='0'/></nvidia_smi_log>", "no <attached_gpus>"),
        ("", "not well-formed"),
    ],
)
def test_hostile_or_garbled_xml_gets_a_named_error(text, problem):
    with pytest.raises(NvidiaParseError, match=re.escape(problem)):
        parse_smi_xml(text)


def test_billion_laughs_is_refused_before_parsing():
    laughs = '<!DOCTYPE lolz [<!ENTITY lol "lol">' + "".join(
        f'<!ENTITY lol{i} "{("&lol" + str(i - 1) + ";") * 10 if i else "&lol;" * 10}">' for i in range(9)
    )
    with pytest.raises(NvidiaParseError, match="entity declarations are refused"):
        parse_smi_xml(laughs + "]><nvidia_smi_log>&lol8;</nvidia_smi_log>")


def test_wrong_value_names_the_element_and_gpu():
    with pytest.raises(
        NvidiaParseError,
        match=r"^cannot parse nvidia-smi -q -x \(GPU 00000000:00:06.0\): "
        r"<utilization/gpu_util> is not a number in %: 'lots'$",
    ):
        parse_smi_xml(h200(utilization__gpu_util="lots"))
    with pytest.raises(NvidiaParseError, match=r"<persistence_mode> is not one of"):
        parse_smi_xml(h200(persistence_mode="Maybe"))


def test_oversized_output_is_refused():
    with pytest.raises(NvidiaParseError, match="longer than"):
        parse_smi_xml("<nvidia_smi_log>" + " " * (16 * 1024 * 1024) + "</nvidia_smi_log>")


# --------------------------------------------------------------------------- Xid lines


def test_xid_lines_in_journal_dmesg_and_kmsg_formats():
    lost = parse_xid_lines(read(LOGS / "journal-xid79-gpu-lost.txt"))
    assert lost == {
        "events": [
            {
                "pci": "0000:81:00",
                "code": 79,
                "pid": None,
                "process": None,
                "text": "GPU has fallen off the bus.",
                "time": "2026-11-30T09:10:02+0000",
            }
        ],
        "unparsed": [],
    }
    faults = parse_xid_lines(read(LOGS / "dmesg-xid-app-faults.txt"))["events"]
    assert [(e["pci"], e["code"], e["pid"], e["process"]) for e in faults] == [
        ("0000:01:00", 13, 48213, "python3"),
        ("0000:01:00", 13, 48213, "python3"),
        ("0000:21:00", 31, 50102, "python3"),
    ]
    (gsp,) = parse_xid_lines(read(LOGS / "kmsg-xid119-gsp.txt"))["events"]
    assert (gsp["pci"], gsp["code"], gsp["time"]) == ("0000:c1:00", 119, None)
    assert gsp["text"].startswith("Timeout after 6s of waiting for RPC response")


def test_xid_older_shapes_and_unparsed_lines():
    parsed = parse_xid_lines(
        "NVRM: Xid (0000:03:00): 14, Channel 00000001\n"
        "NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate.\n"
        "NVRM: Xid (PCI:0000:10:1c): sixty-three\n"
    )
    assert [(e["pci"], e["code"], e["pid"]) for e in parsed["events"]] == [
        ("0000:03:00", 14, None),
        ("0000:10:1c", 63, 1896),
    ]
    assert parsed["events"][1]["text"].startswith("Row Remapper")
    assert parsed["unparsed"] == ["NVRM: Xid (PCI:0000:10:1c): sixty-three"]


def test_pci_key_matches_smi_bus_ids_to_xid_addresses():
    assert pci_key("00000000:81:00.0") == pci_key("0000:81:00") == "0000:81:00"
    assert pci_key("00000000:A1:00.0") == "0000:a1:00"
    assert pci_key("not a bus id") is None


def test_xid_levels_follow_nvidia_immediate_actions():
    assert [code for code in (48, 64, 74, 79, 95, 119, 120, 140) if xid_level(code) != "failed"] == []
    assert [code for code in (8, 13, 31, 43, 45, 63, 92, 94, 154, 999) if xid_level(code) != "degraded"] == []


def test_docs_table_is_the_code_table():
    """docs/gpu-health.md lists the same codes, mnemonics, buckets and levels as XID_CATALOG."""
    rows = re.findall(
        r"^\| (\d+) \| `([A-Z0-9_]+)` \| ([A-Z0-9_]+) \| (failed|degraded) \|", read(REPO / "docs/gpu-health.md"), re.M
    )
    documented = {int(code): (mnemonic, bucket, level) for code, mnemonic, bucket, level in rows}
    assert documented == {code: (entry[0], entry[1], xid_level(code)) for code, entry in XID_CATALOG.items()}


# --------------------------------------------------------------------------- verdicts on the SM120 variants

XID79 = read(LOGS / "journal-xid79-gpu-lost.txt")


@pytest.mark.parametrize(
    ("variant", "log", "opts", "verdict"),
    [
        ("healthy-idle", "journal-clean.txt", {"expected_gpu_count": 8}, "healthy"),
        ("healthy-busy", "journal-clean.txt", {"expected_gpu_count": 8}, "healthy"),
        ("link-x8-gen3", "journal-clean.txt", {}, "degraded: gpu 3: PCIe link Gen3 x8 (max Gen5 x16)"),
        (
            "power-brake",
            "journal-clean.txt",
            {},
            "degraded: gpu 5: clocks held down: hw_slowdown, hw_power_brake_slowdown; "
            "gpu 5: under power: 182 W of 600 W (30%) at 98% utilisation",
        ),
        ("row-remap-failure", "journal-clean.txt", {}, "failed: gpu 2: row remapping failed"),
        (
            "row-remap-pending",
            "journal-clean.txt",
            {},
            "degraded: gpu 6: row remap pending (reset the GPU to apply it)",
        ),
        (
            "missing-gpu",
            "journal-xid79-gpu-lost.txt",
            {"expected_gpu_count": 8},
            "failed: 7 of 8 expected GPUs present; "
            "xid 79 (GPU has fallen off the bus) on 0000:81:00, which nvidia-smi does not list",
        ),
        (
            "healthy-busy",
            "dmesg-xid-app-faults.txt",
            {},
            "degraded: gpu 0: xid 13 x2 (graphics engine exception); gpu 1: xid 31 (GPU memory page fault)",
        ),
        ("healthy-busy", "kmsg-xid119-gsp.txt", {}, "failed: gpu 6: xid 119 (GSP RPC timeout)"),
    ],
)
def test_variant_verdicts(variant, log, opts, verdict):
    result = evaluate(read(VARIANTS / f"{variant}.xml"), read(LOGS / log), options(**opts))
    assert result["verdict"] == verdict, result["reasons"]
    assert result["level"] == verdict.split(":")[0]


def test_idle_downtrained_links_are_judged_only_when_asked():
    idle = read(VARIANTS / "healthy-idle.xml")  # the profile's idle GPUs sit at Gen1 x16
    assert evaluate(idle, None, options())["verdict"] == "healthy"
    checked = evaluate(idle, None, options(pcie_check_idle=True))
    assert checked["level"] == "degraded"
    assert checked["reasons"] == [f"gpu {i}: PCIe link Gen1 x16 (max Gen5 x16)" for i in range(8)]


def test_per_gpu_verdicts_and_lesser_reasons_are_kept():
    result = evaluate(read(VARIANTS / "row-remap-failure.xml"), None, options())
    levels = [gpu["level"] for gpu in result["gpus"]]
    assert levels == ["healthy", "healthy", "failed", "healthy", "healthy", "healthy", "healthy", "healthy"]
    assert result["gpus"][2]["reasons"] == ["row remapping failed", "no spare rows left in 1 bank(s)"]
    assert result["gpus"][2]["verdict"] == "failed: row remapping failed"


def test_ignored_xid_codes_are_returned_but_not_judged():
    result = evaluate(
        read(VARIANTS / "healthy-busy.xml"), read(LOGS / "dmesg-xid-app-faults.txt"), options(xid_ignore_codes=[13, 31])
    )
    assert result["verdict"] == "healthy"
    assert [event["code"] for event in result["xid_events"]] == [13, 13, 31]


# --------------------------------------------------------------------------- rules on the H200 capture, one by one


@pytest.mark.parametrize(
    ("elements", "opts", "verdict"),
    [
        (
            {"ecc_errors__volatile__dram_uncorrectable": "1"},
            {},
            "failed: 1 uncorrectable ECC error(s) since the driver loaded",
        ),
        (
            {"ecc_errors__volatile__sram_correctable": "150"},
            {},
            "degraded: 150 correctable ECC errors since the driver loaded (> 100)",
        ),
        ({"ecc_errors__volatile__sram_correctable": "150"}, {"max_volatile_correctable_ecc": 200}, "healthy"),
        ({"ecc_errors__aggregate__sram_threshold_exceeded": "Yes"}, {}, "failed: SRAM ECC error threshold exceeded"),
        ({"ecc_errors__unrepairable_memory": "Yes"}, {}, "failed: unrepairable memory"),
        ({"ecc_errors__channel_repair_pending": "Yes"}, {}, "degraded: memory channel repair pending (reset the GPU)"),
        ({"ecc_mode__current_ecc": "Disabled"}, {}, "degraded: ECC disabled"),
        ({"gpu_recovery_action": "Reset"}, {}, "failed: recovery action Reset"),
        (
            {"utilization__gpu_util": "[GPU requires reset]", "temperature__gpu_temp": "[Unknown Error]"},
            {},
            "failed: nvidia-smi reads GPU requires reset, Unknown Error",
        ),
        ({"fan_speed": "N/A"}, {}, "healthy"),
        ({"persistence_mode": "Disabled"}, {}, "degraded: persistence mode off"),
        ({"persistence_mode": "Disabled"}, {"require_persistence_mode": False}, "healthy"),
        ({"retired_pages__pending_retirement": "Yes"}, {}, "degraded: page retirement pending (reset the GPU)"),
        (
            {"clocks_event_reasons__clocks_event_reason_hw_thermal_slowdown": "Active"},
            {},
            "degraded: clocks held down: hw_thermal_slowdown",
        ),
        ({"clocks_event_reasons__clocks_event_reason_sw_power_cap": "Active"}, {}, "healthy"),
        (
            {"utilization__gpu_util": "95 %", "clocks_event_reasons__clocks_event_reason_gpu_idle": "Not Active"},
            {},
            "degraded: under power: 122 W of 700 W (17%) at 95% utilisation",
        ),
        (
            {"utilization__gpu_util": "95 %", "clocks_event_reasons__clocks_event_reason_gpu_idle": "Not Active"},
            {"min_power_percent": 10},
            "healthy",
        ),
        ({"utilization__gpu_util": "95 %"}, {}, "healthy"),  # gpu_idle still active: not busy
    ],
)
def test_h200_rule_cases(elements, opts, verdict):
    result = evaluate(h200(**elements), None, options(**opts))
    assert result["gpus"][0]["verdict"] == verdict, result["reasons"]


def test_node_reasons_come_before_gpu_reasons_in_a_stable_order():
    text = h200(persistence_mode="Disabled", ecc_mode__current_ecc="Disabled")
    log = "NVRM: Xid (PCI:0000:00:06): 48, pid=1, name=x, DBE\nNVRM: Xid (PCI:0000:00:06): 13, pid=1, name=x, GR\n"
    result = evaluate(text, log + "NVRM: Xid ???\n", options(expected_gpu_count=2))
    assert result["reasons"] == [
        "1 of 2 expected GPUs present",
        "1 Xid line(s) in the kernel log not understood",
        "gpu 0: xid 13 (graphics engine exception)",
        "gpu 0: xid 48 (double bit ECC error)",
        "gpu 0: ECC disabled",
        "gpu 0: persistence mode off",
    ]
    assert result["verdict"] == "failed: 1 of 2 expected GPUs present; gpu 0: xid 48 (double bit ECC error)"
    assert (
        evaluate(text, None, options(expected_gpu_count=2))["verdict"]
        == evaluate(text, None, options(expected_gpu_count=2))["verdict"]
    )


def test_more_gpus_than_expected_is_degraded():
    assert evaluate(read(H200_XML), None, options(expected_gpu_count=1))["verdict"] == "healthy"
    assert evaluate(read(VARIANTS / "healthy-idle.xml"), None, options(expected_gpu_count=4))["verdict"] == (
        "degraded: 8 of 4 expected GPUs present"
    )


def test_unreadable_sources_are_reasons_not_exceptions():
    failed = evaluate(None, None, options(), smi_problem="nvidia-smi -q -x failed (driver not loaded, exit 9): ...")
    assert failed["verdict"] == "failed: nvidia-smi -q -x failed (driver not loaded, exit 9): ..."
    assert failed["gpus"] == []
    assert failed["driver_version"] is None
    garbled = evaluate("index, name\n0, NVIDIA H200\n", None, options())
    assert garbled["verdict"].startswith("failed: nvidia-smi -q -x output not understood: ")
    unread = evaluate(read(H200_XML), None, options(), kernel_problem="journalctl -k exited 1: permission denied")
    assert unread["verdict"] == "degraded: kernel log not read: journalctl -k exited 1: permission denied"


def test_gpu_reasons_is_the_per_gpu_rule_set():
    gpu = parse_smi_xml(read(H200_XML))["gpus"][0]
    events = [{"pci": "0000:00:06", "code": 79}]
    assert gpu_reasons(gpu, events, options()) == [("failed", "xid 79 (GPU has fallen off the bus)")]


def test_fail_on():
    assert [fails(level, "failed") for level in LEVELS] == [False, False, True]
    assert [fails(level, "degraded") for level in LEVELS] == [False, True, True]
    assert [fails(level, "none") for level in LEVELS] == [False, False, False]


# --------------------------------------------------------------------------- options


def test_kernel_log_commands():
    assert kernel_log_argv("journalctl", None, None) == ["journalctl", "-k", "--no-pager", "-o", "short-iso"]
    assert kernel_log_argv("journalctl", "-1h", None)[-1] == "--since=-1h"
    assert kernel_log_argv("dmesg", None, None) == ["dmesg"]
    assert kernel_log_argv("file", None, "/var/tmp/dmesg.txt") is None
    assert kernel_log_argv("none", None, None) is None


JOURNAL_HINT = (
    "Hint: You are currently not seeing messages from other users and the system.\n"
    "      Users in groups 'adm', 'systemd-journal' can see all messages.\n"
    "      Pass -q to turn off this notice.\n"
)


def no_file(path: str) -> str:
    raise FileNotFoundError(2, "No such file or directory", path)


@pytest.mark.parametrize(
    ("source", "path", "answer", "expected"),
    [
        (
            "journalctl",
            None,
            (0, "2026-11-30T09:10:02+0000 h kernel: x\n", ""),
            ("2026-11-30T09:10:02+0000 h kernel: x\n", None),
        ),
        ("journalctl", None, (0, "", JOURNAL_HINT), (None, "journalctl cannot see the system journal as this user")),
        (
            "dmesg",
            None,
            (1, "", "dmesg: read kernel buffer failed: Operation not permitted\n"),
            (None, "dmesg exited 1: dmesg: read kernel buffer failed: Operation not permitted"),
        ),
        ("file", "/var/tmp/absent.txt", None, (None, "cannot read /var/tmp/absent.txt: No such file or directory")),
        ("none", None, None, (None, None)),
    ],
)
def test_reading_the_kernel_log(source, path, answer, expected):
    argv = kernel_log_argv(source, None, path)
    calls = []

    def run(command):
        calls.append(command)
        return answer

    text, problem = read_kernel_log(argv, source, path, run, no_file)
    assert text == expected[0]
    assert (problem or "").startswith(expected[1] or "")
    assert calls == ([argv] if argv else [])


def test_reading_nvidia_smi_names_the_failure():
    assert read_smi_xml(None, "nvidia-smi", None) == (None, "nvidia-smi not found at nvidia-smi")
    not_loaded = (9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", "")
    text, problem = read_smi_xml("/usr/bin/nvidia-smi", "nvidia-smi", lambda argv: not_loaded)
    assert text is None
    assert problem.startswith("nvidia-smi -q -x failed (driver not loaded, exit 9): NVIDIA-SMI has failed")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("dmesg", "-1h", None), "since applies to kernel_log=journalctl only"),
        (("file", None, None), "kernel_log=file needs kernel_log_path"),
        (("journalctl", None, "/tmp/x"), "kernel_log_path is only read with kernel_log=file"),
        (("journalctl", "-1h\n--rotate", None), "since must be a journalctl time"),
        (("journalctl", " ", None), "since must be a journalctl time"),
        (("syslog", None, None), "kernel_log must be one of"),
    ],
)
def test_kernel_log_option_errors(args, message):
    with pytest.raises(GpuHealthError, match=re.escape(message)):
        kernel_log_argv(*args)


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        ({"busy_utilization_percent": 120}, "busy_utilization_percent must be a number from 0 to 100"),
        ({"min_power_percent": -1}, "min_power_percent must be a number from 0 to 100"),
        ({"degrading_clock_events": ["hw_slowdown", "warp_drive"]}, "unknown reason(s) ['warp_drive']"),
        ({"expected_gpu_count": 0}, "expected_gpu_count must be a count >= 1"),
        ({"max_volatile_correctable_ecc": -5}, "max_volatile_correctable_ecc must be a count >= 0"),
        ({"xid_ignore_codes": [-1]}, "xid_ignore_codes must be Xid numbers"),
    ],
)
def test_threshold_errors(opts, message):
    with pytest.raises(GpuHealthError, match=re.escape(message)):
        check_options(opts)


def test_documentation_matches_argument_spec_and_defaults():
    """What validate-modules checks, here too: each option's type, default, choices and elements."""
    documented = documented_options(module.DOCUMENTATION)
    assert set(documented) == set(module.ARGUMENT_SPEC)
    for name, spec in module.ARGUMENT_SPEC.items():
        for key in ("type", "default", "choices", "elements"):
            assert documented[name].get(key) == spec.get(key), (name, key)
    for name, value in DEFAULTS.items():
        assert documented[name].get("default") == value, name
    for name, option in documented.items():  # a stray ": " in YAML turns a sentence into a mapping
        lines = option["description"] if isinstance(option["description"], list) else [option["description"]]
        assert all(isinstance(line, str) for line in lines), name


# --------------------------------------------------------------------------- fixtures and the stand-in


def test_variant_files_are_what_build_py_writes():
    stale = [name for name in BUILD.VARIANTS if read(VARIANTS / f"{name}.xml") != BUILD.build(name)]
    assert stale == []


@pytest.mark.parametrize("variant", sorted(BUILD.VARIANTS))
def test_standin_serves_each_variant(variant):
    assert run_standin("-q", "-x", profile=f"rtxpro6000-8gpu-{variant}").stdout == read(VARIANTS / f"{variant}.xml")


def test_standin_serves_the_real_h200_capture_and_drops_absent_gpus():
    assert run_standin("-q", "-x", profile="h200-580").stdout == read(H200_XML)
    listed = run_standin("-L", profile="rtxpro6000-8gpu-missing-gpu").stdout
    assert "GPU-1b6d93a4" not in listed
    assert listed.count("\n") == 7


def test_standin_without_q_xml_says_so(tmp_path):
    profile = json.loads(read(PROFILES / "rtxpro6000-570.json"))
    assert "q_xml" not in profile
    result = run_standin("-q", "-x", profile="rtxpro6000-570")
    assert result.returncode == 2
    assert 'needs a profile naming "q_xml"' in result.stdout


# --------------------------------------------------------------------------- the module as Ansible runs it


@pytest.mark.parametrize("check_mode", [False, True])
def test_module_real_h200_healthy(tmp_path, check_mode):
    rc, result = run_gpu_health(tmp_path, module_args(expected_gpu_count=1, _ansible_check_mode=check_mode))
    assert rc == 0, result
    assert (result["changed"], result["verdict"], result["gpu_count"]) == (False, "healthy", 1)
    assert result["gpus"][0]["uuid"] == "GPU-4b715da6-802e-b031-afc0-ccbc02cb5c16"
    assert result["thresholds"]["busy_utilization_percent"] == 50
    assert result["kernel_log"] == {"source": "file", "command": None, "since": None, "scope": "node"}


def test_module_missing_gpu_fails_the_task_with_fail_on(tmp_path):
    args = module_args("journal-xid79-gpu-lost.txt", expected_gpu_count=8, fail_on="failed")
    rc, result = run_gpu_health(tmp_path, args, profile="rtxpro6000-8gpu-missing-gpu")
    assert rc == 1
    assert result["failed"] is True
    assert result["msg"].startswith("GPU health: failed: 7 of 8 expected GPUs present; xid 79")
    assert result["xid_events"][0]["pci"] == "0000:81:00"
    rc, result = run_gpu_health(tmp_path, {**args, "fail_on": "none"}, profile="rtxpro6000-8gpu-missing-gpu")
    assert rc == 0
    assert result["level"] == "failed"


def test_module_degraded_passes_fail_on_failed(tmp_path):
    rc, result = run_gpu_health(tmp_path, module_args(fail_on="failed"), profile="rtxpro6000-8gpu-link-x8-gen3")
    assert rc == 0
    assert result["verdict"] == "degraded: gpu 3: PCIe link Gen3 x8 (max Gen5 x16)"
    rc, result = run_gpu_health(tmp_path, module_args(fail_on="degraded"), profile="rtxpro6000-8gpu-link-x8-gen3")
    assert rc == 1
    assert result["msg"] == "GPU health: degraded: gpu 3: PCIe link Gen3 x8 (max Gen5 x16)"


def test_module_without_nvidia_smi_reports_failed(tmp_path):
    rc, result = run_gpu_health(tmp_path, module_args(nvidia_smi_path=str(tmp_path / "nvidia-smi")))
    assert rc == 0
    assert result["verdict"] == f"failed: nvidia-smi not found at {tmp_path / 'nvidia-smi'}"


def test_module_unreadable_kernel_log_is_degraded(tmp_path):
    rc, result = run_gpu_health(tmp_path, module_args(kernel_log_path=str(tmp_path / "absent.log")))
    assert rc == 0
    assert result["verdict"].startswith("degraded: kernel log not read: cannot read ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"kernel_log": "file"}, "kernel_log is file but all of the following are missing: kernel_log_path"),
        ({"kernel_log": "dmesg", "since": "-1h"}, "since applies to kernel_log=journalctl only"),
        ({"busy_utilization_percent": 101}, "busy_utilization_percent must be a number from 0 to 100"),
        ({"degrading_clock_events": ["turbo"]}, "value of degrading_clock_events must be one or more of"),
    ],
)
def test_module_option_errors(tmp_path, args, message):
    rc, result = run_gpu_health(tmp_path, {"nvidia_smi_path": str(STANDIN), **args})
    assert rc == 1
    assert message in result["msg"]


# --------------------------------------------------------------------------- fuzz: named error or verdict

H200_TEXT = read(H200_XML)
VERDICT_RE = re.compile(r"^(healthy|(degraded|failed): .+)$", re.S)


@given(st.text(max_size=400))
def test_fuzz_xml_parser_named_error_or_result(text):
    problem = parsed = None
    try:
        parsed = parse_smi_xml(text)
    except NvidiaParseError as exc:
        problem = str(exc)
    if parsed is None:
        assert problem.startswith("cannot parse nvidia-smi -q -x")
    else:
        assert isinstance(parsed["gpus"], list)


@given(
    st.integers(min_value=0, max_value=len(H200_TEXT)), st.integers(min_value=0, max_value=200), st.text(max_size=40)
)
def test_fuzz_mutated_real_xml_gives_a_verdict(at, cut, insert):
    """The real capture cut and spliced anywhere: always a verdict, never an exception."""
    text = H200_TEXT[:at] + insert + H200_TEXT[at + cut :]
    result = evaluate(text, None, options())
    assert VERDICT_RE.match(result["verdict"])
    assert result["level"] in LEVELS


@given(
    st.lists(
        st.one_of(
            st.text(max_size=80),
            st.builds(
                lambda pci, code, rest: f"NVRM: Xid (PCI:{pci}): {code}, {rest}",
                st.from_regex(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}", fullmatch=True),
                st.integers(min_value=0, max_value=99999),
                st.text(max_size=60),
            ),
            st.just("NVRM: Xid (PCI:0000:00:06): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."),
        ),
        max_size=8,
    )
)
def test_fuzz_kernel_log_gives_a_verdict(lines):
    log = "\n".join(lines)
    parsed = parse_xid_lines(log)
    for event in parsed["events"]:
        assert pci_key(event["pci"]) == event["pci"]
        assert event["code"] >= 0
    result = evaluate(H200_TEXT, log, options())
    assert VERDICT_RE.match(result["verdict"])
    if any("79, pid='<unknown>'" in line and "0000:00:06" in line for line in lines):
        assert result["level"] == "failed"


@given(
    st.lists(st.lists(st.text(alphabet="0123456789abcdefN/A. x%W", max_size=12), min_size=1, max_size=6), max_size=5)
)
def test_fuzz_csv_where_xml_is_expected_is_failed(rows):
    """--query-gpu CSV (or anything else that is not the XML report) gives a failed verdict, never an exception."""
    text = "\n".join(", ".join(cells) for cells in rows)
    result = evaluate(text, None, options())
    assert result["level"] == "failed"
    assert result["verdict"].startswith("failed: nvidia-smi -q -x output not understood")


@given(st.text(max_size=80))
def test_fuzz_since_is_one_argument_or_a_named_error(since):
    problem = argv = None
    try:
        argv = kernel_log_argv("journalctl", since, None)
    except GpuHealthError as exc:
        problem = str(exc)
    if argv is None:
        assert "since must be" in problem
    else:
        assert argv[-1] == f"--since={since}"
        assert argv[:-1] == kernel_log_argv("journalctl", None, None)


# --------------------------------------------------------------------------- a container's kernel log (LXC)
# Measured in the simulated lab (LXC 5 guests on Debian 12): inside a guest `journalctl -k` prints only
# "-- No entries --" (exit 0) while its host's shows the kernel's messages; a plain Podman container's
# `dmesg` exits 1 (Operation not permitted). An empty journal must not pass for "no Xid".


@pytest.mark.parametrize("out", ["-- No entries --\n", "", "\n\n"])
def test_a_journal_without_any_kernel_message_is_not_a_clean_one(out):
    argv = kernel_log_argv("journalctl", None, None)
    text, problem = read_kernel_log(argv, "journalctl", None, lambda _argv: (0, out, ""), no_file)
    assert text is None
    assert problem.startswith("journalctl -k shows no kernel message of this boot: a container's journal gets none")
    assert "sglang_server_health_kernel_log_host" in problem
    # narrowed by --since, no message is the normal case
    argv = kernel_log_argv("journalctl", "-1h", None)
    assert read_kernel_log(argv, "journalctl", None, lambda _argv: (0, out, ""), no_file) == (out, None)


def test_module_in_a_container_journal_is_degraded_not_healthy(tmp_path):
    journalctl = tmp_path / "journalctl"
    journalctl.write_text("#!/bin/sh\necho '-- No entries --'\n", encoding="utf-8")
    journalctl.chmod(0o755)
    args = {"nvidia_smi_path": str(STANDIN), "expected_gpu_count": 1}
    env_path = os.pathsep.join([str(tmp_path), os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    _rc, result = run_gpu_health(tmp_path, args, env={"PATH": env_path})
    assert result["level"] == "degraded", result
    assert result["verdict"].startswith("degraded: kernel log not read: journalctl -k shows no kernel message")


def _xid(pci: str, code: int = 79) -> str:
    return f"2026-12-01T10:00:00+0000 pve1 kernel: NVRM: Xid (PCI:{pci}): {code}, pid='<unknown>', name=<unknown>, x\n"


def test_host_log_xids_of_other_guests_gpus_are_counted_not_judged(tmp_path):
    # the H200 capture lists one GPU, 0000:1b:00; the host's log also has another guest's GPU
    other = _xid("0000:c1:00")
    rc, result = run_gpu_health(
        tmp_path,
        {"nvidia_smi_path": str(STANDIN), "kernel_log": "text", "kernel_log_text": other, "kernel_log_scope": "host"},
    )
    assert rc == 0
    assert (result["verdict"], result["xid_other_gpus"], result["xid_events"]) == ("healthy", 1, [])
    assert result["kernel_log"]["scope"] == "host"
    # the same line in the node's own log: its GPU fell off the bus
    rc, result = run_gpu_health(
        tmp_path, {"nvidia_smi_path": str(STANDIN), "kernel_log": "text", "kernel_log_text": other}
    )
    assert result["level"] == "failed"
    assert result["xid_other_gpus"] == 0


def test_host_log_xid_of_this_nodes_gpu_fails_it(tmp_path):
    own = _xid(pci_key(parse_smi_xml(read(H200_XML))["gpus"][0]["pci_bus_id"]))
    rc, result = run_gpu_health(
        tmp_path,
        {"nvidia_smi_path": str(STANDIN), "kernel_log": "text", "kernel_log_text": own, "kernel_log_scope": "host"},
    )
    assert rc == 0
    assert result["level"] == "failed", result["verdict"]
    assert result["verdict"].startswith("failed: gpu 0: xid 79")


def test_a_host_log_that_could_not_be_read_is_degraded(tmp_path):
    rc, result = run_gpu_health(
        tmp_path,
        {"nvidia_smi_path": str(STANDIN), "kernel_log": "text", "kernel_log_problem": "pve1: journalctl exited 1"},
    )
    assert rc == 0
    assert result["verdict"] == "degraded: kernel log not read: pve1: journalctl exited 1"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"kernel_log": "journalctl", "kernel_log_text": "x"}, "kernel_log_text and kernel_log_problem are only read"),
        ({"kernel_log": "text", "kernel_log_text": "", "kernel_log_path": "/x"}, "kernel_log_path is only read"),
        ({"kernel_log": "text", "kernel_log_text": "", "kernel_log_scope": "guest"}, "kernel_log_scope must be one of"),
    ],
)
def test_text_option_errors(args, message):
    params = {"nvidia_smi_path": "nvidia-smi", "kernel_log_path": None, **args}
    with pytest.raises(GpuHealthError, match=message):
        collect(params, lambda _n: None, lambda _a: (0, "", ""), no_file)


@given(st.text(max_size=400), st.sampled_from(["node", "host"]))
def test_any_text_log_gives_a_verdict(text, scope):
    params = {"nvidia_smi_path": "smi", "kernel_log": "text", "kernel_log_text": text, "kernel_log_scope": scope}
    result = collect(params, lambda _n: "smi", lambda _a: (0, read(H200_XML), ""), no_file)
    assert result["level"] in LEVELS
    assert result["xid_other_gpus"] >= 0
    if scope == "node":
        assert result["xid_other_gpus"] == 0
