"""No module documents a result key that Ansible reads as the task's own status.

A module result with a truthy `skipped` makes Ansible report the task as skipped, and ansible-core 2.21
drops the key from registered results (model_page_cache's `skipped` reason vanished there and its role
failed); `unreachable` likewise turns a result into an unreachable host.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

MODULES = sorted((Path(__file__).resolve().parents[2] / "plugins" / "modules").glob("*.py"))
RESERVED = {"skipped", "unreachable"}


def return_keys(path: Path) -> set[str]:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "RETURN" for t in node.targets):
            return set(yaml.safe_load(ast.literal_eval(node.value)) or {})
    return set()


@pytest.mark.parametrize("module", MODULES, ids=lambda p: p.stem)
def test_no_module_returns_a_reserved_key(module):
    assert return_keys(module) & RESERVED == set()


def test_the_scan_reads_the_return_keys():
    keys = return_keys(next(p for p in MODULES if p.stem == "sglang_warm_cache"))
    assert {"left_out", "digest", "artifact"} <= keys
