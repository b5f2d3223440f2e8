# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""NCCL defaults derived from `nvidia-smi topo -m`: PCIe-only boxes get P2P level + IB off, NVLink gets nothing."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from lib.nvidia import FIX, PROFILES, run_standin

from ansible_collections.gpufleet.sglang.plugins.module_utils.nvidia.nccl import (
    NcclTopologyError,
    link_summary,
    nccl_env,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.nvidia.smi import parse_topo_matrix

RTX_PROFILE = PROFILES / "rtxpro6000-8gpu.json"


def topo(path: Path) -> dict:
    return parse_topo_matrix(path.read_text(encoding="utf-8"))


def standin_topo(tmp_path: Path, profile: dict) -> dict:
    """`nvidia-smi topo -m` as the stand-in prints it (the real format) for a profile, parsed."""
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(profile), encoding="utf-8")
    done = run_standin("topo", "-m", profile=path)
    done.check_returncode()
    return parse_topo_matrix(done.stdout)


def rtx_profile() -> dict:
    return json.loads(RTX_PROFILE.read_text(encoding="utf-8"))


def test_eight_pcie_gpus_on_two_sockets_get_p2p_across_sockets_and_no_ib():
    topology = topo(FIX / "rtxpro6000-8gpu/topo.txt")
    assert link_summary(topology) == {"gpu_count": 8, "nvlink": False, "pcie_farthest": "SYS"}
    assert nccl_env(topology) == {"NCCL_P2P_LEVEL": "SYS", "NCCL_IB_DISABLE": "1"}


def test_real_single_h200_capture_needs_nothing():
    # the real H200 capture is a one-GPU host: no GPU pair, so no inter-GPU setting
    topology = topo(FIX / "h200-580/topo.txt")
    assert link_summary(topology) == {"gpu_count": 1, "nvlink": False, "pcie_farthest": None}
    assert nccl_env(topology) == {}


def test_nvlink_box_gets_nothing(tmp_path):
    # an HGX H200 board: every GPU pair joined by 18 NVLinks (NV18), printed in the real format
    profile = rtx_profile()
    matrix = profile["topology"]["matrix"]
    profile["topology"]["matrix"] = [["X" if i == j else "NV18" for j in range(8)] for i in range(8)]
    assert matrix != profile["topology"]["matrix"]
    topology = standin_topo(tmp_path, profile)
    assert topology["matrix"]["GPU0"]["GPU7"] == "NV18"
    assert link_summary(topology)["nvlink"] is True
    assert nccl_env(topology) == {}


def test_one_numa_node_maps_node_to_nccls_phb(tmp_path):
    # GPUs 0-3 of the 8-GPU box share NUMA node 0: nvidia-smi says NODE, NCCL calls that PHB
    profile = rtx_profile()
    four = copy.deepcopy(profile)
    four["gpus"] = profile["gpus"][:4]
    four["topology"] = {key: values[:4] for key, values in profile["topology"].items()}
    four["topology"]["matrix"] = [row[:4] for row in profile["topology"]["matrix"][:4]]
    topology = standin_topo(tmp_path, four)
    assert topology["gpus"] == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert nccl_env(topology) == {"NCCL_P2P_LEVEL": "PHB", "NCCL_IB_DISABLE": "1"}


def test_no_topology_needs_nothing():
    assert nccl_env(None) == {}
    assert link_summary(None) == {"gpu_count": 0, "nvlink": False, "pcie_farthest": None}


def test_nics_are_not_gpu_links():
    topology = {
        "gpus": ["GPU0", "GPU1"],
        "nics": ["NIC0"],
        "matrix": {
            "GPU0": {"GPU1": "PIX", "NIC0": "SYS"},
            "GPU1": {"GPU0": "PIX", "NIC0": "SYS"},
            "NIC0": {"GPU0": "SYS", "GPU1": "SYS"},
        },
    }
    assert nccl_env(topology) == {"NCCL_P2P_LEVEL": "PIX", "NCCL_IB_DISABLE": "1"}


def test_unknown_link_type_is_named():
    topology = {"gpus": ["GPU0", "GPU1"], "matrix": {"GPU0": {"GPU1": "XYZ"}, "GPU1": {"GPU0": "XYZ"}}}
    with pytest.raises(NcclTopologyError, match="unknown GPU-to-GPU link type 'XYZ'"):
        nccl_env(topology)
