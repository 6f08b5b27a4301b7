"""Following a run's journal: the one reader behind the WebSocket consumer and the SSE view.

:func:`follow` yields what the run's journal holds after a cursor, then whatever follows,
for as long as the caller iterates: from this process's memory while a leg of the run is
journaled here (:data:`deuz_django.streaming.live.feed`), from the configured journal otherwise.
It is woken at once by legs in this process and by nudges from others, and polls on
silence, so a dropped nudge costs latency, never parts. When the run stays silent while
its process is gone — the journal open, the lease lapsed — the reader continues the run
here; the lease decides which of several readers does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from asgiref.sync import sync_to_async

from ..core.journal import Record, is_done
from ..runs.continuing import acontinue_quietly
from ..runs.recoverable import recoverable_runs
from ..storage.stream_journal import get_journal
from .live import feed

PAGE = 1000  # records read from the journal at a time
CONTINUE_AFTER_SECONDS = 1.0  # silence before (and between) the abandoned-run checks
# Between legs (the last record a leg's end) a run is abandoned only if a verdict's
# process died before resuming it, which the recovery sweep catches too: the checks
# back off, doubling up to this, so a tab left open on a finished run costs a query
# every half minute, not every second.
IDLE_CHECKS_BACK_OFF_TO = 30.0


@dataclass(frozen=True, slots=True)
class Unavailable:
    """The journal could not be read; the reader tries again after a poll interval."""

    error: Exception


@dataclass(slots=True)
class _AbandonedChecks:
    """When a silent run is checked for having been abandoned: once it was silent for
    ``every`` seconds and as long since the last check, less often while it is between
    legs."""

    quiet_since: float
    checked_at: float
    every: float

    @classmethod
    def begin(cls, *, at_once: bool) -> _AbandonedChecks:
        now = time.monotonic()
        since = now - CONTINUE_AFTER_SECONDS if at_once else now
        return cls(quiet_since=since, checked_at=since, every=CONTINUE_AFTER_SECONDS)

    def heard(self) -> None:
        """A record came: the silence starts over, checked after the first interval."""
        self.quiet_since = time.monotonic()
        self.every = CONTINUE_AFTER_SECONDS

    async def check_if_due(self, run_id: str, *, between_legs: bool) -> None:
        now = time.monotonic()
        if min(now - self.quiet_since, now - self.checked_at) >= self.every:
            self.checked_at = now
            await _continue_if_abandoned(run_id)
            if between_legs:
                self.every = min(2 * self.every, IDLE_CHECKS_BACK_OFF_TO)


async def follow(
    run_id: str, cursor: int, *, poll_seconds: float, starting: bool = False
) -> AsyncIterator[list[Record] | Unavailable]:
    """The run's records after ``cursor``, in order, a batch at a time, forever.

    An empty batch says a poll found nothing new: a caller that ends at some point (the
    SSE view, after the last leg's end) decides then. Leg ends are records too
    (:func:`deuz_django.core.journal.is_done`). ``starting``: the caller just started
    the run and is about to continue it itself, so its journal is still empty (not read)
    and the reader does not check at once whether the run was abandoned.
    """
    journal = get_journal()
    with feed.reading(run_id):
        # A reader that starts (or reconnects) to a silent run checks it at once: the
        # process that ran it may have just handed it over (a deploy).
        checks = _AbandonedChecks.begin(at_once=not starting)
        between_legs = False
        # The first read takes the cursor's own record too: a reader that reconnects
        # caught up learns whether it stopped at a leg's end (between legs) for free.
        after = cursor - 1 if cursor >= 0 else cursor
        while True:
            changed = feed.changed(run_id)  # before reading: a nudge meanwhile counts
            records = feed.recent(run_id, after)
            if records is None and starting:
                records = []  # a run just started: nothing journaled elsewhere
            starting = False
            if records is None:
                try:
                    limit = PAGE if after == cursor else PAGE + 1
                    records = await journal.read(run_id, after, limit)
                except Exception as error:  # a failing journal says so; we retry
                    yield Unavailable(error)
                    await asyncio.sleep(poll_seconds)
                    continue
            if after != cursor:
                if records and records[0][0] == cursor:
                    between_legs = is_done(records[0][1])
                    records = records[1:]
                after = cursor
            if records:
                cursor = after = records[-1][0]
                checks.heard()
                between_legs = is_done(records[-1][1])
                yield records
                if len(records) < PAGE and not between_legs:
                    # All there was, mid-leg: nothing new until ``changed`` says so
                    # (after a leg's end, the empty read below tells the caller).
                    await feed.wait(changed, poll_seconds)
                continue
            await checks.check_if_due(run_id, between_legs=between_legs)
            yield []
            await feed.wait(changed, poll_seconds)


async def _continue_if_abandoned(run_id: str) -> None:
    if await sync_to_async(recoverable_runs)(0, run_id=run_id):
        await acontinue_quietly(run_id)
