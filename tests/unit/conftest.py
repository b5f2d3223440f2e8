# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Hypothesis profiles for the fuzz tests (property-based tests of every parser and writer that
takes outside data). ``ci`` (the default, what ``make test`` runs): derandomized, so a CI run is
reproducible, 200 examples per test, no deadline (a 2-core machine under load is slow, not
wrong). ``matrix``: the settings of ``ci`` with 20 examples per test, for the unit suite's second run on the
newest toolchain (``make newest``, the stage ``newest`` of ``make test``): the fuzz depth is had once,
on the base toolchain; the newest run checks that the same code and tests work there, and re-running
the same derandomized inputs would only repeat them. A test that sets its own number
(``@settings(max_examples=examples(n))``, tests/lib/fuzz.py) runs ``n``, or the profile's number
where that is smaller. ``dev``: random seeds, 1,000 examples, for hunting:
``HYPOTHESIS_PROFILE=dev pytest``. ``make fuzz-stats`` prints the number of generated cases per test."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=200,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile("matrix", settings.get_profile("ci"), max_examples=20)
settings.register_profile(
    "dev",
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
