# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Shared by the unit and integration suites: the Ansible modules that a test runs on this machine (the
local connection) use the test hosts' payload bytecode cache (tests/harness/ansiballz_pycache.py), as the
molecule scenarios' containers do. A module run compiled ``ansible.module_utils`` from source every
time; with the cache one role run of tests/integration/test_sglang_role.py used 51 CPU s instead of 71
(its modules 16 instead of 33). Only this process's children see it: the product, the lab and
``benchmarks/`` never do (docs/test-hosts.md)."""

from __future__ import annotations

import os
from pathlib import Path

from lib.cache import CACHE

PYCACHE_SITE = Path(__file__).resolve().parent / "harness" / "pycache_site"


def _enable_module_pycache() -> None:
    if "GPUFLEET_TEST_PYCACHE_DIR" not in os.environ:
        cache = CACHE / "test-pycache"
        cache.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.environ["GPUFLEET_TEST_PYCACHE_DIR"] = str(cache)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(PYCACHE_SITE)]
    os.environ["PYTHONPATH"] = os.pathsep.join([str(PYCACHE_SITE), *paths])


_enable_module_pycache()
