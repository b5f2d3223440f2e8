# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""NCCL settings derived from the GPU links ``nvidia-smi topo -m`` reports (stdlib only).

Input is the topology :func:`nvidia_smi.parse_topo_matrix` returns (what ``nvidia_gpu_info``
publishes as ``topology``). Facts and sources: docs/sm120.md, "NCCL on PCIe-only boxes".

- Any NVLink between two GPUs (``NV<n>``): no settings; NCCL's own choice is right there.
- Only PCIe between the GPUs (8 x RTX PRO 6000 has no NVLink): ``NCCL_P2P_LEVEL`` set to the
  farthest GPU-to-GPU path, so that NCCL keeps peer-to-peer transfers on every pair instead of
  falling back to host memory for the pairs across the CPU sockets, and ``NCCL_IB_DISABLE=1``
  (one node: no InfiniBand/RoCE transport to probe).
- One GPU, or no topology: no settings.
"""

from __future__ import annotations

import re

# nvidia-smi's PCIe path types, nearest first (its legend: PIX one bridge, PXB several bridges,
# PHB through a host bridge, NODE between host bridges of one NUMA node, SYS across NUMA nodes;
# SOC is the old name of SYS).
PCIE_PATHS: tuple[str, ...] = ("PIX", "PXB", "PHB", "NODE", "SYS")
_ALIASES = {"SOC": "SYS"}
# NCCL_P2P_LEVEL accepts LOC, NVL, PIX, PXB, PHB, SYS: NCCL's PHB means "same NUMA node, through the
# CPU", which is nvidia-smi's NODE as well as its PHB.
_NCCL_LEVEL = {"PIX": "PIX", "PXB": "PXB", "PHB": "PHB", "NODE": "PHB", "SYS": "SYS"}
_NVLINK_RE = re.compile(r"^NV\d+$")


class NcclTopologyError(ValueError):
    """The topology holds a GPU-to-GPU link type this module cannot place."""


def gpu_links(topology: dict | None) -> list[str]:
    """Link types between distinct GPUs (NIC rows and columns left out), row by row."""
    if not topology:
        return []
    gpus = topology.get("gpus") or []
    matrix = topology.get("matrix") or {}
    return [matrix[gpu][peer] for gpu in gpus for peer in gpus if peer != gpu and peer in matrix.get(gpu, {})]


def link_summary(topology: dict | None) -> dict:
    """``{"gpu_count", "nvlink", "pcie_farthest"}`` from a parsed ``topo -m``.

    ``nvlink``: some pair of GPUs is joined by NVLink. ``pcie_farthest``: the farthest PCIe path
    between two GPUs (``PIX`` ... ``SYS``), or None without a PCIe pair.
    """
    links = gpu_links(topology)
    pcie = []
    for link in links:
        if _NVLINK_RE.match(link):
            continue
        name = _ALIASES.get(link, link)
        if name not in PCIE_PATHS:
            raise NcclTopologyError(
                f"unknown GPU-to-GPU link type {link!r} in nvidia-smi topo -m "
                f"(known: {', '.join(PCIE_PATHS)}, SOC, NV<n>)"
            )
        pcie.append(name)
    return {
        "gpu_count": len((topology or {}).get("gpus") or []),
        "nvlink": any(_NVLINK_RE.match(link) for link in links),
        "pcie_farthest": max(pcie, key=PCIE_PATHS.index) if pcie else None,
    }


def nccl_env(topology: dict | None) -> dict[str, str]:
    """NCCL environment for a one-node tensor-parallel server on this topology (see module docstring)."""
    summary = link_summary(topology)
    if summary["gpu_count"] < 2 or summary["nvlink"] or summary["pcie_farthest"] is None:
        return {}
    return {"NCCL_P2P_LEVEL": _NCCL_LEVEL[summary["pcie_farthest"]], "NCCL_IB_DISABLE": "1"}
