#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nvidia_gpu_info
short_description: Report the NVIDIA kernel module, userspace driver, GPUs, device nodes and topology
version_added: "0.1.0"
description:
  - Reads C(/proc/driver/nvidia/version) (kernel module version and type, open or proprietary) and
    C(/proc/devices) (character device majors such as C(nvidia), C(nvidia-uvm), C(nvidia-caps)).
  - Stats the character device nodes C(<dev_dir>/nvidia*) and C(<dev_dir>/nvidia-caps/*).
  - Runs C(nvidia-smi --query-gpu=... --format=csv,noheader,nounits), C(nvidia-smi -q -d COMPUTE)
    (CUDA version) and, unless O(topology=false), C(nvidia-smi topo -m).
  - Read-only; it never changes the host and runs in check mode.
  - Fails clearly when nvidia-smi is missing, when the kernel module is not loaded (nvidia-smi exit 9),
    when userspace and kernel module versions differ, or when output cannot be parsed. With
    O(require_driver=false) the first three are reported instead (with a warning), so a role can learn
    the current state before installing a driver.
author:
  - gpufleet.sglang contributors (!UNKNOWN)
options:
  proc_version_path:
    description: Path of the kernel module's version file.
    type: path
    default: /proc/driver/nvidia/version
  proc_devices_path:
    description: Path of the kernel's device major list.
    type: path
    default: /proc/devices
  dev_dir:
    description: Directory holding the device nodes (C(nvidia0), C(nvidiactl), C(nvidia-uvm), C(nvidia-caps/)).
    type: path
    default: /dev
  topology:
    description: Also run C(nvidia-smi topo -m) and return the P2P matrix.
    type: bool
    default: true
  require_driver:
    description:
      - Fail when nvidia-smi is missing, the kernel module is not loaded, or userspace and kernel module
        versions differ.
      - With V(false) the module reports what it found (for example RV(kernel_module.loaded=false),
        RV(driver_version=null)) and warns instead. So does a failing or unparsable C(nvidia-smi topo -m),
        leaving RV(topology) null with a warning that says why (with V(true) it fails the task).
    type: bool
    default: true
extends_documentation_fragment:
  - gpufleet.sglang.read_only
  - gpufleet.sglang.nvidia_smi
notes:
  - Compute capability is returned as a string (V("12.0") for RTX PRO 6000 Blackwell, SM120).
"""

EXAMPLES = r"""
- name: Learn the driver state before installing (does not fail without a driver)
  gpufleet.sglang.nvidia_gpu_info:
    require_driver: false
    topology: false
  register: __nvidia_driver_before

- name: Verify the installed driver
  gpufleet.sglang.nvidia_gpu_info:
  register: __nvidia_driver_info

- name: Assert open kernel module, matching userspace and eight SM120 GPUs
  ansible.builtin.assert:
    that:
      - __nvidia_driver_info.kernel_module.type == 'open'
      - __nvidia_driver_info.kernel_module.version == __nvidia_driver_info.driver_version
      - __nvidia_driver_info.gpu_count == 8
      - __nvidia_driver_info.gpus | map(attribute='compute_cap') | unique == ['12.0']
"""

RETURN = r"""
kernel_module:
  description: The loaded NVIDIA kernel module.
  returned: always
  type: dict
  contains:
    loaded:
      description: Whether the kernel module is loaded (its version file exists or nvidia-smi reached it).
      type: bool
    version:
      description: Kernel module version from the version file; null when not loaded or not readable.
      type: str
      sample: "580.159.04"
    type:
      description: The kernel module type, V(open) or V(proprietary); null when not loaded.
      type: str
      sample: open
driver_version:
  description: Userspace driver version reported by nvidia-smi; null without a working nvidia-smi.
  returned: always
  type: str
  sample: "580.159.04"
cuda_version:
  description: Highest CUDA version the driver supports, from the nvidia-smi header; null without nvidia-smi.
  returned: always
  type: str
  sample: "13.0"
gpu_count:
  description: Number of GPUs nvidia-smi reports.
  returned: always
  type: int
  sample: 8
gpus:
  description: One record per GPU.
  returned: always
  type: list
  elements: dict
  contains:
    index: {description: GPU index, type: int}
    name: {description: Product name, type: str, sample: NVIDIA RTX PRO 6000 Blackwell Server Edition}
    uuid: {description: GPU UUID, type: str}
    pci_bus_id: {description: PCI bus id, type: str, sample: "00000000:01:00.0"}
    compute_cap: {description: Compute capability, type: str, sample: "12.0"}
    memory_total_mib: {description: Total memory in MiB, type: int, sample: 97887}
    power_limit_w: {description: Current power limit in W, type: float, sample: 600.0}
    power_max_limit_w: {description: Maximum power limit in W, type: float, sample: 600.0}
    persistence_mode: {description: Persistence mode enabled, type: bool}
    pcie_gen_max: {description: Maximum PCIe generation, type: int, sample: 5}
    pcie_width_max: {description: Maximum PCIe link width, type: int, sample: 16}
device_majors:
  description: NVIDIA character device majors from /proc/devices (dynamic ones such as nvidia-uvm included).
  returned: always
  type: dict
  sample: {"nvidia": 195, "nvidiactl": 195, "nvidia-uvm": 238, "nvidia-caps": 241}
device_nodes:
  description: Character device nodes under dev_dir named nvidia* and under dev_dir/nvidia-caps/.
  returned: always
  type: list
  elements: dict
  sample: [{"path": "/dev/nvidia0", "major": 195, "minor": 0}]
topology:
  description:
    - P2P matrix from nvidia-smi topo -m (C(X) self cells left out), with CPU/NUMA affinity per GPU.
    - Null when O(topology=false), when no GPU is reported, or when C(nvidia-smi topo -m) failed with
      O(require_driver=false) (a warning says why).
  returned: always
  type: dict
  sample: {"gpus": ["GPU0", "GPU1"], "nics": [], "matrix": {"GPU0": {"GPU1": "NODE"}, "GPU1": {"GPU0": "NODE"}},
           "affinity": {"GPU0": {"cpu_affinity": "0-47", "numa_affinity": "0", "gpu_numa_id": null}}}
links:
  description:
    - What the P2P matrix says about the links between GPUs.
    - C(nvlink) is true when some pair of GPUs is joined by NVLink (C(NV<n>) cells); C(pcie_farthest)
      is the farthest PCIe path between two GPUs (C(PIX), C(PXB), C(PHB), C(NODE), C(SYS)), null
      without a PCIe pair. Null where RV(topology) is null.
  returned: always
  type: dict
  sample: {"gpu_count": 8, "nvlink": false, "pcie_farthest": "SYS"}
nccl_env:
  description:
    - NCCL environment derived from the links for a one-node tensor-parallel server; empty with
      NVLink, one GPU or no topology.
    - PCIe-only GPUs get C(NCCL_P2P_LEVEL) (the farthest path, in NCCL's names) and C(NCCL_IB_DISABLE=1).
  returned: always
  type: dict
  sample: {"NCCL_P2P_LEVEL": "SYS", "NCCL_IB_DISABLE": "1"}
"""


from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.sglang.plugins.module_utils.nvidia.gpu_info import (
    GpuInfoFailure,
    collect,
    empty_result,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.nvidia.host_calls import host_calls

ARGUMENT_SPEC = {
    "nvidia_smi_path": {"type": "str", "default": "nvidia-smi"},
    "proc_version_path": {"type": "path", "default": "/proc/driver/nvidia/version"},
    "proc_devices_path": {"type": "path", "default": "/proc/devices"},
    "dev_dir": {"type": "path", "default": "/dev"},
    "topology": {"type": "bool", "default": True},
    "require_driver": {"type": "bool", "default": True},
}


def run_module() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)

    which, run = host_calls(module)

    result = empty_result()
    warnings: list[str] = []
    failure = None
    try:
        collect(result, module.params, which, run, warnings)
    except GpuInfoFailure as exc:
        failure = exc
    for warning in warnings:
        module.warn(warning)
    if failure is not None:
        if failure.driver and not module.params["require_driver"]:
            module.warn(str(failure))  # a host without the driver, on purpose: what was learnt is the result
        else:
            module.fail_json(msg=str(failure), **failure.extra, **result)
    module.exit_json(**result)


def main() -> None:
    run_module()


if __name__ == "__main__":
    main()
