"""The flag table in plugins/module_utils/sglang_flag_table.py checked against real SGLang wheels.

Two checks:
- always: for 0.5.8, 0.5.9 and 0.5.10 (whose parser spells every flag as a string literal in
  server_args.py) the literals of the real wheel equal the table's column;
- with GPUFLEET_SGLANG_PARSER_PYTHON set to a python that has SGLang's runtime dependencies
  (torch, triton, transformers, ...; no GPU needed): the real parser of every version in the table,
  built by roles/sglang_server/files/sglang_argv_check.py --dump-flags, equals the table's column.
  Regenerate the table with: python tests/unit/test_sglang_args_table.py (same variable).
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
PARSER_PYTHON = os.environ.get("GPUFLEET_SGLANG_PARSER_PYTHON")
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
    assert proc.returncode == 0, f"dumping the SGLang {version} parser failed: {proc.stdout[-2000:]}"
    result = json.loads(proc.stdout)
    assert result["version"] == version
    return result["flags"]


@pytest.mark.slow
@pytest.mark.skipif(not PARSER_PYTHON, reason="GPUFLEET_SGLANG_PARSER_PYTHON (a python with SGLang's deps) not set")
@pytest.mark.parametrize("version", VERSIONS)
def test_table_matches_real_parser(version, tmp_path):
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
