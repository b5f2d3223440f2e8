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

Token counts come from the server (``completion_tokens``), never from counting events, but never
more than the stream carried. :class:`StreamChecker` checks every event of a stream: it must be a
JSON object, carry no error, its count may never go backwards or past the tokens asked for, nor
past the token ids (or, without ids, the bytes of text) the stream carried, read cumulatively or
incrementally as the stream itself shows (docs/gate-stream-checks.md, "Claimed and carried
tokens"; the named reason :data:`OVER_REPORTED`), nothing may follow ``[DONE]`` and the final count
must be the one asked for. Decoding every cumulative event with ``json`` would cost
more CPU than the rest of the client, so a fast path accepts SGLang's compact native event
(``{"text":"...","output_ids":[...],"meta_info":{flat object}}``) after checking its bytes against
an exact subset of the JSON grammar; for a cumulative stream only the bytes that are new since the
previous event are scanned (the rest is compared with it). Whatever the fast path does not accept is
decoded with ``json``, which has the last word; the unit tests compare both on mutated events.
"""

from __future__ import annotations

import json
import re

DONE = b"[DONE]"
_CT_KEY = b'"completion_tokens":'
_ERROR_KEY = b'"error":'
# the fast path's grammar (exact JSON, a subset of it): anything it does not accept is decoded by json
_TEXT_BAD = re.compile(rb"[\x00-\x1f\\]")  # a control byte or an escape in a string
_INT = rb"(?:0|[1-9][0-9]*+)"
_INTS_TAIL = re.compile(rb"(?:," + _INT + rb")*+")
_INTS_OPT = re.compile(rb"(?:" + _INT + rb"(?:," + _INT + rb")*+)?+")
_INT_RE = re.compile(_INT)
_STR = rb'"[^"\\\x00-\x1f]*+"'
_SCALAR = rb"(?:" + _STR + rb"|-?" + _INT + rb"(?:\.[0-9]++)?+(?:[eE][+-]?[0-9]++)?+|null|true|false)"
_FLAT_OBJECT = re.compile(rb"\{(?:" + _STR + rb":" + _SCALAR + rb'(?:,(?=")|(?=\})))*+\}')
_CT_VALUE = re.compile(rb"(" + _INT + rb")[,}]")
_NATIVE_HEAD = b'{"text":"'
_NATIVE_IDS = b'","output_ids":['
_NATIVE_META = b'],"meta_info":{'


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


def usage_tokens(obj: dict) -> int | None:
    """``usage.completion_tokens`` of an OpenAI chunk or response, or None if it carries no usage."""
    usage = obj.get("usage")
    if usage is None:
        return None
    if not isinstance(usage, dict) or not isinstance(usage.get("completion_tokens"), int):
        raise SSEError(f"usage without an integer completion_tokens: {usage!r}")
    return int(usage["completion_tokens"])


# how a native stream's output_ids are read (StreamChecker._native_ids)
UNDECIDED, CUMULATIVE, INCREMENTAL = 0, 1, 2
# the named reason of an event that claims more tokens than the stream carried
OVER_REPORTED = "over-reported tokens"
_INT_ONLY = {int}


def _id_count(ids: object, name: str, payload: bytes) -> int:
    """How many token ids a decoded ``output_ids`` / ``token_ids`` value carries (a list of integers)."""
    if not isinstance(ids, list) or (ids and set(map(type, ids)) != _INT_ONLY):  # bool is not int here
        raise SSEError(f"malformed event ({name} is not a list of integers): {payload[:120]!r}")
    return len(ids)


def _text_bytes(text: object, payload: bytes) -> int:
    """UTF-8 bytes of a decoded event's text (absent or null: none)."""
    if text is None:
        return 0
    if not isinstance(text, str):
        raise SSEError(f"malformed event (text is not a string): {payload[:120]!r}")
    return len(text.encode("utf-8", "surrogatepass"))


def _valid_utf8(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


class StreamChecker:
    """Checks every event of one streamed response; :meth:`event` returns the running token count.

    ``api`` is V(native) or V(openai); ``expected`` the tokens asked for (``ignore_eos``);
    ``max_event`` the largest event accepted, in bytes.
    """

    __slots__ = (
        "done",
        "events",
        "expected",
        "finish",
        "head",
        "ids_seen",
        "max_event",
        "meta_head",
        "meta_tail",
        "mid",
        "mid_ids",
        "mode",
        "native",
        "text_seen",
        "tokens",
        "usage",
    )

    def __init__(self, api: str, expected: int, max_event: int) -> None:
        if api not in ("native", "openai"):
            raise ValueError(f"api must be native or openai, got {api!r}")
        self.native = api == "native"
        self.expected = expected
        self.max_event = max_event
        self.tokens = 0
        self.events = 0
        self.done = False
        self.usage = False
        self.finish: object = None
        # the previous accepted compact event, cut where the next one may differ
        self.head = b""  # '{"text":"' and the text
        self.mid = b""  # '","output_ids":[' and the ids
        self.meta_head = b""  # '],"meta_info":{' up to and with '"completion_tokens":'
        self.meta_tail = b""  # after the count, to the end of the event
        self.mid_ids = 0  # how many output_ids the previous accepted compact event carried
        # what the stream carried so far (docs/gate-stream-checks.md, "Claimed and carried tokens")
        self.ids_seen = 0  # output_ids (native) or token_ids (OpenAI), summed over events
        self.text_seen = 0  # UTF-8 bytes of text of events without ids, summed over events
        self.mode = UNDECIDED  # how a native stream's output_ids are read: CUMULATIVE or INCREMENTAL

    def event(self, payload: bytes) -> int:
        """Check one event's payload (``data:`` removed); raise :class:`SSEError` naming what is wrong."""
        if self.done:
            raise SSEError(f"data after [DONE]: {payload[:80]!r}")
        if payload == DONE:
            self._finish()
            return self.tokens
        if len(payload) > self.max_event:
            raise SSEError(f"an event of {len(payload)} bytes, more than the {self.max_event} accepted")
        self.events += 1
        fast = self._fast_native(payload) if self.native else None
        if fast is not None:
            ct, n = fast
            self._native_ids(ct, n)
        else:
            ct = self._decoded(payload)  # checks what the event carries itself
            if ct is None:
                return self.tokens
        self._bounds(ct)
        self.tokens = ct
        return ct

    def _bounds(self, ct: int) -> None:
        """A count may never go backwards or past the tokens asked for."""
        if ct < self.tokens:
            raise SSEError(f"completion_tokens went backwards ({self.tokens} -> {ct})")
        if ct > self.expected:
            raise SSEError(f"completion_tokens {ct} is more than the {self.expected} tokens asked for")

    def _native_ids(self, ct: int, n: int) -> None:
        """Check a native event's count ``ct`` against the ``n`` output_ids it carries.

        A cumulative stream (SGLang's default) carries every id so far in each event: ``ct <= n``.
        An incremental one (``--incremental-streaming-output``) carries the new ids: ``n <= ct - previous``
        and ``ct <=`` the ids of all events. The first event that only one reading explains fixes the
        reading for the rest of the stream (until then nothing has been counted).
        """
        self.ids_seen += n
        mode = self.mode
        if mode == CUMULATIVE and ct <= n:  # the common case, first
            return
        prev = self.tokens
        cumulative = ct <= n
        incremental = ct <= self.ids_seen and n <= ct - prev
        if mode == UNDECIDED:
            if cumulative != incremental:
                self.mode = mode = CUMULATIVE if cumulative else INCREMENTAL
            elif cumulative:
                return
        self._bounds(ct)  # a count past the tokens asked for (or backwards) is named as such first
        if mode == CUMULATIVE and not cumulative:
            raise SSEError(
                f"{OVER_REPORTED}: an event claims completion_tokens {ct} but carries {n} output_ids "
                "(a cumulative stream carries every token so far)"
            )
        if mode != CUMULATIVE and not incremental:
            raise SSEError(
                f"{OVER_REPORTED}: an event claims completion_tokens {ct} but the stream carried "
                f"{self.ids_seen} output_ids in all (this event {n}, after completion_tokens {prev})"
            )

    def _carried(self, ct: int) -> None:
        """Check a count against what events without a fixed reading carried: ids and text bytes, summed."""
        carried = self.ids_seen + self.text_seen
        if ct > carried:
            self._bounds(ct)
            raise SSEError(
                f"{OVER_REPORTED}: an event claims completion_tokens {ct} but the stream carried {self.ids_seen} "
                f"token ids and {self.text_seen} bytes of text without ids (a token is at least one of either)"
            )

    def _fast_native(self, p: bytes) -> tuple[int, int] | None:
        """(count, output_ids carried) of a compact native event whose bytes are valid JSON, or None to
        decode it.

        Accepted: ``{"text":"<no escape, no control byte>","output_ids":[<integers>],"meta_info":{<flat
        object of scalars>}}`` as valid UTF-8, without an ``"error":`` key.
        """
        cont = self._continued(p)
        if cont is not None:
            return cont
        if not (p.startswith(_NATIVE_HEAD) and p.endswith(b"}}")):
            return None
        q = p.find(b'"', 9)  # the text holds no backslash (checked below), so this quote ends it
        if q < 0 or _TEXT_BAD.search(p, 9, q) or not p.startswith(_NATIVE_IDS, q):
            return None
        r = p.find(b"]", q + 16)
        if r < 0 or _INTS_OPT.fullmatch(p, q + 16, r) is None or not p.startswith(_NATIVE_META, r):
            return None
        meta = p[r + 14 : len(p) - 1]
        i = meta.rfind(_CT_KEY)
        m = _CT_VALUE.match(meta, i + 20) if i >= 0 else None
        if (
            m is None
            or _FLAT_OBJECT.fullmatch(meta) is None
            or _ERROR_KEY in meta
            or not meta.isascii()
            or (not p.isascii() and not _valid_utf8(p))
        ):
            return None
        ct = int(m.group(1))
        n = p.count(b",", q + 16, r) + 1 if r > q + 16 else 0
        self.head = p[:q]
        self.mid = p[q:r]
        self.mid_ids = n
        self.meta_head = p[r : r + 14 + i + 20]
        self.meta_tail = p[r + 14 + m.end(1) :]
        return ct, n

    def _continued(self, p: bytes) -> tuple[int, int] | None:
        """(count, output_ids carried) of a cumulative event that extends the previous accepted one, or None.

        The bytes shared with the previous event are compared, not scanned again: only the new
        text, the new ids and the count are checked. This keeps a cumulative stream linear.
        """
        head = self.head
        if not head or not p.startswith(head):
            return None
        h = len(head)
        q = p.find(b'"', h)
        mid = self.mid
        if q < 0 or _TEXT_BAD.search(p, h, q) or not p.startswith(mid, q):
            return None
        s = q + len(mid)
        r = p.find(b"]", s)
        if r < 0 or (_INTS_OPT if mid.endswith(b"[") else _INTS_TAIL).fullmatch(p, s, r) is None:
            return None
        meta_head = self.meta_head
        if not p.startswith(meta_head, r):
            return None
        m = _INT_RE.match(p, r + len(meta_head))
        tail = self.meta_tail
        if (
            m is None
            or len(p) - m.end() != len(tail)
            or not p.endswith(tail)
            or (not p.isascii() and not _valid_utf8(p[h:q]))
        ):
            return None
        ct = int(m.group())
        # the ids new since the previous event follow its last id as ",<id>" (or start the list)
        n = (p.count(b",", s, r) + 1 if r > s else 0) if mid.endswith(b"[") else self.mid_ids + p.count(b",", s, r)
        self.head = p[:q]
        self.mid = p[q:r]
        self.mid_ids = n
        return ct, n

    def _decoded(self, payload: bytes) -> int | None:
        """The count of an event decoded with json (None: an OpenAI chunk without usage)."""
        obj = decode_event(payload)
        if self.native:
            meta = obj.get("meta_info")
            ct = meta.get("completion_tokens") if isinstance(meta, dict) else None
            if not isinstance(ct, int) or isinstance(ct, bool) or ct < 0:
                raise SSEError(f"malformed event (no integer meta_info.completion_tokens): {payload[:120]!r}")
            self.finish = meta.get("finish_reason") or self.finish
            ids = obj.get("output_ids")
            if ids is not None:
                self._native_ids(ct, _id_count(ids, "output_ids", payload))
            else:
                self.text_seen += _text_bytes(obj.get("text"), payload)
                self._carried(ct)
            return ct
        choices = obj.get("choices")
        if not isinstance(choices, list):
            raise SSEError(f"malformed event (no choices list): {payload[:120]!r}")
        for choice in choices:
            if not isinstance(choice, dict):
                raise SSEError(f"malformed event (a choice that is not an object): {payload[:120]!r}")
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]
            ids = choice.get("token_ids")  # a delta in both modes (return_token_ids)
            if ids is not None:
                self.ids_seen += _id_count(ids, "token_ids", payload)
            else:
                self.text_seen += _text_bytes(choice.get("text"), payload)
        ct = usage_tokens(obj)
        if ct is not None:
            if ct < 0 or isinstance(ct, bool):
                raise SSEError(f"usage with a negative or non-integer completion_tokens: {ct!r}")
            self.usage = True
            self._carried(ct)
        return ct

    def _finish(self) -> None:
        self.done = True
        if not self.events:
            raise SSEError("stream had no events before [DONE]")
        if not self.native and not self.usage:
            raise SSEError("the server sent no usage (stream_options.include_usage not honoured)")
        if self.tokens != self.expected:
            raise SSEError(
                f"wrong token count: asked for {self.expected} tokens with ignore_eos, "
                f"the server reported {self.tokens} (finish_reason {self.finish!r})"
            )
