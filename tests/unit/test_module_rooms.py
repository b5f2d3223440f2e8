# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""module_utils in rooms (docs/CONTRIBUTING.md, "Where code lives"; issue 24 part 4).

Every file lives in a room (``common/``, ``gate/``, ...), each room is a package with an empty
``__init__.py`` (AnsiballZ needs one for each package beneath module_utils; ansible-test's
empty-init wants it empty), and the rooms on disk are the rooms the guide lists.

A module_utils file is *controller-only* when it sets ``CONTROLLER_ONLY = True`` at module level
(the one mark; the baseline store, the tune search and profiles, the fleet report). No module in
plugins/modules may import one, directly or through any chain of module_utils: AnsiballZ would
send it to every node with the module. The walk below reads imports with ``ast`` (nothing is
imported); test_module_bundles.py checks the same with ansible-core's own ``recursive_finder``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PREFIX = "ansible_collections.gpufleet.sglang.plugins.module_utils"
MARK = "CONTROLLER_ONLY"


def _resolve(utils: Path, dotted: str) -> Path | None:
    """The file of a module_utils name relative to the module_utils root: ``gate.spec`` -> gate/spec.py."""
    base = utils.joinpath(*dotted.split(".")) if dotted else utils
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


def imported_utils(source: Path, utils: Path) -> list[Path]:
    """The module_utils files ``source`` imports (with every package __init__ on the way), in order."""
    tree = ast.parse(source.read_text(encoding="utf-8"), filename=str(source))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from P.gate import spec` names the module gate/spec.py; `from P.gate.spec import x` the name x
            names += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    found: list[Path] = []
    for name in names:
        if name != PREFIX and not name.startswith(PREFIX + "."):
            continue
        parts = name[len(PREFIX) + 1 :].split(".") if name != PREFIX else []
        for depth in range(1, len(parts) + 1):
            path = _resolve(utils, ".".join(parts[:depth]))
            if path is not None and path not in found:
                found.append(path)
    return found


def bundle(module: Path, utils: Path) -> dict[Path, list[Path]]:
    """Every module_utils file ``module`` bundles, transitively, each with the chain that brings it in."""
    chains: dict[Path, list[Path]] = {}
    todo = [(module, [module])]
    while todo:
        source, chain = todo.pop()
        for path in imported_utils(source, utils):
            if path not in chains:
                chains[path] = [*chain, path]
                todo.append((path, chains[path]))
    return chains


def controller_only(path: Path) -> bool:
    """True when the file sets ``CONTROLLER_ONLY = True`` at module level."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == MARK for t in targets):
                return isinstance(node.value, ast.Constant) and node.value.value is True
    return False


def leaks(modules: Path, utils: Path) -> dict[str, list[str]]:
    """module name -> the import chain of the first controller-only file it bundles (none: not listed)."""
    found: dict[str, list[str]] = {}
    for module in sorted(modules.glob("*.py")):
        for path, chain in sorted(bundle(module, utils).items()):
            if controller_only(path):
                found[module.stem] = [str(p.relative_to(modules.parent.parent)) for p in chain]
                break
    return found


UTILS = REPO / "plugins" / "module_utils"
MODULES = REPO / "plugins" / "modules"


def test_no_module_bundles_controller_only_code():
    assert leaks(MODULES, UTILS) == {}


def test_the_controller_side_files_carry_the_mark():
    """The mark cannot vanish unseen from the files the node must never get."""
    marked = {str(p.relative_to(UTILS)) for p in UTILS.rglob("*.py") if controller_only(p)}
    assert marked >= {"gate/baseline.py", "tune/search.py", "tune/profile.py", "fleet/report.py"}


def test_the_walk_sees_the_node_side_of_the_gate():
    """A walk that found nothing would pass the leak test; it finds the gate's runner, spec and client."""
    carried = {str(p.relative_to(UTILS)) for p in bundle(MODULES / "throughput_gate.py", UTILS)}
    assert {"gate/__init__.py", "gate/runner.py", "gate/spec.py", "gate/client.py", "common/secret_mask.py"} <= carried
    assert "gate/baseline.py" not in carried


def _tree(root: Path, files: dict[str, str]) -> tuple[Path, Path]:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "plugins" / "modules", root / "plugins" / "module_utils"


@pytest.mark.parametrize(
    ("statement", "leaking"),
    [
        (f"from {PREFIX}.a import x", {"m"}),
        (f"from {PREFIX}.a.x import VALUE", {"m"}),
        (f"import {PREFIX}.a.x", {"m"}),
        # the package's __init__ imports x: every module that imports anything of a/ bundles it
        (f"from {PREFIX} import a", {"m", "clean"}),
    ],
)
def test_a_leak_through_another_module_utils_is_found(tmp_path, statement, leaking):
    """module m -> a/x.py -> a/store.py (marked): named with its chain, whatever the import's form;
    module clean imports a/y.py only."""
    init = f"from {PREFIX}.a import x as x\n" if statement.endswith("import a") else ""
    modules, utils = _tree(
        tmp_path,
        {
            "plugins/modules/m.py": statement + "\n",
            "plugins/modules/clean.py": f"from {PREFIX}.a.y import VALUE\n",
            "plugins/module_utils/a/__init__.py": init,
            "plugins/module_utils/a/x.py": f"from {PREFIX}.a.store import KEEP\nVALUE = 1\n",
            "plugins/module_utils/a/y.py": "VALUE = 2\n",
            "plugins/module_utils/a/store.py": "CONTROLLER_ONLY = True\nKEEP = 1\n",
        },
    )
    found = leaks(modules, utils)
    assert set(found) == leaking
    assert found["m"][0] == "plugins/modules/m.py"
    assert found["m"][-1] == "plugins/module_utils/a/store.py"


@pytest.mark.parametrize("value", ["False", "1", "'yes'"])
def test_only_a_true_mark_marks(tmp_path, value):
    path = tmp_path / "x.py"
    path.write_text(f"{MARK} = {value}\n", encoding="utf-8")
    assert not controller_only(path)


def test_every_file_lives_in_a_room():
    assert sorted(p.name for p in UTILS.glob("*.py")) == []


def _documented_rooms() -> list[str]:
    guide = (REPO / "docs" / "CONTRIBUTING.md").read_text(encoding="utf-8")
    section = guide.split("## Where code lives", 1)[1].split("\n## ", 1)[0]
    return sorted(set(re.findall(r"^\| `([a-z_]+)/` \|", section, re.M)))


def test_the_rooms_on_disk_are_the_rooms_of_the_guide():
    on_disk = sorted(p.name for p in UTILS.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert on_disk == _documented_rooms()
    assert len(on_disk) >= 5


@pytest.mark.parametrize("room", _documented_rooms())
def test_each_room_is_a_package_with_an_empty_init(room):
    init = UTILS / room / "__init__.py"
    assert init.is_file()
    assert init.read_bytes() == b""
