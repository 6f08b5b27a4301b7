"""The Deuz UI wire v2 over server-sent events (SPEC R11.1–R11.3, R11.10, R11.12): a pure
formatter of journal records.

A frame is ``id: <seq>\\ndata: <json>\\n\\n``; a stream ends with ``id: <seq>\\ndata:
[DONE]\\n\\n`` where ``seq`` is the leg-end sentinel's. An :class:`Encoder` turns the records
a reader follows (after a client's ``Last-Event-ID``) into frames; intermediate leg ends
are sailed through and the last one ends the stream. Following the journal — polling,
waiting, continuing a crashed run — is the reader's job, not this module's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from .exceptions import InvalidInputError
from .journal import Record, encode_part, is_done
from .wire import V2_ONLY, WireVersion, redact


def headers(version: WireVersion = "v2") -> dict[str, str]:
    return {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache",
        "x-deuz-stream": version,
    }


def negotiate(header: str | None) -> WireVersion:
    """Only an explicit ``v1`` downgrades (R11.6)."""
    return "v1" if (header or "").strip().lower() == "v1" else "v2"


MAX_CURSOR = 2**53 - 1  # the largest seq every client reads exactly (JS numbers)


def parse_cursor(value: object) -> int:
    """A ``Last-Event-ID``: an int >= 0 or ASCII digits; anything else means none (R11.10).

    A number past ``MAX_CURSOR`` — which no journal reaches — is an
    :class:`InvalidInputError` (the reference would read a 5,000-digit id as
    ``Infinity``; Python's ``int`` refuses it).
    """
    if isinstance(value, bool):
        return -1
    if isinstance(value, str):
        text = value.strip()
        if not (text and text.isascii() and text.isdigit()):
            return -1
        if len(text.lstrip("0")) > len(str(MAX_CURSOR)):
            raise InvalidInputError(f"cursor: must be at most {MAX_CURSOR}")
        value = int(text)
    if isinstance(value, int):
        if value > MAX_CURSOR:
            raise InvalidInputError(f"cursor: must be at most {MAX_CURSOR}")
        return value if value >= 0 else -1
    return -1


def frame(seq: int | None, data: str) -> str:
    return f"data: {data}\n\n" if seq is None else f"id: {seq}\ndata: {data}\n\n"


def done_frame(seq: int | None) -> str:
    return frame(seq, "[DONE]")


def error_frame(message: str) -> str:
    """An error frame without an id: it reads as a drop, so the client reconnects."""
    return frame(None, encode_part({"type": "error", "message": redact(message)}))


def _for_version(data: str, version: WireVersion) -> str | None:
    """The frame body for ``version``; ``None`` drops a v2-only part for a v1 client."""
    if version == "v2":
        return data
    part = json.loads(data)
    if part.get("type") in V2_ONLY or str(part.get("type", "")).startswith("data-"):
        return None
    return data


def caught_up(cursor: int, last: Record | None) -> str | None:
    """D5 / R11.10 fast path: a client at or past the journal's final leg end gets just
    the end of the stream (``last`` is the journal's last record, if any)."""
    if last is not None and cursor >= last[0] and is_done(last[1]):
        return done_frame(max(cursor, last[0]))
    return None


class Encoder:
    """The frames of one SSE response, fed the journal's records as they come.

    Intermediate leg ends are sailed through: a leg-end sentinel is held back and only
    becomes ``[DONE]`` (:meth:`end`) when nothing follows it — the reader decides when
    that is (a poll that finds nothing new).
    """

    def __init__(self, version: WireVersion = "v2") -> None:
        self.version: WireVersion = version
        self.pending_done: int | None = None

    def encode(self, records: Sequence[Record]) -> str:
        frames = []
        for seq, data in records:
            if is_done(data):
                self.pending_done = seq
                continue
            self.pending_done = None
            body = _for_version(data, self.version)
            if body is not None:
                frames.append(frame(seq if self.version == "v2" else None, body))
        return "".join(frames)

    def end(self) -> str:
        """``[DONE]`` for the leg end seen last (R11.2), or nothing if none is pending."""
        if self.pending_done is None:
            return ""
        return done_frame(self.pending_done if self.version == "v2" else None)
