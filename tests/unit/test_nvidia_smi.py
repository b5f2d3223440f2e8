# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Parsers of plugins/module_utils/nvidia/smi.py on real H200 captures, SM120 fixtures and broken output;
and the nvidia-smi stand-in checked byte for byte against the real captures."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from lib.nvidia import FIX, PROFILES, read, run_standin

from ansible_collections.gpufleet.sglang.plugins.module_utils.gate.telemetry import parse_sample_line
from ansible_collections.gpufleet.sglang.plugins.module_utils.nvidia.smi import (
    GPU_INFO_FIELDS,
    TELEMETRY_FIELDS,
    NvidiaParseError,
    classify_smi_failure,
    describe_device_nodes,
    nvidia_device_majors,
    parse_gpu_query,
    parse_proc_devices,
    parse_proc_version,
    parse_query_csv,
    parse_query_typed,
    parse_smi_versions,
    parse_topo_matrix,
    scan_device_nodes,
)

H200 = FIX / "h200-580"
RTX = FIX / "rtxpro6000-8gpu"
BAD = FIX / "malformed"


# --------------------------------------------------------------------------- query CSV


def test_parse_query_csv_real_capture_with_header_and_units():
    fields = [cell.split(" [")[0] for cell in read(H200 / "query-gpu.csv").splitlines()[0].split(", ")]
    rows = parse_query_csv(read(H200 / "query-gpu.csv"), fields)
    assert len(rows) == 1
    assert rows[0]["memory.total"] == "143771"
    assert rows[0]["power.limit"] == "700.00"
    assert rows[0]["utilization.gpu"] == "0"
    assert rows[0]["persistence_mode"] == "Enabled"


def test_parse_query_csv_absent_values_become_none():
    rows = parse_query_csv("0, [N/A], [Not Supported], N/A, 5\n", ["index", "fan.speed", "a", "b", "c"])
    assert rows == [{"index": "0", "fan.speed": None, "a": None, "b": None, "c": "5"}]


def test_parse_query_csv_wrong_cell_count_names_fields_and_line():
    with pytest.raises(NvidiaParseError, match=r"expected 12 comma-separated values .*got 10.*GPU-c7e05f18"):
        parse_query_csv(read(BAD / "query-gpu.csv"), GPU_INFO_FIELDS)


def test_parse_query_csv_rejects_empty_field_list():
    with pytest.raises(NvidiaParseError, match="no fields"):
        parse_query_csv("0\n", [])


def test_module_query_real_h200():
    gpus = parse_gpu_query(read(H200 / "query-gpu-module.csv"))
    assert gpus == [
        {
            "index": 0,
            "name": "NVIDIA H200",
            "uuid": "GPU-333b3954-edcb-41bc-baaa-e29bd4178454",
            "pci_bus_id": "00000000:00:06.0",
            "compute_cap": "9.0",
            "memory_total_mib": 143771,
            "power_limit_w": 700.0,
            "power_max_limit_w": 700.0,
            "persistence_mode": True,
            "pcie_gen_max": 5,
            "pcie_width_max": 16,
        }
    ]


@pytest.mark.parametrize("variant", ["rtxpro6000-8gpu", "rtxpro6000-570", "rtxpro6000-proprietary"])
def test_module_query_sm120(variant):
    gpus = parse_gpu_query(read(FIX / variant / "query-gpu.csv"))
    assert [g["index"] for g in gpus] == list(range(8))
    assert {g["compute_cap"] for g in gpus} == {"12.0"}
    assert {g["name"] for g in gpus} == {"NVIDIA RTX PRO 6000 Blackwell Server Edition"}
    assert {(g["memory_total_mib"], g["power_limit_w"], g["pcie_gen_max"], g["pcie_width_max"]) for g in gpus} == {
        (97887, 600.0, 5, 16)
    }
    assert len({g["uuid"] for g in gpus}) == 8


def test_typed_value_error_names_field():
    with pytest.raises(NvidiaParseError, match=r"field memory.total is not a number: '97887 MiB\?'"):
        parse_gpu_query(read(BAD / "query-gpu-badvalue.csv"))


def test_bool_field_rejects_other_words():
    with pytest.raises(NvidiaParseError, match="persistence_mode is neither Enabled nor Disabled"):
        parse_query_typed("On\n", ["persistence_mode"])


def test_garbage_is_rejected_by_gpu_query():
    with pytest.raises(NvidiaParseError, match="Segmentation fault"):
        parse_gpu_query(read(BAD / "garbage.txt"))


# --------------------------------------------------------------------------- telemetry


def test_telemetry_real_lms200():
    """The real -lms 200 capture, line by line as the gate reads it (gate_telemetry.parse_sample_line)."""
    lines = read(H200 / "telemetry-lms200.csv").splitlines()
    rows = [row for line in lines if (row := parse_sample_line(line)) is not None]
    assert len(rows) == 15
    assert rows[0]["power.draw.instant"] == 78.05
    assert rows[0]["clocks_event_reasons.active"] == 1
    assert rows[0]["enforced.power.limit"] == 700.0


def test_telemetry_fields_exclude_energy_counter_rejected_by_580():
    assert "total_energy_consumption" not in TELEMETRY_FIELDS
    assert 'Field "total_energy_consumption" is not a valid field' in read(H200 / "query-invalid-field.txt")


# --------------------------------------------------------------------------- proc files


@pytest.mark.parametrize(
    ("variant", "expected"),
    [
        ("h200-580", {"version": "580.159.04", "type": "open"}),
        ("rtxpro6000-8gpu", {"version": "580.159.04", "type": "open"}),
        ("rtxpro6000-570", {"version": "570.195.03", "type": "open"}),
        ("rtxpro6000-proprietary", {"version": "580.159.04", "type": "proprietary"}),
    ],
)
def test_proc_version(variant, expected):
    assert parse_proc_version(read(FIX / variant / "proc-version.txt")) == expected


def test_proc_version_garbage():
    with pytest.raises(NvidiaParseError, match=r"unrecognised NVRM version line.*something else"):
        parse_proc_version(read(BAD / "proc-version.txt"))
    with pytest.raises(NvidiaParseError, match="no 'NVRM version:' line"):
        parse_proc_version(read(BAD / "garbage.txt"))


def test_proc_devices_real_h200():
    majors = nvidia_device_majors(parse_proc_devices(read(H200 / "proc-devices.txt")))
    assert majors["nvidia"] == 195
    assert majors["nvidiactl"] == 195
    assert majors["nvidia-uvm"] == 238
    assert majors["nvidia-caps"] == 241
    assert "zram" not in majors  # block devices and other drivers are left out
    assert all(name.startswith("nvidia") for name in majors)


def test_proc_devices_sm120_dynamic_majors():
    majors = nvidia_device_majors(parse_proc_devices(read(RTX / "proc-devices.txt")))
    assert (majors["nvidia-uvm"], majors["nvidia-caps"]) == (510, 511)


def test_proc_devices_garbage():
    with pytest.raises(NvidiaParseError, match=r"expected '<major> <name>'.*not-a-major"):
        parse_proc_devices(read(BAD / "proc-devices.txt"))
    with pytest.raises(NvidiaParseError, match="before the 'Character devices:' heading"):
        parse_proc_devices(read(BAD / "garbage.txt"))


# --------------------------------------------------------------------------- versions, -L


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (H200 / "nvidia-smi-q.txt", ("580.159.04", "13.0")),
        (H200 / "nvidia-smi-q-compute.txt", ("580.159.04", "13.0")),
        (H200 / "nvidia-smi.txt", ("580.159.04", "13.0")),
        (H200 / "nvidia-smi-version.txt", ("580.159.04", "13.0")),
        (RTX / "nvidia-smi-q-compute.txt", ("580.159.04", "13.0")),
        (FIX / "rtxpro6000-570/nvidia-smi-q-compute.txt", ("570.195.03", "12.8")),
    ],
)
def test_versions(path, expected):
    versions = parse_smi_versions(read(path))
    assert (versions["driver_version"], versions["cuda_version"]) == expected


def test_versions_missing_cuda():
    with pytest.raises(NvidiaParseError, match="no CUDA Version"):
        parse_smi_versions(read(BAD / "nvidia-smi-q-compute.txt"))


# --------------------------------------------------------------------------- topo -m


def test_topo_real_h200():
    topo = parse_topo_matrix(read(H200 / "topo.txt"))
    assert topo == {
        "gpus": ["GPU0"],
        "nics": [],
        "matrix": {"GPU0": {}},
        "affinity": {"GPU0": {"cpu_affinity": "0-15", "numa_affinity": "0", "gpu_numa_id": None}},
    }


def test_topo_sm120_8gpu_pcie():
    topo = parse_topo_matrix(read(RTX / "topo.txt"))
    assert topo["gpus"] == [f"GPU{i}" for i in range(8)]
    assert topo["matrix"]["GPU0"]["GPU3"] == "NODE"
    assert topo["matrix"]["GPU0"]["GPU4"] == "SYS"
    assert topo["matrix"]["GPU7"]["GPU6"] == "NODE"
    assert not any(link.startswith("NV") for row in topo["matrix"].values() for link in row.values())
    assert topo["affinity"]["GPU5"] == {"cpu_affinity": "48-95,144-191", "numa_affinity": "1", "gpu_numa_id": None}


def test_topo_unknown_link_type():
    with pytest.raises(NvidiaParseError, match="row GPU1 does not hold 8 link types"):
        parse_topo_matrix(read(BAD / "topo.txt"))


def test_topo_garbage():
    with pytest.raises(NvidiaParseError, match="no header line naming GPU0"):
        parse_topo_matrix(read(BAD / "garbage.txt"))


# --------------------------------------------------------------------------- failures, device nodes


@pytest.mark.parametrize(
    ("rc", "output", "kind"),
    [
        (9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", "driver_not_loaded"),
        (18, "Failed to initialize NVML: Driver/library version mismatch\n", "version_mismatch"),
        (6, "No devices were found\n", "no_devices"),
        (2, 'Field "x" is not a valid field to query.', "other"),
    ],
)
def test_classify_failure(rc, output, kind):
    assert classify_smi_failure(rc, output) == kind


def test_describe_device_nodes_keeps_char_devices_only():
    chr_mode = stat.S_IFCHR | 0o666
    nodes = describe_device_nodes(
        [
            ("/dev/nvidiactl", chr_mode, os.makedev(195, 255)),
            ("/dev/nvidia0", chr_mode, os.makedev(195, 0)),
            ("/dev/nvidia-caps", stat.S_IFDIR | 0o755, 0),
            ("/dev/nvidia-uvm", chr_mode, os.makedev(510, 0)),
        ]
    )
    assert nodes == [
        {"path": "/dev/nvidia-uvm", "major": 510, "minor": 0},
        {"path": "/dev/nvidia0", "major": 195, "minor": 0},
        {"path": "/dev/nvidiactl", "major": 195, "minor": 255},
    ]


# --------------------------------------------------------------------------- the stand-in vs real captures


@pytest.mark.parametrize(
    ("args", "capture"),
    [
        (
            [
                "--query-gpu=index,name,uuid,pci.bus_id,driver_version,compute_cap,memory.total,power.limit,"
                "power.max_limit,power.draw,utilization.gpu,clocks.current.sm,clocks.max.sm,pcie.link.gen.max,"
                "pcie.link.width.max,persistence_mode,temperature.gpu",
                "--format=csv",
            ],
            "query-gpu.csv",
        ),
        (["-L"], "L.txt"),
        (["topo", "-m"], "topo.txt"),
        (["--version"], "nvidia-smi-version.txt"),
        (["--query-gpu=index,total_energy_consumption", "--format=csv"], "query-invalid-field.txt"),
    ],
)
def test_standin_reproduces_real_capture_bytes(args, capture):
    assert run_standin(*args).stdout == read(H200 / capture)


def test_standin_plain_table_and_q_header_match_real_capture(tmp_path):
    state = tmp_path / "state.json"
    state.write_text('{"gpus": {"0": {"temperature_gpu": 35, "power_draw_w": 124}}}', encoding="utf-8")
    assert run_standin(env={"STANDIN_NVIDIA_SMI_STATE": str(state)}).stdout == read(H200 / "nvidia-smi.txt")
    real_q = read(H200 / "nvidia-smi-q-compute.txt").splitlines()
    assert run_standin("-q", "-d", "COMPUTE").stdout.splitlines()[4:] == real_q[4:]  # all but the timestamp


def test_standin_telemetry_header_and_units_match_real_capture():
    fields = ",".join([*TELEMETRY_FIELDS, "power.draw", "power.draw.average"])
    out = run_standin(f"--query-gpu={fields}", "--format=csv", env={"STANDIN_NVIDIA_SMI_MAX_SAMPLES": "1"}).stdout
    assert out.splitlines()[0] == read(H200 / "telemetry-header.csv").splitlines()[0]


def test_standin_query_parses_like_sm120_fixture():
    out = run_standin(
        f"--query-gpu={','.join(GPU_INFO_FIELDS)}", "--format=csv,noheader,nounits", profile="rtxpro6000-8gpu"
    )
    assert parse_gpu_query(out.stdout) == parse_gpu_query(read(RTX / "query-gpu.csv"))


def test_standin_lms_loop_is_bounded_and_parses():
    out = run_standin(
        f"--query-gpu={','.join(TELEMETRY_FIELDS)}",
        "--format=csv,noheader,nounits",
        "-lms",
        "50",
        profile="rtxpro6000-8gpu",
        env={"STANDIN_NVIDIA_SMI_MAX_SAMPLES": "3"},
    )
    rows = [row for line in out.stdout.splitlines() if (row := parse_sample_line(line)) is not None]
    assert len(rows) == 24
    assert [row["index"] for row in rows[:8]] == list(range(8))


def profile_with_proc(tmp_path: Path, name: str, proc_version_path: str | Path) -> Path:
    """A copy of a stand-in profile whose simulated kernel module reports itself at proc_version_path."""
    data = json.loads(read(PROFILES / name))
    data["proc_version_path"] = str(proc_version_path)
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps(data), encoding="utf-8")
    return profile


def test_standin_not_loaded_exits_9(tmp_path):
    profile = profile_with_proc(tmp_path, "rtxpro6000-8gpu.json", "/nonexistent/v")
    result = run_standin("-L", env={"STANDIN_NVIDIA_SMI_PROFILE": str(profile)})
    assert result.returncode == 9
    assert "couldn't communicate with the NVIDIA driver" in result.stdout


def test_standin_version_mismatch_exits_18(tmp_path):
    # a 570 userspace over the 580.159.04 kernel module
    profile = profile_with_proc(tmp_path, "rtxpro6000-570.json", RTX / "proc-version.txt")
    result = run_standin("-L", env={"STANDIN_NVIDIA_SMI_PROFILE": str(profile)})
    assert result.returncode == 18
    assert "Driver/library version mismatch" in result.stdout


def test_standin_pointer_file(tmp_path):
    pointer = tmp_path / "nvidia-smi.json"
    pointer.write_text(f'{{"profile": "{PROFILES / "rtxpro6000-570.json"}"}}', encoding="utf-8")
    result = run_standin("--version", env={"STANDIN_NVIDIA_SMI_PROFILE": str(pointer)})
    assert "DRIVER version      : 570.195.03" in result.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod of character devices needs root")
def test_scan_device_nodes_names_nodes_as_under_dev(tmp_path):
    os.mknod(tmp_path / "nvidia0", 0o666 | stat.S_IFCHR, os.makedev(195, 0))
    os.mknod(tmp_path / "nvidia-uvm", 0o666 | stat.S_IFCHR, os.makedev(238, 0))
    (tmp_path / "nvidia-caps").mkdir()
    os.mknod(tmp_path / "nvidia-caps" / "nvidia-cap1", 0o400 | stat.S_IFCHR, os.makedev(241, 1))
    (tmp_path / "nvidia-notadevice").write_text("")
    (tmp_path / "sda").write_text("")
    found = scan_device_nodes(str(tmp_path), name_as="/dev")
    assert found == [
        {"path": "/dev/nvidia-caps/nvidia-cap1", "major": 241, "minor": 1},
        {"path": "/dev/nvidia-uvm", "major": 238, "minor": 0},
        {"path": "/dev/nvidia0", "major": 195, "minor": 0},
    ]
    assert scan_device_nodes(str(tmp_path))[0]["path"] == str(tmp_path / "nvidia-caps" / "nvidia-cap1")
