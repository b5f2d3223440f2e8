# Copyright: (c) 2025, gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read an installed SGLang's source with ``ast`` (never importing it).

Finds where SGLang decides whether to run the FlashInfer autotune, which MoE
runner backends that decision whitelists, and which entries are present only
as comments (disabled upstream). Stdlib only: this runs on the target.

Three layouts exist in released wheels (docs/sglang-versions-and-flags.md); they are listed
newest first in ``LAYOUTS`` and the first one whose file defines the function
wins.
"""

from __future__ import annotations

import ast
import base64
import hashlib
import os
import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Layout:
    """One known place of the autotune decision."""

    name: str
    relpath: str
    class_name: str | None
    function: str

    @property
    def qualname(self) -> str:
        return f"{self.class_name}.{self.function}" if self.class_name else self.function


LAYOUTS: tuple[Layout, ...] = (
    Layout(
        "flashinfer_autotune",
        "sglang/srt/model_executor/runner/flashinfer_autotune.py",
        None,
        "should_run_flashinfer_autotune",
    ),
    Layout(
        "base_runner",
        "sglang/srt/model_executor/runner/base_runner.py",
        "BaseRunner",
        "_should_run_flashinfer_autotune",
    ),
    Layout(
        "model_runner",
        "sglang/srt/model_executor/model_runner.py",
        "ModelRunner",
        "_should_run_flashinfer_autotune",
    ),
)

LAYOUT_NAMES: tuple[str, ...] = tuple(layout.name for layout in LAYOUTS)

# Files that may carry ``__version__ = "..."`` as a literal, in order of trust.
VERSION_FILES: tuple[str, ...] = ("sglang/_version.py", "sglang/version.py")

# Lines of context around the whitelist handed to the patch template.
CONTEXT_LINES = 3

_COMMENTED_ENTRY = re.compile(r"""^\s*#\s*(["'])([A-Za-z0-9_.\-]+)\1\s*,?\s*$""")
_METADATA_VERSION = re.compile(r"^Version:\s*(\S+)\s*$", re.MULTILINE)
_DIST_INFO = re.compile(r"^sglang-(.+)\.dist-info$")


class SourceError(Exception):
    """The SGLang source is not what we know how to read; the message says why."""


def version_from_source(text: str) -> str | None:
    """Return the literal ``__version__`` assigned at module level, if any."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        names = {t.id for t in node.targets if isinstance(t, ast.Name)}
        if "__version__" in names and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return node.value.value
    return None


def version_from_metadata(text: str) -> str | None:
    """Return the ``Version:`` field of a dist-info METADATA file."""
    match = _METADATA_VERSION.search(text)
    return match.group(1) if match else None


def find_function(tree: ast.Module, class_name: str | None, function: str) -> ast.FunctionDef | None:
    """Return the (method) definition ``class_name.function`` at module level, or None."""
    body: list[ast.stmt] = tree.body
    if class_name is not None:
        classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name]
        if not classes:
            return None
        body = classes[0].body
    for node in body:
        if isinstance(node, ast.FunctionDef) and node.name == function:
            return node
    return None


def _is_backend_expr(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return "backend" in node.id
    if isinstance(node, ast.Attribute):
        return "backend" in node.attr
    return False


def find_whitelists(function: ast.FunctionDef) -> list[ast.List | ast.Tuple | ast.Set]:
    """Return literal collections of strings tested with ``<backend> in / not in [...]``."""
    found: list[ast.List | ast.Tuple | ast.Set] = []
    for node in ast.walk(function):
        if not isinstance(node, ast.Compare) or len(node.ops) != 1:
            continue
        if not isinstance(node.ops[0], (ast.In, ast.NotIn)) or not _is_backend_expr(node.left):
            continue
        container = node.comparators[0]
        if not isinstance(container, (ast.List, ast.Tuple, ast.Set)):
            continue
        if all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in container.elts):
            found.append(container)
    return found


def commented_entries(lines: list[str], start: int, end: int) -> list[dict[str, Any]]:
    """Entries written as a lone quoted string in a comment between 1-based lines start..end."""
    entries = []
    for lineno in range(start, end + 1):
        match = _COMMENTED_ENTRY.match(lines[lineno - 1])
        if match:
            entries.append({"backend": match.group(2), "line": lineno})
    return entries


def record_sha256(record_text: str, relpath: str) -> str | None:
    """The sha256 (hex) that a dist-info RECORD lists for relpath, if any."""
    for row in record_text.splitlines():
        parts = row.rsplit(",", 2)
        if len(parts) == 3 and parts[0] == relpath and parts[1].startswith("sha256="):
            digest = parts[1][len("sha256=") :]
            padded = digest + "=" * (-len(digest) % 4)
            return base64.urlsafe_b64decode(padded).hex()
    return None


def analyse_autotune_source(text: str, layout: Layout, version: str | None) -> dict[str, Any] | None:
    """Facts about the autotune whitelist in ``text`` (the file of ``layout``).

    Returns None when the file does not define the layout's function. Raises
    SourceError when the function exists but its whitelist cannot be read.
    """
    where = f"{layout.qualname} in {layout.relpath} (SGLang {version or 'unknown version'})"
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise SourceError(f"cannot parse {layout.relpath} (SGLang {version or 'unknown version'}): {exc}") from exc
    function = find_function(tree, layout.class_name, layout.function)
    if function is None:
        return None
    whitelists = find_whitelists(function)
    if not whitelists:
        raise SourceError(f"no MoE backend whitelist (`<backend> in [...]`) found in {where}")
    if len(whitelists) > 1:
        starts = ", ".join(str(w.lineno) for w in whitelists)
        raise SourceError(f"{len(whitelists)} candidate backend whitelists (lines {starts}) in {where}; expected one")
    container = whitelists[0]
    start, end = container.lineno, container.end_lineno or container.lineno
    lines = text.splitlines()
    active = [e.value for e in container.elts if isinstance(e, ast.Constant)]
    commented = [c for c in commented_entries(lines, start, end) if c["backend"] not in active]
    context_start = max(1, start - CONTEXT_LINES)
    context_end = min(len(lines), end + CONTEXT_LINES)
    return {
        "layout": layout.name,
        "autotune_relpath": layout.relpath,
        "autotune_function": layout.qualname,
        "autotuned_backends": active,
        "commented_backends": [c["backend"] for c in commented],
        "whitelist": {
            "start_line": start,
            "end_line": end,
            "commented": commented,
            "context_start_line": context_start,
            "context_lines": lines[context_start - 1 : context_end],
        },
    }


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def _dist_info_dirs(root: str) -> list[str]:
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    return [os.path.join(root, n) for n in names if _DIST_INFO.match(n)]


def read_version(root: str) -> str | None:
    """SGLang's version: a literal ``__version__`` in the package, else dist-info METADATA."""
    for relpath in VERSION_FILES:
        path = os.path.join(root, relpath)
        if os.path.isfile(path):
            version = version_from_source(_read(path))
            if version:
                return version
    for dist_info in _dist_info_dirs(root):
        metadata = os.path.join(dist_info, "METADATA")
        if os.path.isfile(metadata):
            version = version_from_metadata(_read(metadata))
            if version:
                return version
    return None


def unknown_layout_message(root: str, version: str | None) -> str:
    looked = "; ".join(f"{layout.qualname} in {layout.relpath}" for layout in LAYOUTS)
    return (
        f"unknown SGLang autotune layout under {root} (SGLang {version or 'unknown version'}): "
        f"looked for {looked}; none defines it. Known layouts: {', '.join(LAYOUT_NAMES)}"
    )


def inspect_sglang(root: str) -> dict[str, Any]:
    """All facts about the SGLang package under ``root``; raises SourceError when unreadable."""
    package = os.path.join(root, "sglang")
    if not os.path.isdir(package):
        raise SourceError(f"no sglang package under {root} (looked for directory {package})")
    version = read_version(root)
    for layout in LAYOUTS:
        path = os.path.join(root, layout.relpath)
        if not os.path.isfile(path):
            continue
        facts = analyse_autotune_source(_read(path), layout, version)
        if facts is None:
            continue
        digest = hashlib.sha256(_read_bytes(path)).hexdigest()
        recorded = None
        for dist_info in _dist_info_dirs(root):
            record = os.path.join(dist_info, "RECORD")
            if os.path.isfile(record):
                recorded = record_sha256(_read(record), layout.relpath)
                if recorded:
                    break
        facts.update(
            {
                "version": version,
                "path": root,
                "autotune_file": path,
                "autotune_file_sha256": digest,
                "autotune_file_pristine": None if recorded is None else recorded == digest,
            }
        )
        return facts
    raise SourceError(unknown_layout_message(root, version))
