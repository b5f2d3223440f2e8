"""The flag table in plugins/module_utils/sglang_flag_table.py checked against real SGLang wheels.

Two checks:
- always: for 0.5.8, 0.5.9 and 0.5.10 (whose parser spells every flag as a string literal in
  server_args.py) the literals of the real wheel equal the table's column;
- with a python that has SGLang's runtime dependencies (no GPU needed): the real parser of a version,
  built by roles/sglang_server/files/sglang_argv_check.py --dump-flags, equals the table's column.
  That python is GPUFLEET_SGLANG_PARSER_PYTHON when set (then every version in the table is checked:
  0.5.8 to 0.5.20 import torchvision, so give it a full venv, e.g. torch 2.14.1 + torchvision 0.29.1),
  else the CPU-only venv of tests/harness/sglang-parser-venv.sh when it has been built (the
  sglang_server molecule scenario builds it): it checks the versions that import without torchvision
  (CPU_PARSER_VERSIONS) and says why it skips the others.
  Regenerate the table with: python tests/unit/test_sglang_args_table.py (same python).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from integration.sglang_wheels import install_wheel, read_member

from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang_args import (
    build_table,
    known_flags,
    render_table_module,
)
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang_flag_table import FLAGS, VERSIONS

REPO = Path(__file__).resolve().parents[2]
CHECKER = REPO / "roles" / "sglang_server" / "files" / "sglang_argv_check.py"
TABLE = REPO / "plugins" / "module_utils" / "sglang_flag_table.py"
CPU_PARSER_VENV = Path(os.environ.get("GPUFLEET_CACHE") or Path.home() / ".cache" / "gpufleet") / "sglang-parser-0.5.23"
# Versions whose server_args import works in that venv (0.5.8 to 0.5.20 import torchvision, whose
# PyPI build does not load beside CPU torch).
CPU_PARSER_VERSIONS = ("0.5.21", "0.5.22", "0.5.23")


def parser_python() -> tuple[str | None, tuple[str, ...] | None]:
    """(python, the versions it can build parsers for; None = all), or (None, None) when there is none."""
    explicit = os.environ.get("GPUFLEET_SGLANG_PARSER_PYTHON")
    if explicit:
        return explicit, None
    # the stamp is written last: a venv without it is half-built
    if (CPU_PARSER_VENV / ".gpufleet-stamp").is_file():
        return str(CPU_PARSER_VENV / "bin" / "python"), CPU_PARSER_VERSIONS
    return None, None


PARSER_PYTHON, PARSER_VERSIONS = parser_python()
# argparse.BooleanOptionalAction adds --no-X without a literal.
GENERATED_NEGATIONS = {"0.5.10": {"--no-experts-shared-outer-loras"}}


def column(version: str) -> set[str]:
    index = VERSIONS.index(version)
    return {flag for flag, (_, presence) in FLAGS.items() if presence[index] == "1"}


@pytest.mark.parametrize("version", ["0.5.8", "0.5.9", "0.5.10"])
def test_table_matches_literals_of_real_wheel(version):
    source = read_member(version, "sglang/srt/server_args.py")
    literals = set(re.findall(r'"(--[a-z0-9][a-z0-9-]*)"', source[source.index("def add_cli_args") :]))
    assert column(version) == literals | GENERATED_NEGATIONS.get(version, set())


def test_known_flags_is_the_column_for_dumped_versions():
    for version in VERSIONS:
        assert set(known_flags(version)) == column(version)


def dump(version: str, tmp_path: Path) -> dict:
    root = install_wheel(version, tmp_path / version)
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.run(
        [PARSER_PYTHON, str(CHECKER), "--dump-flags"], capture_output=True, text=True, env=env, check=False
    )
    assert proc.returncode == 0, f"dumping the SGLang {version} parser failed: {(proc.stdout + proc.stderr)[-2000:]}"
    result = json.loads(proc.stdout)
    assert result["version"] == version
    return result["flags"]


def test_cpu_parser_versions_are_in_the_table():
    assert set(CPU_PARSER_VERSIONS) <= set(VERSIONS)


@pytest.mark.slow
@pytest.mark.skipif(
    not PARSER_PYTHON,
    reason="no parser python: set GPUFLEET_SGLANG_PARSER_PYTHON or run tests/harness/sglang-parser-venv.sh",
)
@pytest.mark.parametrize("version", VERSIONS)
def test_table_matches_real_parser(version, tmp_path):
    if PARSER_VERSIONS is not None and version not in PARSER_VERSIONS:
        pytest.skip(f"SGLang {version} imports torchvision: the CPU parser venv cannot build its parser")
    flags = dump(version, tmp_path)
    assert set(flags) == column(version)
    _, table = build_table({version: flags})
    for flag, (kind, _) in table.items():
        assert FLAGS[flag][0] == kind, f"{flag} in {version}: parser says {kind}, table says {FLAGS[flag][0]}"


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        dumps = {version: dump(version, Path(tmp)) for version in sys.argv[1:] or VERSIONS}
    TABLE.write_text(render_table_module(*build_table(dumps)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
