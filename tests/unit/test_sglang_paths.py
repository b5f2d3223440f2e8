# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The node paths' defaults: module_utils/sglang/paths.py (what the argument specs use) and the doc
fragment gpufleet.sglang.sglang_paths (what the docs show) say the same, and the modules use both."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.sglang.plugins.action import sglang_tune as tune_action
from ansible_collections.gpufleet.sglang.plugins.doc_fragments.sglang_paths import ModuleDocFragment
from ansible_collections.gpufleet.sglang.plugins.module_utils.sglang import paths as sglang_paths

REPO = Path(__file__).resolve().parents[2]
EXPECTED = {
    "DOCUMENTATION": {"release_link": sglang_paths.RELEASE_LINK},
    "ROOT": {"root": sglang_paths.DEPLOYMENTS_DIR},
    "TUNE": {"journal": sglang_paths.TUNE_JOURNAL, "deployments_dir": sglang_paths.DEPLOYMENTS_DIR},
}


@pytest.mark.parametrize("attribute", sorted(EXPECTED))
def test_fragment_defaults_are_the_constants(attribute):
    options = yaml.safe_load(getattr(ModuleDocFragment, attribute))["options"]
    assert {name: opt["default"] for name, opt in options.items()} == EXPECTED[attribute]
    assert all(opt["type"] == "path" and opt["description"] for opt in options.values())


@pytest.mark.parametrize(
    ("module", "fragments"),
    [
        ("sglang_tune", ["gpufleet.sglang.sglang_paths", "gpufleet.sglang.sglang_paths.tune"]),
        ("sglang_tune_switch", ["gpufleet.sglang.sglang_paths", "gpufleet.sglang.sglang_paths.tune"]),
        ("sglang_deployment", ["gpufleet.sglang.sglang_paths", "gpufleet.sglang.sglang_paths.root"]),
    ],
)
def test_modules_take_the_paths_from_the_fragment(module, fragments):
    text = (REPO / "plugins" / "modules" / f"{module}.py").read_text(encoding="utf-8")
    doc = yaml.safe_load(text.split('DOCUMENTATION = r"""', 1)[1].split('"""', 1)[0])
    assert doc["extends_documentation_fragment"] == fragments
    shared = {name for attribute in EXPECTED for name in EXPECTED[attribute]}
    assert not shared & set(doc["options"]), "a shared path documented again in the module"
    code = text.split('RETURN = r"""', 1)[1].split('"""', 1)[1]
    assert "/opt/sglang" not in code, "a default spelled out in the argument spec, not taken from sglang_paths"


def test_the_tune_action_uses_the_constants():
    spec = tune_action.ARGUMENT_SPEC
    assert spec["journal"]["default"] == sglang_paths.TUNE_JOURNAL
    assert spec["deployments_dir"]["default"] == sglang_paths.DEPLOYMENTS_DIR
    assert spec["release_link"]["default"] == sglang_paths.RELEASE_LINK
