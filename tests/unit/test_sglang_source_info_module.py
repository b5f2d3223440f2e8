"""sglang_source_info module shell: run as Ansible runs it (args file), on real and broken input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from integration.sglang_wheels import install_wheel

REPO = Path(__file__).resolve().parents[2]
MODULE = REPO / "plugins" / "modules" / "sglang_source_info.py"


def run_module(args: dict, tmp_path: Path) -> tuple[int, dict]:
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "collections"), *sys.path]))
    proc = subprocess.run(
        [sys.executable, str(MODULE), str(args_file)], check=False, capture_output=True, text=True, env=env
    )
    return proc.returncode, json.loads(proc.stdout)


def test_reports_facts_of_real_wheel(tmp_path):
    root = install_wheel("0.5.12.post1", tmp_path / "sp")
    rc, result = run_module({"path": str(root)}, tmp_path)
    assert rc == 0, result
    assert result["changed"] is False
    assert result["version"] == "0.5.12.post1"
    assert result["layout"] == "model_runner"
    assert result["commented_backends"] == ["flashinfer_trtllm_routed", "flashinfer_cutlass"]


def test_requires_path(tmp_path):
    rc, result = run_module({}, tmp_path)
    assert rc != 0
    assert "missing required arguments: path" in result["msg"]


def test_rejects_unknown_option(tmp_path):
    rc, result = run_module({"path": str(tmp_path), "pth": "x"}, tmp_path)
    assert rc != 0
    assert "pth" in result["msg"]


def test_unknown_layout_fails_clearly(tmp_path):
    root = install_wheel("0.5.23", tmp_path / "sp")
    (root / "sglang/srt/model_executor/runner/flashinfer_autotune.py").unlink()
    rc, result = run_module({"path": str(root)}, tmp_path)
    assert rc != 0
    assert result["failed"] is True
    assert "unknown SGLang autotune layout" in result["msg"]
    assert "SGLang 0.5.23" in result["msg"]
    assert "sglang/srt/model_executor/runner/flashinfer_autotune.py" in result["msg"]
