# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""playbooks/tasks/gateway_out.yml's first step, run for real: before a restart, the node's Proxmox host
reads the snapshot the node's server loads into its page cache (role model_store, entry point page_cache),
with one line per batch, a summary line and no change; in check mode it only plans; it is skipped for the
gate's detour, with sglang_rollout_page_cache false, and for a model outside the store.

Both hosts are this machine (connection local), with no gateway (the detour's gateway steps skip)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml
from lib.playbook import Result, run_playbook

REPO = Path(__file__).resolve().parents[2]
COMMIT = "0123456789abcdef0123456789abcdef01234567"
SNAPSHOT = f"gpufleet-test/tiny-moe/{COMMIT}"
PLAN = "Plan the page-cache warm-up of"


def store_with_snapshot(store: Path) -> None:
    base = store / SNAPSHOT
    base.mkdir(parents=True)
    files = {
        "config.json": b"{}",
        "model-00001-of-00002.safetensors": b"a" * 3000,
        "model-00002-of-00002.safetensors": b"b" * 3000,
    }
    for name, data in files.items():
        (base / name).write_bytes(data)
    entries = [{"path": n, "size": len(d), "sha256": "", "oid": "1" * 40} for n, d in files.items()]
    (base / ".gpufleet-model.json").write_text(
        json.dumps({"repo": "gpufleet-test/tiny-moe", "commit": COMMIT, "files": entries})
    )


def play(tmp_path: Path, check: bool = False, **given: object) -> Result:
    store = tmp_path / "store"
    if not store.exists():
        store_with_snapshot(store)
    play_vars = {
        "__rollout_via_gateway": False,
        "__rollout_out_of_gateway": False,
        "__rollout_leaving_stage": "deploying",
        "sglang_server_model_store_mount": "/srv/models",
        "sglang_server_model_path": f"/srv/models/{SNAPSHOT}",
        "model_store_page_cache_batch_bytes": 2500,
        **given,
    }
    tasks = [{"name": "Detour", "ansible.builtin.include_tasks": str(REPO / "playbooks/tasks/gateway_out.yml")}]
    (tmp_path / "play.yml").write_text(
        yaml.safe_dump([{"hosts": "node1", "gather_facts": False, "vars": play_vars, "tasks": tasks}]), encoding="utf-8"
    )
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inv = {
        "all": {
            "hosts": {
                "node1": {**local, "proxmox_host": "pve1"},
                # the host's store is elsewhere than the container's mount: the host's own value is used
                "pve1": {**local, "model_store_dir": str(store)},
            }
        }
    }
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inv), encoding="utf-8")
    env = {"ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default"}
    return run_playbook(tmp_path / "play.yml", inventory=tmp_path / "hosts.yml", env=env, check=check, timeout=300)


def flat(result: Result) -> str:
    """The output with every run of blanks as one space (the callback wraps long messages)."""
    return " ".join(result.stdout.split())


def recap_changed(result: Result) -> int:
    return int(re.search(r"node1\s+: ok=\d+\s+changed=(\d+)", result.stdout).group(1))


def test_the_host_warms_the_snapshot_before_the_restart_with_progress_and_no_change(tmp_path):
    result = play(tmp_path).expect(0)
    out = flat(result)
    # one line per batch of 2,500 bytes of the 6,002, read on the node's host
    for label in ("batch 1 of 3:", "batch 2 of 3:", "batch 3 of 3:"):
        assert f"ok: [node1 -> pve1] => (item={label}" in out, result.tail()
    assert f"{SNAPSHOT}: read 0.0 MiB of 3 file(s) into the page cache in" in out, result.tail()
    assert "0.0 MiB left out for the memory bound" in out
    assert recap_changed(result) == 0


def test_check_mode_plans_and_reads_nothing(tmp_path):
    result = play(tmp_path, check=True).expect(0)
    assert f"{SNAPSHOT}: would read 0.0 MiB of 3 file(s) into the page cache, 0.0 MiB left out" in flat(result)
    # the batches are skipped: nothing is read
    assert "ok: [node1 -> pve1] => (item=batch" not in result.stdout


@pytest.mark.parametrize(
    "given",
    [
        {"sglang_rollout_page_cache": False},
        {"__rollout_detour_for": "gate"},
        {"sglang_server_model_path": "/opt/models/own"},
    ],
)
def test_no_warm_up_when_off_for_the_gate_or_outside_the_store(tmp_path, given):
    result = play(tmp_path, **given).expect(0)
    assert PLAN not in result.stdout, result.tail()
    assert "Read the model into the page cache of the node's host while the node still serves] ***" in result.stdout
    assert "model_store_page_cache" not in result.stdout


# A node whose container's restart is pending (role proxmox_lxc_gpu): the detour before a restart restarts the
# container on the node's Proxmox host, after the drain; the gate's detour does not. Check mode only says so.
PENDING = {"vmid": 101, "hostname": "lab-sglang1", "platform": "lxc", "config": "/var/lib/lxc/lab-sglang1/config"}


def test_a_pending_container_restart_runs_on_the_nodes_host_after_the_drain(tmp_path):
    result = play(tmp_path, check=True, proxmox_lxc_gpu_pending=PENDING).expect(0)
    out = flat(result)
    assert "ok: [node1 -> pve1] => msg: Would restart container 101 (lab-sglang1)" in out, result.tail()
    assert out.index("Wait until the node runs and queues nothing") < out.index("Would restart container 101")


def test_the_gates_detour_restarts_no_container(tmp_path):
    result = play(tmp_path, check=True, proxmox_lxc_gpu_pending=PENDING, __rollout_detour_for="gate").expect(0)
    assert "restart container" not in flat(result), result.tail()
