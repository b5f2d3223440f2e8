"""sglang_server's warm_collect and warm_restore entry points, run by ansible-playbook on localhost: the key
the role derives from its facts (FlashInfer's version read from the release), a collect on the canary, a
restore on the next node, and a key with a missing fact doing nothing."""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import sys
from pathlib import Path

import yaml
from lib.playbook import run_playbook
from lib.warm_cache import make_cache, tree

from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang import warm_cache as wc

NVIDIA_FACTS = {
    "driver_version": "580.95.05",
    "cuda_version": "13.0",
    "gpus": [{"name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "compute_cap": "12.0"}],
}


def playbook(tmp_path: Path, entry: str) -> Path:
    play = [
        {
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            "tasks": [
                {"ansible.builtin.include_role": {"name": "gpufleet.sglang.sglang_server", "tasks_from": entry}},
                {
                    "ansible.builtin.copy": {
                        "content": "{{ {'result': sglang_server_warm_cache_result | default({}),"
                        " 'key': __sglang_server_warm_key, 'missing': __sglang_server_warm_missing} | to_json }}",
                        "dest": str(tmp_path / f"{entry}.json"),
                        "mode": "0644",
                    }
                },
            ],
        }
    ]
    path = tmp_path / f"{entry}.yml"
    path.write_text(yaml.safe_dump(play))
    return path


def run(tmp_path: Path, entry: str, extra: dict) -> dict:
    extra = dict(extra, ansible_python_interpreter=sys.executable)
    run_playbook(playbook(tmp_path, entry), inventory="localhost,", extra_vars=extra).expect(0)
    return json.loads((tmp_path / f"{entry}.json").read_text())


def test_collect_on_the_canary_and_restore_on_the_next_node(tmp_path):
    cache, store, release = tmp_path / "cache", tmp_path / "store", tmp_path / "release"
    cache.mkdir()
    files = make_cache(cache)
    (release / "venv/lib/python3.11/site-packages/flashinfer_python-0.7.2.dist-info").mkdir(parents=True)
    extra = {
        "sglang_server_cache_dir": str(cache),
        "sglang_server_release_dir": str(release),
        "sglang_server_version": "0.5.23",
        "sglang_server_warm_cache_store": str(store),
        "sglang_server_warm_cache_key": {"model_revision": "0123abc"},
        "sglang_server_user": pwd.getpwuid(os.getuid()).pw_name,
        "sglang_server_group": grp.getgrgid(os.getgid()).gr_name,
        "nvidia_driver_facts": NVIDIA_FACTS,
    }
    collected = run(tmp_path, "warm_collect", extra)
    assert collected["missing"] == []
    assert collected["key"]["flashinfer_version"] == "0.7.2"
    assert collected["key"]["gpu_model"] == NVIDIA_FACTS["gpus"][0]["name"]
    assert collected["key"]["compute_capability"] == "12.0"
    assert collected["key"]["profile"] == "glm5_nvfp4_tp8"
    assert collected["result"]["action"] == "collected"
    assert wc.verify(collected["result"]["artifact"])["key"]["fields"] == collected["key"]

    shutil.rmtree(cache)
    restored = run(tmp_path, "warm_restore", extra)
    assert restored["result"]["action"] == "restored"
    on_disk = tree(cache)
    on_disk.pop(wc.MARKER)
    assert on_disk == files


def test_a_missing_fact_makes_it_a_no_op(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    make_cache(cache)
    extra = {
        "sglang_server_cache_dir": str(cache),
        "sglang_server_release_dir": str(tmp_path / "release"),
        "sglang_server_version": "0.5.23",
        "sglang_server_warm_cache_store": str(tmp_path / "store"),
    }
    seen = run(tmp_path, "warm_collect", extra)
    assert set(seen["missing"]) == {
        "flashinfer_version",
        "gpu_model",
        "compute_capability",
        "driver_version",
        "cuda_version",
        "model_revision",
    }
    assert seen["result"].get("skipped") is True
    assert not (tmp_path / "store").exists()
