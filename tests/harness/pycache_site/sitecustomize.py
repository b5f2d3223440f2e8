# Copyright (c) gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""TESTS ONLY: loads two caches into every Python that the test suites start on this machine: the test
hosts' module payload bytecode cache (tests/harness/ansiballz_pycache.py) and the controller's Jinja
code cache (tests/harness/jinja_codecache.py).

tests/conftest.py puts this directory on ``PYTHONPATH`` for the unit and integration suites' child
processes, and extensions/molecule/config.yml for the molecule scenarios' controllers (never for the
product, the lab or ``benchmarks/``). So the Ansible modules a test runs through the local connection
compile ``ansible.module_utils`` once, as on the molecule test hosts, and a controller compiles each
template once per source instead of once per forked worker. Python's ``site`` imports
``sitecustomize`` from the first directory of ``sys.path`` that has one.
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

# the controller's Jinja code cache (tests/harness/jinja_codecache.py), installed when ansible-core's
# templating is first imported
_JINJA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "jinja_codecache.py")
_jspec = importlib.util.spec_from_file_location("gpufleet_test_jinja_codecache", _JINJA)
if _jspec is not None and _jspec.loader is not None and "gpufleet_test_jinja_codecache" not in sys.modules:
    _jmodule = importlib.util.module_from_spec(_jspec)
    sys.modules["gpufleet_test_jinja_codecache"] = _jmodule
    _jspec.loader.exec_module(_jmodule)
    _jmodule.hook()
