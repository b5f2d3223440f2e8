"""The collection as a user gets it: `ansible-galaxy collection build` makes a tarball that
installs, and its modules and roles run by FQCN from the installed copy (not the checkout).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(shutil.which("ansible-galaxy") or "ansible-galaxy").parent
FIXTURES = REPO / "tests" / "unit" / "fixtures" / "nvidia" / "rtxpro6000-8gpu"

PLAY = """
- hosts: localhost
  connection: local
  gather_facts: true
  gather_subset: [min]
  tasks:
    - name: The module runs by FQCN on the stand-in nvidia-smi and a /proc capture
      gpufleet.sglang.nvidia_gpu_info:
        nvidia_smi_path: {smi}
        proc_version_path: {proc_version}
        proc_devices_path: {proc_devices}
        dev_dir: {dev_dir}
        topology: false
      register: info
      environment:
        STANDIN_NVIDIA_SMI_PROFILE: {profile}

    - name: Show what it found
      ansible.builtin.copy:
        content: "{{{{ info | to_json }}}}"
        dest: {out}
        mode: "0644"

    - name: The role resolves by FQCN and refuses a driver too old for SM120
      block:
        - name: Apply nvidia_driver with 560
          ansible.builtin.include_role:
            name: gpufleet.sglang.nvidia_driver
          vars:
            nvidia_driver_version: "560.35.03"
        - name: Not refused
          ansible.builtin.fail:
            msg: nvidia_driver accepted 560.35.03
      rescue:
        - name: Refused with the version named
          ansible.builtin.assert:
            that: "'driver 560.35.03 does not support the RTX PRO 6000 Blackwell' in ansible_failed_result.msg"
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("galaxy")
    subprocess.run(
        [BIN / "ansible-galaxy", "collection", "build", "--output-path", str(work), str(REPO)],
        check=True,
        capture_output=True,
        text=True,
    )
    tarballs = list(work.glob("gpufleet-sglang-*.tar.gz"))
    assert len(tarballs) == 1, tarballs
    with tarfile.open(tarballs[0]) as tar:
        names = tar.getnames()
    # what a user needs is in; what only this checkout needs is out
    assert "roles/nvidia_driver/tasks/main.yml" in names
    assert "plugins/modules/nvidia_gpu_info.py" in names
    assert not [n for n in names if n.startswith(("collections/", ".venv/", ".cache/", ".git/"))]
    target = work / "installed"
    subprocess.run(
        [
            BIN / "ansible-galaxy",
            "collection",
            "install",
            "--offline",
            "--no-deps",
            "--force",
            "-p",
            str(target),
            str(tarballs[0]),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    assert (target / "ansible_collections" / "gpufleet" / "sglang" / "MANIFEST.json").is_file()
    return target


def test_built_collection_runs_by_fqcn(installed: Path, tmp_path: Path) -> None:
    out = tmp_path / "info.json"
    play = tmp_path / "play.yml"
    play.write_text(
        PLAY.format(
            smi=REPO / "tests" / "standins" / "nvidia-smi",
            profile=REPO / "tests" / "standins" / "nvidia" / "profiles" / "rtxpro6000-8gpu.json",
            proc_version=FIXTURES / "proc-version.txt",
            proc_devices=FIXTURES / "proc-devices.txt",
            dev_dir=tmp_path,
            out=out,
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    # only the installed copy: no ansible.cfg from the checkout, no collections/ symlink
    (tmp_path / "ansible.cfg").write_text(f"[defaults]\ninterpreter_python = {sys.executable}\n")
    env.update(
        ANSIBLE_COLLECTIONS_PATH=str(installed),
        ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"),
        ANSIBLE_ROLES_PATH=str(tmp_path),
    )
    result = subprocess.run(
        [BIN / "ansible-playbook", "-i", "localhost,", str(play)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert (
        str(installed)
        in subprocess.run(
            [BIN / "ansible-galaxy", "collection", "list", "gpufleet.sglang", "-p", str(installed)],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        ).stdout
    )
    info = json.loads(out.read_text())
    assert info["gpu_count"] == 8
    assert {gpu["compute_cap"] for gpu in info["gpus"]} == {"12.0"}
    assert info["kernel_module"]["type"] == "open"
