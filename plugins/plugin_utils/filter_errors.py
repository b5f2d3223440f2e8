# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""How the collection's filters report a refusal of the pure code they wrap (on the controller; never sent to a node).

A filter turns its input over to module_utils, whose errors say what is wrong with it; the task sees that
message behind the filter's name, as an ``AnsibleFilterError`` without the module_utils traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ansible.errors import AnsibleFilterError


@contextmanager
def filter_errors(name: str, *errors: type[Exception]) -> Iterator[None]:
    """Inside it, an exception of one of ``errors`` becomes ``AnsibleFilterError("<name>: <its message>")``,
    raised without its context (``from None``); any other exception passes as it is."""
    try:
        yield
    except errors as exc:
        raise AnsibleFilterError(f"{name}: {exc}") from None
