# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The events of SGLang's native ``/generate`` stream, built one way for the tests of the gate's SSE
parser and token checks (module_utils/gate/sse.py): :func:`native_event` is one event's JSON object."""

from __future__ import annotations


def native_event(
    text: str, ids: list[int], completion_tokens: int, *, rid: str = "r", final_length: int | None = None
) -> dict:
    """One native event: ``text`` and ``output_ids`` ``ids``, ``completion_tokens`` claimed; the last event of
    a request (``final_length`` given) finishes with ``{"type": "length", "length": final_length}``."""
    meta = {
        "id": rid,
        "finish_reason": None if final_length is None else {"type": "length", "length": final_length},
        "prompt_tokens": 4,
        "completion_tokens": completion_tokens,
        "cached_tokens": 0,
    }
    return {"text": text, "output_ids": ids, "meta_info": meta}
