"""sglang_source_info module shell: run as Ansible runs it (args file), on real and broken input."""

from __future__ import annotations

import json
import subprocess
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


def _kept_patch(root: Path, tmp_path: Path) -> Path:
    """A -p1 patch that adds a comment line to the autotune file (as a patch kept with a release would)."""
    original = (root / MODEL_RUNNER).read_text(encoding="utf-8")
    lines = original.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith(DECISION))
    changed = [*lines[:at], "    # gpufleet: kept patch\n", *lines[at:]]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "f").write_text(original, encoding="utf-8")
    (tmp_path / "b" / "f").write_text("".join(changed), encoding="utf-8")
    diff = subprocess.run(
        ["diff", "-u", "--label", f"a/{MODEL_RUNNER}", "--label", f"b/{MODEL_RUNNER}", "a/f", "b/f"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert diff.returncode == 1, diff.stderr
    patch = tmp_path / "flashinfer-autotune.patch"
    patch.write_text(diff.stdout, encoding="utf-8")
    return patch


def test_kept_patch_is_checked_only_when_every_wanted_backend_is_autotuned(tmp_path):
    """The reverse dry-run role sglang ran as a task of its own: true once the files hold the kept patch,
    false on the pristine file, null where it is not asked for or a wanted backend is not autotuned yet.
    It never changes the file."""
    root = install_wheel("0.5.12.post1", tmp_path / "sp")
    patch = _kept_patch(root, tmp_path)
    pristine = (root / MODEL_RUNNER).read_bytes()
    args = {"path": str(root), "wanted_backends": ["flashinfer_trtllm"], "kept_patch": str(patch)}
    rc, result = run_module(args, tmp_path)
    assert rc == 0, result
    assert result["kept_patch_reverses"] is False
    subprocess.run(["patch", "--batch", "-p1", "-d", str(root), "-i", str(patch)], check=True, capture_output=True)
    applied = (root / MODEL_RUNNER).read_bytes()
    rc, result = run_module(args, tmp_path)
    assert (rc, result["kept_patch_reverses"]) == (0, True), result
    assert (root / MODEL_RUNNER).read_bytes() == applied  # a dry run
    # flashinfer_cutlass is commented out in 0.5.12.post1: the role patches first, nothing to check yet
    rc, result = run_module(dict(args, wanted_backends=["flashinfer_trtllm", "flashinfer_cutlass"]), tmp_path)
    assert (rc, result["kept_patch_reverses"]) == (0, None), result
    rc, result = run_module({"path": str(root)}, tmp_path)
    assert (rc, result["kept_patch_reverses"]) == (0, None), result
    assert applied != pristine
