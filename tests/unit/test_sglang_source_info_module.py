"""sglang_source_info module shell: run as Ansible runs it (args file), on real and broken input."""

from __future__ import annotations

import json
from pathlib import Path

from lib.module import run_module as run_module_at
from lib.sglang_wheels import install_wheel

REPO = Path(__file__).resolve().parents[2]
MODULE = REPO / "plugins" / "modules" / "sglang_source_info.py"


def run_module(args: dict, tmp_path: Path) -> tuple[int, dict]:
    return run_module_at(MODULE, args, tmp_path)


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


MODEL_RUNNER = "sglang/srt/model_executor/model_runner.py"
DECISION = "    def _should_run_flashinfer_autotune(self"


def _no_traceback(result: dict) -> None:
    text = json.dumps(result)
    assert "Traceback" not in text
    assert "Module failed" not in result["msg"]


def _record_path(root: Path) -> Path:
    return next(root.glob("sglang-*.dist-info")) / "RECORD"


def test_method_defined_twice_fails_naming_file_and_lines(tmp_path):
    root = install_wheel("0.5.12.post1", tmp_path / "sp")
    target = root / MODEL_RUNNER
    text = target.read_text(encoding="utf-8")
    first = text[: text.index(DECISION)].count("\n") + 1
    # a stale copy before the real method: Python uses the real (last) one, the old reader took the first
    target.write_text(
        text.replace(
            DECISION, "    def _should_run_flashinfer_autotune(self):\n        return False\n\n" + DECISION, 1
        ),
        encoding="utf-8",
    )
    before = target.read_bytes()
    rc, result = run_module({"path": str(root)}, tmp_path)
    assert rc != 0
    _no_traceback(result)
    assert f"{MODEL_RUNNER} (SGLang 0.5.12.post1)" in result["msg"]
    assert f"ModelRunner._should_run_flashinfer_autotune is bound 2 times (lines {first}, {first + 3})" in result["msg"]
    assert target.read_bytes() == before


def test_backend_list_with_non_literal_entry_fails_naming_the_line(tmp_path):
    root = install_wheel("0.5.8", tmp_path / "sp")
    target = root / MODEL_RUNNER
    text = target.read_text(encoding="utf-8")
    entry = '            "flashinfer_mxfp4",\n'
    line = text[: text.index(entry)].count("\n") + 1
    target.write_text(text.replace(entry, "            FLASHINFER_EXTRA,\n", 1), encoding="utf-8")
    rc, result = run_module({"path": str(root)}, tmp_path)
    assert rc != 0
    _no_traceback(result)
    assert f"{MODEL_RUNNER} (SGLang 0.5.8)" in result["msg"]
    assert f"(line {line}: FLASHINFER_EXTRA); cannot read it completely" in result["msg"]


def test_malformed_record_digest_fails_naming_record_line(tmp_path):
    root = install_wheel("0.5.12.post1", tmp_path / "sp")
    record = _record_path(root)
    rows = record.read_text().splitlines()
    index = next(i for i, row in enumerate(rows) if row.startswith(MODEL_RUNNER + ","))
    rows[index] = f"{MODEL_RUNNER},sha256=tooshort1,123"
    record.write_text("\n".join(rows) + "\n")
    rc, result = run_module({"path": str(root)}, tmp_path)
    assert rc != 0
    _no_traceback(result)
    assert (
        f"{record} line {index + 1}: sha256 digest 'tooshort1' of {MODEL_RUNNER} is not valid base64" in result["msg"]
    )


def test_deeply_nested_expression_fails_naming_the_limit(tmp_path):
    root = install_wheel("0.5.13", tmp_path / "sp")
    target = root / MODEL_RUNNER
    with target.open("a", encoding="utf-8") as handle:
        handle.write("\nDEEP = " + "-" * 300000 + "1\n")
    rc, result = run_module({"path": str(root)}, tmp_path)
    assert rc != 0
    _no_traceback(result)
    assert f"cannot parse {MODEL_RUNNER} (SGLang 0.5.13): the parser ran out of memory" in result["msg"]
