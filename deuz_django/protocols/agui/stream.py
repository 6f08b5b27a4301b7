"""One AG-UI run's event stream: the thread's journal after a cursor, mapped to events,
until the run pauses or ends.

It opens with ``RUN_STARTED`` and follows the run's journal with the one reader every
stream uses (:func:`deuz_django.streaming.following.follow`), so it sees legs of any
process and continues a run whose process died. At a leg's end it looks at the run once
it is at rest there (no leg holds its lease, nothing journaled after): a run waiting on
calls ends the stream with ``STATE_SNAPSHOT``, ``MESSAGES_SNAPSHOT`` and
``RUN_FINISHED`` with the ``interrupt`` outcome; a completed run with ``RUN_FINISHED``;
a stopped one with the ``cancelled`` outcome; a failed leg with ``RUN_ERROR``. Any other
leg end (a hand-over, a leg a rule continues) is followed on.

Every event mapped from a journal record is sent under that record's ``seq`` as its SSE
``id:`` — on the last event of the record's group, so a stream cut in the middle of a
group is replayed from the group's start — and the closing events under the leg end's.
``RUN_STARTED`` (and the re-opened text message of a rejoin) carry no ``id:``: a rejoin
sends its own.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence

from ag_ui.core import (
    PROTOCOL_VERSION,
    BaseEvent,
    MessagesSnapshotEvent,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
)
from ag_ui.encoder import EventEncoder
from asgiref.sync import sync_to_async
from django.utils import timezone

from ...core.journal import is_done
from ...models import Run, RunStatus
from ...storage.store import DjangoSessionStore
from ...storage.stream_journal import get_journal
from ...streaming.following import Unavailable, follow
from .events import EventMapper, open_text_before, text_message_id
from .interrupts import NAMESPACE, pending_interrupts
from .messages import snapshot_messages

POLL_SECONDS = 0.15
CHECK_BACK_OFF_TO = 2.0  # seconds between looks at a silent run's state, at most
HEARTBEAT_SECONDS = 15.0  # an SSE comment while a run is silent keeps proxies open
LOOK_BACK = 200  # records read at a time to find a rejoin's open text message
_encoder = EventEncoder()


def sse(events: Sequence[BaseEvent], seq: int | None = None) -> str:
    """``events`` as SSE, the last one under ``id: seq``."""
    frames = [_encoder.encode(event) for event in events]
    if frames and seq is not None:
        frames[-1] = f"id: {seq}\n{frames[-1]}"
    return "".join(frames)


def started(thread_id: str, run_id: str) -> RunStartedEvent:
    return RunStartedEvent(
        thread_id=thread_id, run_id=run_id, protocol_version=PROTOCOL_VERSION
    )


async def refused_run(
    thread_id: str, run_id: str, error: RunErrorEvent
) -> AsyncIterator[str]:
    """A run that fails before anything happens (an expired interrupt answered)."""
    yield sse([started(thread_id, run_id), error])


async def run_events(thread_id: str, run_id: str, cursor: int) -> AsyncIterator[str]:
    """The AG-UI run ``run_id`` of thread ``thread_id``: the journal after ``cursor``
    until the run pauses or ends."""
    mapper = EventMapper(thread_id)
    mapper.open_text = await _open_text(thread_id, cursor)
    yield sse([started(thread_id, run_id), *mapper.reopen()])
    at_leg_end = cursor >= 0 and await _is_leg_end(thread_id, cursor)
    last, checks = cursor, _Checks()
    async for update in follow(thread_id, cursor, poll_seconds=POLL_SECONDS):
        if isinstance(update, Unavailable):
            message = f"The run's stream cannot be read now: {update.error}"
            yield sse([RunErrorEvent(message=message, code="stream_unavailable")])
            return
        for seq, data in update:
            last, at_leg_end = seq, is_done(data)
            events = mapper.end_text() if at_leg_end else mapper.map(seq, data)
            if events:
                yield sse(events, seq)
            if mapper.failed:
                return
        if update:
            checks.heard()
        if at_leg_end and checks.due():
            closing = await _closing(thread_id, run_id, last)
            if closing:
                yield sse(closing, last)
                return
        if checks.silent_for(HEARTBEAT_SECONDS):
            yield ": waiting for the run\n\n"


class _Checks:
    """When a stream at a leg's end looks at the run again: at once, then backing off
    to every :data:`CHECK_BACK_OFF_TO` seconds while nothing is journaled (a run
    queued for a worker, or waiting between legs)."""

    def __init__(self) -> None:
        self.heard_at = self.checked_at = time.monotonic()
        self.every = 0.0

    def heard(self) -> None:
        self.heard_at = time.monotonic()
        self.every = 0.0

    def due(self) -> bool:
        now = time.monotonic()
        if now - self.checked_at < self.every:
            return False
        self.checked_at = now
        self.every = min(max(2 * self.every, POLL_SECONDS), CHECK_BACK_OFF_TO)
        return True

    def silent_for(self, seconds: float) -> bool:
        """Whether nothing was heard for ``seconds`` (then it counts as heard)."""
        if time.monotonic() - self.heard_at < seconds:
            return False
        self.heard_at = time.monotonic()
        return True


async def _is_leg_end(thread_id: str, cursor: int) -> bool:
    records = await get_journal().read(thread_id, cursor - 1, 1)
    return bool(records) and is_done(records[0][1])


async def _open_text(thread_id: str, cursor: int) -> str | None:
    """The id of the text message open at ``cursor`` (a rejoin in its middle)."""
    journal = get_journal()
    start, records = cursor, list[tuple[int, str]]()
    while start >= 0:
        after = max(-1, start - LOOK_BACK)
        records = [*await journal.read(thread_id, after, start - after), *records]
        first = open_text_before(records, cursor)
        if first is None:
            return None
        if first > after + 1 or after < 0:  # it begins within what was read
            return text_message_id(thread_id, first)
        start = after
    return None


async def _closing(thread_id: str, run_id: str, seq: int) -> list[BaseEvent]:
    """The events that end the AG-UI run at the leg end ``seq``, if the run is at rest
    there — no leg holds it, and nothing was journaled after ``seq`` — and paused or
    ended (``[]``: another leg follows, or is still ending)."""
    run = await sync_to_async(_at_rest)(thread_id)
    if run is None or await get_journal().last_seq(thread_id) != seq:
        return []
    return await sync_to_async(_ending)(run, run_id, seq)


def _at_rest(thread_id: str) -> Run | None:
    """The thread's run, unless a leg holds its lease (and may journal more)."""
    return (
        Run.objects.roots().lease_free(timezone.now()).filter(run_id=thread_id).first()
    )


def _ending(run: Run, run_id: str, seq: int) -> list[BaseEvent]:
    thread_id = run.run_id
    finished = RunFinishedEvent(thread_id=thread_id, run_id=run_id)
    if run.status == RunStatus.COMPLETED:
        finished.outcome = RunFinishedSuccessOutcome()
        return [finished]
    if run.status == RunStatus.STOPPED:
        finished.outcome = RunFinishedCancelledOutcome()
        return [finished]
    if run.status != RunStatus.SUSPENDED:
        return []
    interrupts = pending_interrupts(run)
    if not interrupts:
        return []
    for interrupt in interrupts:
        assert interrupt.metadata is not None  # interrupt_for fills it
        interrupt.metadata[NAMESPACE]["cursor"] = seq
    finished.outcome = RunFinishedInterruptOutcome(interrupts=interrupts)
    checkpoint = DjangoSessionStore().load(thread_id)
    history = checkpoint.messages if checkpoint is not None else ()
    state = {
        NAMESPACE: {
            "status": run.status,
            "stepIndex": run.step_index,
            "usage": run.usage,
            "waitingOn": [i.id for i in interrupts],
        }
    }
    return [
        StateSnapshotEvent(snapshot=state),
        MessagesSnapshotEvent(messages=snapshot_messages(thread_id, history)),
        finished,
    ]
