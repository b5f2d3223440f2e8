# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The number of examples of a property-based test that sets its own (``@settings(max_examples=...)``,
where an example is costly), under the hypothesis profile of the run (tests/unit/conftest.py)."""

from __future__ import annotations

from hypothesis import settings


def examples(count: int) -> int:
    """``count``, or the profile's own number where that is smaller: the ``matrix`` profile (the newest
    toolchain's compatibility run) cuts these tests as it cuts the others; ``ci`` and ``dev`` run ``count``."""
    return min(count, settings.default.max_examples)
