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

Ambiguity is an error, never a guess: a function (or its class) bound more than
once in the same scope (Python uses the last binding), a backend list with an
entry that is not a string literal, a RECORD line that cannot be read, and
parser limits (recursion, memory, file size) all raise SourceError naming the
file and, where there is one, the line.
"""

from __future__ import annotations

import ast
import base64
import binascii
import csv
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

# Largest file read (the biggest autotune file in released wheels is under 200 KiB, RECORD under
# 2 MiB): a bigger one is refused rather than parsed.
MAX_FILE_BYTES = 8 * 1024 * 1024

_COMMENTED_ENTRY = re.compile(r"""^\s*#\s*(["'])([A-Za-z0-9_.\-]+)\1\s*,?\s*$""")
_METADATA_VERSION = re.compile(r"^Version:\s*(\S+)\s*$", re.MULTILINE)
_DIST_INFO = re.compile(r"^sglang-(.+)\.dist-info$")


class SourceError(Exception):
    """The SGLang source is not what we know how to read; the message says why."""


def version_from_source(text: str) -> str | None:
    """Return the literal ``__version__`` assigned at module level, if any."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
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


def _bindings(body: list[ast.stmt], name: str) -> list[ast.stmt]:
    """Statements of one scope that bind ``name``: def/class, assignment or import.

    Looks into if/try/with/for/while blocks (they share the scope), not into nested functions
    or classes (their own scopes).
    """
    found: list[ast.stmt] = []
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == name:
                found.append(node)
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(n, ast.Name) and n.id == name for t in targets for n in ast.walk(t)):
                found.append(node)
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and any(
            (alias.asname or alias.name.split(".")[0]) == name for alias in node.names
        ):
            found.append(node)
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(node, field, None)
            if isinstance(inner, list):
                found += _bindings(inner, name)
        for handler in getattr(node, "handlers", []) or []:
            found += _bindings(handler.body, name)
    return found


def _single_definition(body: list[ast.stmt], name: str, kind: type | tuple[type, ...], what: str) -> ast.stmt | None:
    bindings = _bindings(body, name)
    if not bindings:
        return None
    if len(bindings) > 1:
        lines = ", ".join(str(b.lineno) for b in bindings)
        raise SourceError(
            f"{what} is bound {len(bindings)} times (lines {lines}); Python uses the last, refusing to guess"
        )
    node = bindings[0]
    if not isinstance(node, kind):
        raise SourceError(f"{what} at line {node.lineno} is not a plain definition ({type(node).__name__})")
    return node


def find_function(tree: ast.Module, class_name: str | None, function: str) -> ast.FunctionDef | None:
    """The (method) definition ``class_name.function`` at module level, or None when absent.

    Raises SourceError when the class or the function is bound more than once in its scope, or
    bound by something other than a def (Python would use the last binding).
    """
    body: list[ast.stmt] = tree.body
    if class_name is not None:
        cls = _single_definition(tree.body, class_name, ast.ClassDef, f"class {class_name}")
        if not isinstance(cls, ast.ClassDef):
            return None
        body = cls.body
    qualname = f"{class_name}.{function}" if class_name else function
    found = _single_definition(body, function, (ast.FunctionDef, ast.AsyncFunctionDef), qualname)
    return found if isinstance(found, ast.FunctionDef) else None


def _is_backend_expr(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return "backend" in node.id
    if isinstance(node, ast.Attribute):
        return "backend" in node.attr
    return False


def find_whitelists(function: ast.FunctionDef) -> list[ast.List | ast.Tuple | ast.Set]:
    """Return literal collections of strings tested with ``<backend> in / not in [...]``.

    Raises SourceError when such a collection has an entry that is not a string literal: it
    cannot be read completely, so what it holds is unknown.
    """
    found: list[ast.List | ast.Tuple | ast.Set] = []
    for node in ast.walk(function):
        if not isinstance(node, ast.Compare) or len(node.ops) != 1:
            continue
        if not isinstance(node.ops[0], (ast.In, ast.NotIn)) or not _is_backend_expr(node.left):
            continue
        container = node.comparators[0]
        if not isinstance(container, (ast.List, ast.Tuple, ast.Set)):
            continue
        for element in container.elts:
            if not (isinstance(element, ast.Constant) and isinstance(element.value, str)):
                raise SourceError(
                    f"the backend list at line {container.lineno} has an entry that is not a string literal "
                    f"(line {element.lineno}: {ast.unparse(element)[:80]}); cannot read it completely"
                )
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


def record_sha256(record_text: str, relpath: str, name: str = "RECORD") -> str | None:
    """The sha256 (hex) that a dist-info RECORD lists for relpath, if any.

    RECORD is CSV (path, ``sha256=<urlsafe base64, unpadded>``, size; the hash may be empty). A
    row for relpath that is malformed, has a sha256 digest that is not 32 bytes of valid base64,
    or is listed twice with different digests raises SourceError naming ``name`` and the line.
    """
    found: str | None = None
    try:
        rows = list(enumerate(csv.reader(record_text.splitlines()), start=1))
    except csv.Error as exc:
        raise SourceError(f"{name}: not a readable RECORD (CSV): {exc}") from exc
    for lineno, row in rows:
        if not row or row[0] != relpath:
            continue
        where = f"{name} line {lineno}"
        if len(row) != 3 or (row[1] and "=" not in row[1]):
            shown = ",".join(row)[:200]
            raise SourceError(f"{where}: entry for {relpath} is not 'path,<algorithm>=<digest>,size': {shown!r}")
        if not row[1].startswith("sha256="):
            continue  # no hash (allowed) or another algorithm: nothing to compare with
        digest = row[1][len("sha256=") :]
        try:
            raw = base64.b64decode(digest + "=" * (-len(digest) % 4), altchars=b"-_", validate=True)
        except (binascii.Error, ValueError) as exc:
            raise SourceError(
                f"{where}: sha256 digest {digest[:80]!r} of {relpath} is not valid base64 ({exc})"
            ) from exc
        if len(raw) != hashlib.sha256().digest_size:
            raise SourceError(f"{where}: sha256 digest of {relpath} is {len(raw)} bytes, not 32")
        if found is not None and found != raw.hex():
            raise SourceError(f"{where}: {relpath} is listed again with a different sha256")
        found = raw.hex()
    return found


def analyse_autotune_source(text: str, layout: Layout, version: str | None) -> dict[str, Any] | None:
    """Facts about the autotune whitelist in ``text`` (the file of ``layout``).

    Returns None when the file does not define the layout's function. Raises
    SourceError when the function exists but its whitelist cannot be read.
    """
    where = f"{layout.qualname} in {layout.relpath} (SGLang {version or 'unknown version'})"
    try:
        tree = ast.parse(text)
        function = find_function(tree, layout.class_name, layout.function)
        if function is None:
            return None
        whitelists = find_whitelists(function)
    except SyntaxError as exc:
        raise SourceError(f"cannot parse {layout.relpath} (SGLang {version or 'unknown version'}): {exc}") from exc
    except (RecursionError, MemoryError) as exc:
        limit = "recursion" if isinstance(exc, RecursionError) else "memory"
        raise SourceError(
            f"cannot parse {layout.relpath} (SGLang {version or 'unknown version'}): the parser ran out of "
            f"{limit} (expressions nested too deeply?)"
        ) from exc
    except SourceError as exc:
        raise SourceError(f"{layout.relpath} (SGLang {version or 'unknown version'}): {exc}") from exc
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


def _read_bytes(path: str) -> bytes:
    """The file's bytes; SourceError when it is over MAX_FILE_BYTES."""
    with open(path, "rb") as handle:
        data = handle.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise SourceError(f"{path} is larger than {MAX_FILE_BYTES} bytes; refusing to read it")
    return data


def _read(path: str) -> str:
    data = _read_bytes(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(f"{path} is not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})") from exc


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
        data = _read_bytes(path)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SourceError(f"{path} is not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})") from exc
        facts = analyse_autotune_source(text, layout, version)
        if facts is None:
            continue
        digest = hashlib.sha256(data).hexdigest()
        recorded = None
        for dist_info in _dist_info_dirs(root):
            record = os.path.join(dist_info, "RECORD")
            if os.path.isfile(record):
                recorded = record_sha256(_read(record), layout.relpath, record)
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
