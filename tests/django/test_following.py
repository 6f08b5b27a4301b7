"""The journal reader (deuz_django.following): a nudge from the process that journals a
run wakes its readers elsewhere, whenever it comes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from deuz_django import leases, services
from deuz_django.following import follow
from deuz_django.journal import get_journal
from deuz_django.live import feed

pytestmark = pytest.mark.django_db(transaction=True)

NO_POLL = 3600.0  # only a nudge can wake the reader in time
GUARD_SECONDS = 30.0  # a reader that misses the nudge hangs: fail instead


async def test_a_nudge_that_comes_while_the_reader_reads_the_journal_wakes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found reading the soak's latencies (benchmarks/soak.py): a leg's last nudge,
    landing while a reader on another daphne read the journal, was dropped, and the
    reader waited for its next poll (a second) to send the leg's end."""
    run = await sync_to_async(services.start_run)(
        agent="streamer", messages=[{"role": "user", "content": "go"}]
    )
    await sync_to_async(leases.acquire)(run.run_id)  # another process drives the run
    journal = get_journal()
    real_read = journal.read
    appended: list[tuple[int, str]] = []

    async def read_while_the_leg_appends(
        run_id: str, after: int = -1, limit: int = 1000
    ) -> Any:
        records = await real_read(run_id, after, limit)
        if not appended:  # the leg appends and nudges after the read's query ran
            appended.append((0, '{"type":"start"}'))
            await sync_to_async(journal.append_sync)(run_id, appended)
            feed.wake(run_id)
        return records

    monkeypatch.setattr(journal, "read", read_while_the_leg_appends)
    reader = follow(run.run_id, -1, poll_seconds=NO_POLL)
    try:
        async with asyncio.timeout(GUARD_SECONDS):
            batch = await anext(reader)
            while not batch:
                batch = await anext(reader)
    finally:
        await reader.aclose()
    assert batch == appended
