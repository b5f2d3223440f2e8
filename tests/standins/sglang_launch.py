# Copyright (c) gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""STAND-IN for ``python -m sglang.launch_server`` of an installed SGLang release. Not SGLang.

What it stands in for: the start of a real SGLang server, whose argument parser belongs to the
release the unit runs and refuses a flag that release does not know (argparse: exit status 2,
``launch_server.py: error: unrecognized arguments: --flag``). A rollback that restores only the
release link but keeps the options rendered for a newer release hits exactly this.

How: the release directory (``--release``, usually the ``current`` link the sglang role manages)
holds ``gpufleet-release.json`` with the SGLang version the sglang role installed there; the flags
each version's real parser accepts come from the project's table generated from those parsers
(``--flag-table``: plugins/module_utils/sglang/flag_table.py). Every flag of the command line and
of the ``--config`` file is checked; a known set starts the SGLang HTTP stand-in
(sglang_api.py, next to this file) with the same arguments and ``STANDIN_SGLANG_VERSION`` set to
the release's version.

Usage (the unit's ExecStart; the options follow):
    python3 sglang_launch.py --release /opt/sglang/current --flag-table /path/sglang/flag_table.py \
        --config /etc/sglang/sglang-server.yaml
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from sglang_api import merge_config


def _load_table(path: str) -> tuple[tuple[str, ...], dict[str, tuple[str, str]]]:
    spec = importlib.util.spec_from_file_location("sglang_flag_table", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"sglang_launch stand-in: cannot load the flag table {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return tuple(module.VERSIONS), dict(module.FLAGS)


def known_flags(version: str, table_path: str) -> set[str]:
    """The flags the real parser of this exact version accepts (only versions the table holds)."""
    versions, flags = _load_table(table_path)
    if version not in versions:
        raise SystemExit(f"sglang_launch stand-in: no flag table for SGLang {version}; it has {', '.join(versions)}")
    index = versions.index(version)
    return {flag for flag, (_kind, presence) in flags.items() if presence[index] == "1"}


def main(argv: list[str]) -> int:
    opts: dict[str, str] = {}
    while argv[:1] and argv[0] in ("--release", "--flag-table"):
        if len(argv) < 2:
            raise SystemExit(f"sglang_launch stand-in: {argv[0]} needs a value")
        opts[argv[0]] = argv[1]
        argv = argv[2:]
    if set(opts) != {"--release", "--flag-table"}:
        raise SystemExit("sglang_launch stand-in: usage: --release DIR --flag-table FILE [server options]")
    manifest = os.path.join(opts["--release"], "gpufleet-release.json")
    try:
        with open(manifest, encoding="utf-8") as handle:
            version = str(json.load(handle)["version"])
    except (OSError, ValueError, KeyError) as exc:
        raise SystemExit(f"sglang_launch stand-in: cannot read the release version from {manifest}: {exc}") from None
    known = known_flags(version, opts["--flag-table"])
    words = [word.split("=", 1)[0] for word in merge_config(list(argv)) if word.startswith("--")]
    unknown = [word for word in words if word not in known]
    if unknown:
        print(
            f"usage: launch_server.py [-h] --model-path MODEL_PATH ...\n"
            f"launch_server.py: error: unrecognized arguments: {' '.join(unknown)} (SGLang {version})",
            file=sys.stderr,
        )
        return 2
    os.environ["STANDIN_SGLANG_VERSION"] = version
    os.execv(sys.executable, [sys.executable, os.path.join(HERE, "sglang_api.py"), *argv])
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
