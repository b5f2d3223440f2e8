# Copyright (c) gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""TESTS ONLY: loads the test hosts' module payload bytecode cache (tests/harness/ansiballz_pycache.py) into
every Python that the unit and integration suites start on this machine.

tests/conftest.py puts this directory on ``PYTHONPATH`` for the suites' child processes (never for the
product, the lab or the molecule controllers), so the Ansible modules a test runs through the local
connection compile ``ansible.module_utils`` once, as on the molecule test hosts. Python's ``site``
imports ``sitecustomize`` from the first directory of ``sys.path`` that has one.
"""

import importlib.util
import os
import sys

_HOOK = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ansiballz_pycache.py")
_spec = importlib.util.spec_from_file_location("gpufleet_test_pycache", _HOOK)
if _spec is not None and _spec.loader is not None and "gpufleet_test_pycache" not in sys.modules:
    _module = importlib.util.module_from_spec(_spec)
    sys.modules["gpufleet_test_pycache"] = _module
    _spec.loader.exec_module(_module)  # installs the hook (its module name is gpufleet_test_pycache)
