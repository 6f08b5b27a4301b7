"""Live runs: the fan-out of every leg's parts — journal them, tell readers, hear cancels
and interrupts.

Whoever runs a leg (:mod:`deuz_django.runs.legs`, in a web process or a worker) wraps it in a
:class:`LegStream`: every part is journaled (:mod:`deuz_django.core.journal`) before anyone
hears of it; then readers in this process are woken at once (:data:`feed`) and other
processes get a *nudge* through the channel layer ("run X has parts up to seq N"), at most
every ``NUDGE_INTERVAL`` per run. Nudges are hints, never carriers: a dropped one costs
latency, not parts, because readers re-read the journal (and poll it on silence). This
module knows nothing of runs beyond their parts: it sits below the legs and the service.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import logging
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from channels.layers import InMemoryChannelLayer, get_channel_layer

from ..core import AbortController, StreamPart, TurnInterrupter
from ..core.journal import JournalWriter, Record
from ..storage.stream_journal import get_journal

logger = logging.getLogger("deuz_django")

NUDGE_INTERVAL = 0.1
# Legs append on a shared grid this far apart (the first append is immediate): a token
# stream becomes a few inserts a second, and every leg of the process appends — and wakes
# its readers — on the same ticks, in one coalesced round trip.
FLUSH_INTERVAL = 0.05
RECENT_RECORDS = 4096
WAITERS_SWEPT_AT = 64


def run_group(run_id: str) -> str:
    """The channel-layer group readers of ``run_id`` join (``deuz.run.<run_id>``)."""
    return _group("deuz.run.", run_id)


def control_group(run_id: str) -> str:
    """Where a leg listens for ``cancel`` and ``interrupt``, apart from the nudge
    traffic."""
    return _group("deuz.control.", run_id)


def _group(prefix: str, run_id: str) -> str:
    """Channels' group names stay under 100 characters: a run id too long to fit (the
    API takes up to 100) is replaced by its digest."""
    name = prefix + run_id
    if len(name) < 100:
        return name
    return f"{prefix}sha256.{hashlib.sha256(run_id.encode()).hexdigest()[:48]}"


# -- this process's readers -------------------------------------------------------------------


@dataclass(slots=True)
class _RunFeed:
    records: deque[Record] = field(default_factory=lambda: deque(maxlen=RECENT_RECORDS))
    waiters: list[asyncio.Future[None]] = field(default_factory=list)
    writing: bool = False  # a leg of this run is journaled by this process right now
    readers: int = 0  # readers in this process following the run
    last_nudge: float = 0.0
    nudge_pending: bool = False


class Feed:
    """The records journaled in this process, kept briefly so local readers skip the
    database. A run's entry lives while a leg of it is journaled here or a reader here
    follows it, and not a moment longer: a long-lived daphne streaming many runs keeps
    only the live ones in memory."""

    def __init__(self) -> None:
        self._runs: dict[str, _RunFeed] = {}

    def state(self, run_id: str) -> _RunFeed:
        """The run's entry (created on first use): its recent records and nudge state."""
        feed = self._runs.get(run_id)
        if feed is None:
            feed = self._runs[run_id] = _RunFeed()
        return feed

    def publish(self, run_id: str, records: Sequence[Record]) -> None:
        feed = self.state(run_id)
        if feed.records and records and records[0][0] != feed.records[-1][0] + 1:
            feed.records.clear()  # a gap (another process wrote in between): start afresh
        feed.records.extend(records)
        self.wake(run_id)

    def wake(self, run_id: str) -> None:
        feed = self._runs.get(run_id)
        if feed is None or not feed.waiters:
            return
        waiters, feed.waiters = feed.waiters, []
        running = _running_loop()
        for changed in waiters:
            loop = changed.get_loop()
            if loop is running:
                _settle(changed)
            else:  # a leg on another thread's loop (a recovery sweep's) wakes it
                loop.call_soon_threadsafe(_settle, changed)

    def recent(self, run_id: str, after: int) -> list[Record] | None:
        """Records after ``after`` from memory, or ``None`` when memory cannot say.

        Memory is authoritative only while this process journals the run (it holds the
        lease, so nobody else can append); otherwise an empty answer is not trusted.
        """
        feed = self._runs.get(run_id)
        if feed is None or not feed.records:
            return None
        first, last = feed.records[0][0], feed.records[-1][0]
        if after + 1 < first or after > last or (after == last and not feed.writing):
            return None
        # From the right: a reader is usually a batch behind, and a deque indexes (and
        # islices) from the left in steps proportional to the distance.
        tail = list(itertools.islice(reversed(feed.records), last - after))
        tail.reverse()
        return tail

    def set_writing(self, run_id: str, writing: bool) -> None:
        self.state(run_id).writing = writing
        if not writing:
            self._release(run_id)

    @contextlib.contextmanager
    def reading(self, run_id: str) -> Iterator[None]:
        """While a reader follows ``run_id``: its entry is kept (and :meth:`wait` works)."""
        self.state(run_id).readers += 1
        try:
            yield
        finally:
            feed = self._runs.get(run_id)
            if feed is not None:
                feed.readers -= 1
                self._release(run_id)

    def changed(self, run_id: str) -> asyncio.Future[None]:
        """What the next :meth:`wake` of ``run_id`` resolves — the caller's own future, so
        cancelling one reader never touches another's. A reader takes it *before* it
        reads the journal, so a wake that comes during the read is kept, not lost."""
        feed = self.state(run_id)
        # Timed out or cancelled, never woken: swept once the list outgrows its readers.
        if len(feed.waiters) >= WAITERS_SWEPT_AT + 2 * feed.readers:
            feed.waiters = [waiter for waiter in feed.waiters if not waiter.done()]
        changed = asyncio.get_running_loop().create_future()
        feed.waiters.append(changed)
        return changed

    @staticmethod
    async def wait(changed: asyncio.Future[None], seconds: float) -> None:
        """Until ``changed`` (from :meth:`changed`) is resolved, or ``seconds``: a timer
        that settles the reader's own future (no timeout scope, no shield per wait)."""
        if changed.done():
            return
        timer = changed.get_loop().call_later(seconds, _settle, changed)
        try:
            await changed
        finally:
            timer.cancel()

    def __len__(self) -> int:
        """How many runs this process keeps an entry for."""
        return len(self._runs)

    def _release(self, run_id: str) -> None:
        feed = self._runs.get(run_id)
        if feed is not None and not feed.writing and feed.readers <= 0:
            del self._runs[run_id]


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


feed = Feed()
_background: set[asyncio.Task[Any]] = set()


def _keep(task: asyncio.Task[Any]) -> None:
    """Hold a reference to a fire-and-forget task until it is done."""
    _background.add(task)
    task.add_done_callback(_background.discard)


def _remote_readers_possible() -> bool:
    """Whether readers may follow runs from other processes (a shared channel layer):
    with none, or the in-memory one, every reader was woken through the feed already."""
    layer = get_channel_layer()
    return layer is not None and not isinstance(layer, InMemoryChannelLayer)


async def _nudge(run_id: str, seq: int) -> None:
    layer = get_channel_layer()
    try:
        await layer.group_send(
            run_group(run_id), {"type": "run.nudge", "runId": run_id, "seq": seq}
        )
    except Exception:  # a full or unreachable layer only delays remote readers
        logger.warning("deuz: nudge for run %s not delivered", run_id, exc_info=True)


async def _publish(run_id: str, records: list[Record]) -> None:
    """Wake local readers now; nudge other processes, throttled per run (trailing edge)."""
    feed.publish(run_id, records)
    if not _remote_readers_possible():
        return
    state = feed.state(run_id)
    wait = NUDGE_INTERVAL - (time.monotonic() - state.last_nudge)
    if wait <= 0:
        state.last_nudge = time.monotonic()
        await _nudge(run_id, records[-1][0])
    elif not state.nudge_pending:
        state.nudge_pending = True

        async def trailing() -> None:
            await asyncio.sleep(wait)
            state.nudge_pending = False
            state.last_nudge = time.monotonic()
            latest = feed.recent(run_id, -1)
            await _nudge(run_id, latest[-1][0] if latest else records[-1][0])

        _keep(asyncio.ensure_future(trailing()))


_controllers: dict[str, AbortController] = {}  # legs journaled here, by run id
_interrupters: dict[str, TurnInterrupter] = {}  # those of them that may be interrupted


# -- one leg ------------------------------------------------------------------------------------


class LegStream:
    """What a leg does besides running: journal its parts and listen for ``cancel`` and
    — given an ``interrupter`` — ``interrupt``."""

    def __init__(
        self,
        run_id: str,
        writer: JournalWriter,
        controller: AbortController,
        interrupter: TurnInterrupter | None = None,
    ) -> None:
        self.run_id = run_id
        self.writer = writer
        self.controller = controller
        self.interrupter = interrupter
        self._listener: asyncio.Task[None] | None = None

    @classmethod
    async def open(
        cls,
        run_id: str,
        controller: AbortController,
        *,
        fence: object = None,
        interrupter: TurnInterrupter | None = None,
    ) -> LegStream:
        """``fence`` is the leg's lease: a journal that checks it drops a stale leg's
        parts. ``interrupter`` cuts the leg's model turn short on :func:`interrupt`."""
        writer = await JournalWriter.open(
            get_journal(),
            run_id,
            message_id=run_id,
            flush_interval=FLUSH_INTERVAL,
            on_flush=lambda records: _publish(run_id, records),
            fence=fence,
        )
        stream = cls(run_id, writer, controller, interrupter)
        _controllers[run_id] = controller
        if interrupter is not None:
            _interrupters[run_id] = interrupter
        feed.set_writing(run_id, True)
        layer = get_channel_layer()
        if layer is not None:
            stream._listener = asyncio.ensure_future(stream._listen(layer))
        return stream

    def add(self, part: StreamPart) -> None:
        self.writer.add(part)

    async def close(self) -> int:
        """Journal the leg's end and stop listening; returns the sentinel's seq."""
        try:
            return await self.writer.close()
        finally:
            feed.set_writing(self.run_id, False)
            if _controllers.get(self.run_id) is self.controller:
                del _controllers[self.run_id]
            if self.interrupter and _interrupters.get(self.run_id) is self.interrupter:
                del _interrupters[self.run_id]
            if self._listener is not None:
                self._listener.cancel()
                await asyncio.gather(self._listener, return_exceptions=True)

    async def _listen(self, layer: Any) -> None:
        channel = await layer.new_channel("deuz.leg.")
        group = control_group(self.run_id)
        await layer.group_add(group, channel)
        try:
            while True:
                message = await layer.receive(channel)
                if message.get("type") == "run.cancel":
                    self.controller.abort(
                        asyncio.CancelledError("cancelled by a client")
                    )
                elif message.get("type") == "run.interrupt" and self.interrupter:
                    self.interrupter.interrupt()
        finally:
            await layer.group_discard(group, channel)


# -- cancel ------------------------------------------------------------------------------------


async def cancel(run_id: str) -> None:
    """Abort the run's current leg wherever it runs (distinct from a client leaving)."""
    local = _controllers.get(run_id)
    if local is not None:
        local.abort(asyncio.CancelledError("cancelled by a client"))
    layer = get_channel_layer()
    if layer is not None:
        await layer.group_send(control_group(run_id), {"type": "run.cancel"})


async def interrupt(run_id: str) -> None:
    """Cut the model turn of the run's current leg short wherever it runs — never a
    tool — so that the leg takes the input queued for it at once (steering)."""
    local = _interrupters.get(run_id)
    if local is not None:
        local.interrupt()
    layer = get_channel_layer()
    if layer is not None:
        await layer.group_send(control_group(run_id), {"type": "run.interrupt"})


def _running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop of this thread, if one runs (a sync caller has none)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
