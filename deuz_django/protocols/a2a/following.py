"""Following a task: the run's journal after a cursor, as A2A events, until the task
settles — completed, canceled, rejected, or waiting for input after a leg that ended
past the cursor. The journal is read by the app's one reader
(:func:`deuz_django.streaming.following.follow`), which also continues a run whose
process died, so a stream outlives the server that started the leg."""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass
from typing import cast

from a2a.types import a2a_pb2 as a2a
from asgiref.sync import sync_to_async

from ...core.journal import Record, is_done
from ...models import Run
from ...storage.stream_journal import get_journal
from ...streaming.following import Unavailable, follow
from .parts import EventMapper, TextFold
from .tasks import INPUT_REQUIRED, SETTLED, context_id, task, task_state, task_status

POLL_SECONDS = 0.15
SILENT_LOOK_SECONDS = 1.0
PAGE = 1000


async def journal_so_far(run_id: str) -> tuple[int, list[Record]]:
    """The journal's records now, and the last one's seq (``-1``: none yet)."""
    journal = get_journal()
    records: list[Record] = []
    while batch := await journal.read(run_id, records[-1][0] if records else -1, PAGE):
        records.extend(batch)
    return (records[-1][0] if records else -1), records


def _settled(run: Run, leg_ended: bool) -> bool:
    state = task_state(run)
    return state in SETTLED and (leg_ended or state != INPUT_REQUIRED)


def _final(run: Run) -> a2a.StreamResponse:
    return a2a.StreamResponse(
        status_update=a2a.TaskStatusUpdateEvent(
            task_id=run.run_id, context_id=context_id(run), status=task_status(run)
        )
    )


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A task as the journal held it up to ``last`` (``-1``: nothing yet), with the
    text its artifact holds: events follow from there."""

    task: a2a.Task
    last: int
    text: str


async def events(
    start: Snapshot, *, wait_for_leg: bool
) -> AsyncIterator[a2a.StreamResponse]:
    """The task's events after ``start``, ending with its status once it settles.
    ``wait_for_leg``: a task waiting for input settles only after a leg that ended
    past the snapshot (the one an answer started)."""
    run_id = start.task.id
    reload = sync_to_async(Run.objects.get)
    mapper = EventMapper(run_id, start.task.context_id, start.text)
    leg_ended = not wait_for_leg
    looked_at = -SILENT_LOOK_SECONDS  # the first silence looks at once
    reader = cast(
        AsyncGenerator[list[Record] | Unavailable, None],
        follow(run_id, start.last, poll_seconds=POLL_SECONDS),
    )
    async with aclosing(reader):
        async for update in reader:
            if isinstance(update, Unavailable):
                continue  # the reader retries; the task goes on
            for event in mapper.events(update):
                yield event
            ended = any(is_done(data) for _seq, data in update)
            leg_ended = leg_ended or ended
            # Mid-leg the run needs no look; while silent (a stop with no leg to
            # journal it) a look now and then.
            silent_for = time.monotonic() - looked_at
            if not ended and (update or silent_for < SILENT_LOOK_SECONDS):
                continue
            looked_at = time.monotonic()
            run = await reload(run_id=run_id)
            if _settled(run, leg_ended):
                yield await sync_to_async(_final)(run)
                return


async def settle(run_id: str, cursor: int, *, wait_for_leg: bool) -> None:
    """Wait until the task settles (a blocking ``message:send``)."""
    start = Snapshot(a2a.Task(id=run_id), cursor, "")
    async for _event in events(start, wait_for_leg=wait_for_leg):
        pass


async def snapshot(run_id: str, *, history_length: int | None = None) -> Snapshot:
    """The task now (its run must exist)."""
    last, records = await journal_so_far(run_id)
    run = await sync_to_async(Run.objects.get)(run_id=run_id)
    found = await sync_to_async(task)(run, records, history_length=history_length)
    fold = TextFold()
    fold.add(records)
    return Snapshot(found, last, fold.text)


def is_terminal(found: a2a.Task) -> bool:
    """Over for good: nothing more will happen to it."""
    return found.status.state in SETTLED - {INPUT_REQUIRED}
