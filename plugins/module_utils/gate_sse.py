# Copyright: (c) 2026, gpufleet.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Server-sent events of SGLang's streaming endpoints (stdlib only).

Formats (docs/sglang-versions-and-flags.md):

- native ``POST /generate``: ``data: {"text", "output_ids", "meta_info": {..., "completion_tokens"}}``
  events, then ``data: [DONE]``. Text and ids are cumulative by default and deltas with
  ``--incremental-streaming-output``; ``meta_info.completion_tokens`` is a running total in both
  modes. Events are not tokens: ``--stream-interval`` batches tokens and stale events are dropped
  for slow clients.
- OpenAI ``POST /v1/completions``: chunks with ``choices[0].text`` deltas; with
  ``stream_options.include_usage`` a last chunk with ``choices: []`` and ``usage``;
  ``continuous_usage_stats`` adds ``usage`` to every chunk.
- a mid-stream error is an event ``{"error": {"message": ...}}`` (then ``[DONE]``).

Token counts come from the server (``completion_tokens``), never from counting events.
The hot path (:func:`cheap_completion_tokens`) reads the running total from an event's raw bytes
without decoding its JSON: inside a JSON string a quote is always escaped, so the raw bytes
``"completion_tokens":`` can only be an object key. Only the final event is decoded fully.
"""

from __future__ import annotations

import json
import re

DONE = b"[DONE]"
_CT_KEY = b'"completion_tokens":'
_ERROR_KEY = b'"error":'
_CT_RE = re.compile(rb'"completion_tokens":\s*(\d+)\s*[,}]')
_CT_NULL_RE = re.compile(rb'"completion_tokens":\s*null\s*[,}]')


class SSEError(ValueError):
    """A stream that does not follow the expected event format; the message names the problem."""


def split_events(buf: bytearray) -> list[bytes]:
    """Remove and return the complete events at the start of ``buf`` (``\\n\\n``-terminated).

    Each returned item is the event's payload with the ``data:`` prefix removed. Lines other than
    ``data:`` (comments, ``event:``, ``id:``) are dropped. There is no size limit per line or event.
    """
    out: list[bytes] = []
    start = 0
    find = buf.find
    while True:
        end = find(b"\n\n", start)
        if end < 0:
            break
        if buf.startswith(b"data: ", start) and find(b"\n", start, end) < 0:
            out.append(bytes(buf[start + 6 : end]))  # the common case, one copy
            start = end + 2
            continue
        block = bytes(buf[start:end])
        start = end + 2
        data_lines = [line[5:].strip() for line in block.split(b"\n") if line.startswith(b"data:")]
        if data_lines:
            out.append(b"\n".join(data_lines))
        elif block.strip() and not all(
            line.startswith((b":", b"event:", b"id:", b"retry:")) for line in block.split(b"\n")
        ):
            raise SSEError(f"not a server-sent event: {block[:120]!r}")
    if start:
        del buf[:start]
    return out


def cheap_completion_tokens(payload: bytes) -> int | None:
    """Running ``completion_tokens`` of an event read from its raw bytes, or None if absent."""
    i = payload.rfind(_CT_KEY)
    if i < 0:
        return None
    m = _CT_RE.match(payload, i)
    if m is None:
        if _CT_NULL_RE.match(payload, i):
            return None
        raise SSEError(f"malformed event (completion_tokens is not an integer): {payload[:120]!r}")
    return int(m.group(1))


def is_error_event(payload: bytes) -> bool:
    """True if the raw event holds an ``"error":`` key (cheap test; decode to read the message)."""
    return _ERROR_KEY in payload


def decode_event(payload: bytes) -> dict:
    """Decode one event's JSON; raise :class:`SSEError` naming the problem."""
    try:
        obj = json.loads(payload)
    except ValueError as exc:
        raise SSEError(f"malformed event (not JSON: {exc}): {payload[:120]!r}") from None
    if not isinstance(obj, dict):
        raise SSEError(f"malformed event (not a JSON object): {payload[:120]!r}")
    if "error" in obj:
        err = obj["error"]
        msg = err.get("message") if isinstance(err, dict) else err
        raise SSEError(f"server sent an error event: {msg}")
    return obj


def final_native(obj: dict) -> tuple[int, object]:
    """``(completion_tokens, finish_reason)`` of a decoded final native event or response."""
    meta = obj.get("meta_info")
    if not isinstance(meta, dict):
        raise SSEError("final /generate event has no meta_info object")
    tokens = meta.get("completion_tokens")
    if not isinstance(tokens, int) or isinstance(tokens, bool):
        raise SSEError(f"final /generate event has no integer meta_info.completion_tokens (got {tokens!r})")
    return tokens, meta.get("finish_reason")


def usage_tokens(obj: dict) -> int | None:
    """``usage.completion_tokens`` of an OpenAI chunk or response, or None if it carries no usage."""
    usage = obj.get("usage")
    if usage is None:
        return None
    if not isinstance(usage, dict) or not isinstance(usage.get("completion_tokens"), int):
        raise SSEError(f"usage without an integer completion_tokens: {usage!r}")
    return int(usage["completion_tokens"])


def reconstruct(payloads: list[bytes], api: str, incremental: bool = False) -> dict:
    """Decode a whole stream (for tests and diagnostics; the load client uses the cheap path).

    Returns ``{"text", "output_ids", "completion_tokens", "finish_reason", "events"}``. For the
    native API, ``incremental`` says whether events carry deltas (``--incremental-streaming-output``)
    or the cumulative text; consistency between ids and the server's count is checked.
    """
    if api not in ("native", "openai"):
        raise ValueError(f"api must be native or openai, got {api!r}")
    if not payloads or payloads[-1] != DONE:
        raise SSEError("stream ended without data: [DONE]")
    events = [decode_event(p) for p in payloads[:-1]]
    if not events:
        raise SSEError("stream had no events before [DONE]")
    text = ""
    ids: list[int] = []
    tokens: int | None = None
    finish = None
    for ev in events:
        if api == "native":
            meta = ev.get("meta_info") or {}
            piece, piece_ids = ev.get("text", ""), ev.get("output_ids") or []
            if incremental:
                text += piece
                ids.extend(piece_ids)
            else:
                if not piece.startswith(text):
                    raise SSEError("cumulative text shrank or changed between events (is the server incremental?)")
                text, ids = piece, list(piece_ids)
            ct = meta.get("completion_tokens")
            if isinstance(ct, int):
                if tokens is not None and ct < tokens:
                    raise SSEError(f"completion_tokens went backwards ({tokens} -> {ct})")
                tokens = ct
            finish = meta.get("finish_reason") or finish
        else:
            for choice in ev.get("choices") or []:
                text += choice.get("text") or ""
                finish = choice.get("finish_reason") or finish
            u = usage_tokens(ev)
            if u is not None:
                tokens = u
    if tokens is None:
        raise SSEError(
            "the server reported no completion_tokens (OpenAI API: send stream_options.include_usage)"
            if api == "openai"
            else "no event carried meta_info.completion_tokens"
        )
    if api == "native" and ids and len(ids) != tokens:
        raise SSEError(
            f"{len(ids)} output_ids but completion_tokens={tokens}: "
            f"the stream is {'cumulative' if incremental else 'incremental'}, "
            f"not {'incremental' if incremental else 'cumulative'}"
        )
    return {
        "text": text,
        "output_ids": ids,
        "completion_tokens": tokens,
        "finish_reason": finish,
        "events": len(events),
    }
