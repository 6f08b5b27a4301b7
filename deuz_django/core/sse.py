"""The Deuz UI wire v2 over server-sent events (SPEC R11.1–R11.3, R11.10, R11.12).

A frame is ``id: <seq>\\ndata: <json>\\n\\n``; a stream ends with ``id: <seq>\\ndata:
[DONE]\\n\\n`` where ``seq`` is the leg-end sentinel's. :func:`follow_journal` replays a
journal after a client's ``Last-Event-ID`` and tails it: intermediate leg ends are sailed
through, the last one ends the stream; on silence a hook decides whether to keep waiting
(the Django view uses it to continue a crashed run exactly once).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable

from .journal import Record, StreamJournal, encode_part, is_done
from .wire import V2_ONLY, WireVersion, redact

SilenceHook = Callable[[float], Awaitable[bool]]


def headers(version: WireVersion = "v2") -> dict[str, str]:
    return {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache",
        "x-deuz-stream": version,
    }


def negotiate(header: str | None) -> WireVersion:
    """Only an explicit ``v1`` downgrades (R11.6)."""
    return "v1" if (header or "").strip().lower() == "v1" else "v2"


def parse_cursor(value: object) -> int:
    """A ``Last-Event-ID``: an int >= 0 or ASCII digits; anything else means none (R11.10)."""
    if isinstance(value, bool):
        return -1
    if isinstance(value, int):
        return value if value >= 0 else -1
    if isinstance(value, str):
        text = value.strip()
        if text and text.isascii() and text.isdigit():
            return int(text)
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


async def follow_journal(
    journal: StreamJournal,
    stream_id: str,
    cursor: int,
    *,
    on_silence: SilenceHook,
    poll_interval: float = 0.15,
    version: WireVersion = "v2",
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> AsyncIterator[str]:
    """SSE text for the records after ``cursor`` until the run's last leg has ended.

    ``on_silence(idle_seconds)`` runs whenever a poll finds nothing new; returning
    ``False`` closes the stream without ``[DONE]`` (the client reads it as a drop).
    A journal error yields an id-less error frame and closes (R11.10 step 4).
    """
    pending_done: int | None = None
    idle = 0.0
    try:
        last = await journal.last_seq(stream_id)
        if last is not None and cursor >= last:
            tail = await journal.read(stream_id, last - 1, 1)
            if tail and is_done(tail[-1][1]):  # D5 fast path: nothing left to replay
                yield done_frame(max(cursor, last))
                return
        while True:
            records: list[Record] = await journal.read(stream_id, cursor)
            if records:
                idle = 0.0
                for seq, data in records:
                    cursor = seq
                    if is_done(data):
                        pending_done = seq
                        continue
                    pending_done = None
                    body = _for_version(data, version)
                    if body is not None:
                        yield frame(seq if version == "v2" else None, body)
                continue
            if pending_done is not None:
                yield done_frame(pending_done if version == "v2" else None)
                return
            if not await on_silence(idle):
                return
            await sleep(poll_interval)
            idle += poll_interval
    except Exception as error:  # a broken journal says so, then reads as a drop
        yield error_frame(str(error) or "resume failed")
