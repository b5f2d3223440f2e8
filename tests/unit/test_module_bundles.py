# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What AnsiballZ sends to the node with each module: the module_utils it imports, transitively, as
ansible-core's own ``recursive_finder`` collects them. Controller-side code (the baseline store with
its locks and history, the tune search and profiles, the fleet report) stays on the controller."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MODULES = sorted(p.stem for p in (REPO / "plugins" / "modules").glob("*.py"))
# module_utils that only action, lookup and filter plugins use (they run on the controller)
# (each sets CONTROLLER_ONLY = True; test_module_rooms.py walks the imports with ast for the same rule)
CONTROLLER_SIDE = {"gate/baseline", "tune/search", "tune/profile", "fleet/report"}

# In a fresh interpreter: ansible's collection loader must own ansible_collections, which the test
# session has already imported from the plain path.
_FINDER = """
import datetime, io, json, sys, zipfile
from ansible._internal._ansiballz._builder import ExtensionManager
from ansible.executor.module_common import recursive_finder
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
repo, names = sys.argv[1], sys.argv[2:]
_AnsibleCollectionFinder(paths=[repo + "/collections"])._install()
prefix = "ansible_collections/gpufleet/sglang/plugins/module_utils/"
found = {}
for name in names:
    payload = zipfile.ZipFile(io.BytesIO(), "w")
    with open(f"{repo}/plugins/modules/{name}.py", "rb") as handle:
        source = handle.read()
    fqn = f"ansible_collections.gpufleet.sglang.plugins.modules.{name}"
    recursive_finder(name, fqn, source, payload, datetime.datetime(2026, 1, 1), ExtensionManager())
    files = [n[len(prefix):] for n in payload.namelist() if n.startswith(prefix)]
    found[name] = sorted(n[: -len(".py")] for n in files if not n.endswith("__init__.py"))
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def bundles() -> dict[str, set[str]]:
    done = subprocess.run(
        [sys.executable, "-c", _FINDER, str(REPO), *MODULES], capture_output=True, text=True, check=False, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return {name: set(files) for name, files in json.loads(done.stdout).items()}


@pytest.mark.parametrize("name", MODULES)
def test_no_module_carries_controller_side_code(bundles, name):
    assert bundles[name] & CONTROLLER_SIDE == set()


def test_throughput_gate_carries_its_runner_and_spec_but_not_the_baseline_store(bundles):
    """gate/spec.py imported the baseline store (600 lines, fcntl locks, history) for the controller's options."""
    carried = bundles["throughput_gate"]
    assert {"gate/runner", "gate/spec", "gate/client", "common/secret_mask"} <= carried
    assert "gate/baseline" not in carried
    assert "common/atomic_file" not in carried  # the baseline store's writer, nothing of the gate's own
