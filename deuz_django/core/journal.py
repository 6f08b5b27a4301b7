"""The stream journal: every UI part of a run, at a gapless per-run ``seq`` (SPEC §11.2).

A leg's parts are appended — in order, in batches — *before* anyone is told about them;
readers (a WebSocket, an SSE response, a second tab, another process) only ever send what
the journal holds, so a reader that reconnects with its last seq misses nothing and repeats
nothing. Each leg ends with the sentinel ``{"type":"done"}``, which takes a seq of its own;
the next leg of the run continues the numbering.

Records are ``(seq, data)`` where ``data`` is the part's compact JSON text, kept verbatim so
replay is byte-identical to what was first sent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, runtime_checkable

from . import _jsjson
from .exceptions import DeuzError
from .parts import StreamPart
from .wire import to_ui_part

DONE = '{"type":"done"}'
Record = tuple[int, str]
CLOSE_ATTEMPTS = 5
RETRY_SECONDS = 0.05  # the first retry of a failed append; doubling, at most 2 s
logger = logging.getLogger("deuz_django")


@runtime_checkable
class StreamJournal(Protocol):
    """Where a run's parts are kept. Implementations must keep records in seq order."""

    async def append(
        self, stream_id: str, records: Sequence[Record], *, fence: object = None
    ) -> None:
        """Store ``records`` (consecutive seqs, following the last stored one).

        ``fence`` is the writer's right to write (the Django app passes the leg's lease);
        a journal that can check it raises :class:`JournalFenced` once it lapsed.
        """
        ...

    async def read(
        self, stream_id: str, after: int = -1, limit: int = 1000
    ) -> list[Record]:
        """Up to ``limit`` records with ``seq > after``, in order (a snapshot)."""
        ...

    async def last_seq(self, stream_id: str) -> int | None:
        """The seq of the last record, or ``None`` for an empty journal."""
        ...

    async def delete(self, stream_id: str) -> None: ...


class InMemoryJournal:
    """The reference journal: a list of records per stream, in this process."""

    def __init__(self) -> None:
        self._streams: dict[str, list[Record]] = {}

    async def append(
        self, stream_id: str, records: Sequence[Record], *, fence: object = None
    ) -> None:
        stream = self._streams.setdefault(stream_id, [])
        expected = stream[-1][0] + 1 if stream else 0
        if records and records[0][0] != expected:
            raise ValueError(
                f"journal {stream_id!r}: append at seq {records[0][0]}, expected {expected}"
            )
        stream.extend(records)

    async def read(
        self, stream_id: str, after: int = -1, limit: int = 1000
    ) -> list[Record]:
        stream = self._streams.get(stream_id, [])
        start = max(0, after + 1)  # seqs are gapless from 0, so seq == position
        return stream[start : start + limit]

    async def last_seq(self, stream_id: str) -> int | None:
        stream = self._streams.get(stream_id)
        return stream[-1][0] if stream else None

    async def delete(self, stream_id: str) -> None:
        self._streams.pop(stream_id, None)


class JournalFenced(DeuzError):
    """The writer's fence (its lease) lapsed: another leg owns the stream now."""

    code = "journal_fenced"


class JournalUnavailable(DeuzError):
    """The journal kept failing as a leg ended: the leg's end is not journaled, and
    readers wait for it until someone journals it."""

    code = "journal_unavailable"


def is_done(data: str) -> bool:
    return data == DONE


def encode_part(part: dict[str, object]) -> str:
    """Compact JSON the way the reference writes it (JS number formatting)."""
    return _jsjson.dumps(part)


class JournalWriter:
    """Journals one leg: maps canonical parts to UI parts, numbers them, appends in batches.

    ``add`` never blocks: parts are buffered and a background flush appends them, then
    calls ``on_flush(records)`` — the cue for readers. The first part is appended at once;
    whatever arrives while an append is in flight goes into the next one, so batches grow
    with the load. ``flush_interval`` allows one append per tick of a grid that far
    apart, shared by every writer of the event loop (the first append is immediate),
    trading a little latency for fewer, larger appends that fall due together.
    ``close`` appends the leg-end sentinel and waits until everything is stored. A
    failing append is retried at the next flush, so a journal outage delays but never
    loses or reorders parts.
    """

    def __init__(
        self,
        journal: StreamJournal,
        stream_id: str,
        *,
        next_seq: int,
        flush_interval: float = 0.0,
        on_flush: Callable[[list[Record]], Awaitable[None]] | None = None,
        fence: object = None,
    ) -> None:
        self.journal = journal
        self.fence = fence
        self.fenced = False
        self.stream_id = stream_id
        self.next_seq = next_seq
        self.flush_interval = flush_interval
        self.on_flush = on_flush
        self.last_stored = next_seq - 1
        self._buffer: list[Record] = []
        self._wakeup = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._nap: asyncio.Future[None] | None = None
        self._flushed_at = float("-inf")

    @classmethod
    async def open(
        cls,
        journal: StreamJournal,
        stream_id: str,
        *,
        message_id: str,
        flush_interval: float = 0.0,
        on_flush: Callable[[list[Record]], Awaitable[None]] | None = None,
        fence: object = None,
    ) -> JournalWriter:
        """Continue the stream's numbering; an empty journal starts with the ``start`` part."""
        last = await journal.last_seq(stream_id)
        writer = cls(
            journal,
            stream_id,
            next_seq=0 if last is None else last + 1,
            flush_interval=flush_interval,
            on_flush=on_flush,
            fence=fence,
        )
        if last is None:
            writer.add_ui({"type": "start", "messageId": message_id})
        return writer

    def add(self, part: StreamPart) -> None:
        ui = to_ui_part(part)
        if ui is not None:
            self.add_ui(ui)

    def add_ui(self, ui: dict[str, object]) -> None:
        self._append_record(encode_part(ui))

    def _append_record(self, data: str) -> None:
        if self.fenced:
            return  # another leg owns the stream: this one's parts go nowhere
        self._buffer.append((self.next_seq, data))
        self.next_seq += 1
        if self._task is None:
            self._task = asyncio.ensure_future(self._flush_loop())
        self._wakeup.set()

    async def close(self) -> int:
        """End the leg: journal the ``done`` sentinel and flush. Returns its seq.

        Raises :class:`JournalUnavailable` when the journal failed ``CLOSE_ATTEMPTS``
        times in a row meanwhile: the end must be journaled again later (the Django
        app leaves it to its recovery sweep). A fenced writer returns: the stream is
        another leg's, which ends it."""
        self._append_record(DONE)
        sentinel = self.next_seq - 1
        self._closing = True
        self._wakeup.set()
        if self._nap is not None and not self._nap.done():
            self._nap.set_result(None)  # the leg's end is not held for the grid
        if self._task is not None:
            await self._task
        if self.last_stored < sentinel and not self.fenced:
            raise JournalUnavailable(
                f"journal {self.stream_id!r}: the leg's end was not journaled"
            )
        return self.last_stored

    def _until_next_tick(self, now: float) -> float:
        """Seconds until this writer may append again: at once when it has not appended
        for a whole interval, else at the next tick of a grid every ``flush_interval``
        on the loop's clock. Every writer of the loop shares the grid, so their appends
        fall due together — one wake-up, and one coalesced journal round trip, for all
        the streams of a process rather than one per stream at its own phase."""
        interval = self.flush_interval
        if interval <= 0 or now - self._flushed_at >= interval:
            return 0.0
        return interval - now % interval

    async def _wait_for_tick(self, seconds: float) -> None:
        """Sleep until the grid's next tick, or until ``close`` ends the nap."""
        loop = asyncio.get_running_loop()
        self._nap = nap = loop.create_future()
        timer = loop.call_later(seconds, _wake, nap)
        try:
            await nap
        finally:
            timer.cancel()
            self._nap = None

    async def _flush_loop(self) -> None:
        failures = 0
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            loop = asyncio.get_running_loop()
            wait = self._until_next_tick(loop.time())
            if wait > 0 and not self._closing:
                await self._wait_for_tick(wait)  # what arrives meanwhile joins it
            self._flushed_at = loop.time()
            while self._buffer:
                batch = self._buffer[:]
                try:
                    await self.journal.append(self.stream_id, batch, fence=self.fence)
                except JournalFenced:
                    logger.warning(
                        "deuz: journal %s is another leg's now; %d part(s) dropped",
                        self.stream_id,
                        len(self._buffer),
                    )
                    self.fenced = True
                    self._buffer.clear()
                    return
                except Exception:
                    failures += 1
                    logger.exception(
                        "deuz: journal append failed for %s (attempt %d); retrying",
                        self.stream_id,
                        failures,
                    )
                    if self._closing and failures >= CLOSE_ATTEMPTS:
                        logger.error(
                            "deuz: journal %s unavailable; %d part(s) of this leg were "
                            "not journaled",
                            self.stream_id,
                            len(self._buffer),
                        )
                        return
                    await asyncio.sleep(min(2.0, RETRY_SECONDS * 2**failures))
                    continue
                failures = 0
                del self._buffer[: len(batch)]
                self.last_stored = batch[-1][0]
                if self.on_flush is not None:
                    try:
                        await self.on_flush(batch)
                    except Exception:
                        logger.exception("deuz: journal flush callback failed")
            if self._closing:
                return


def _wake(nap: asyncio.Future[None]) -> None:
    if not nap.done():
        nap.set_result(None)
