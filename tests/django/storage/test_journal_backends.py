"""The database and Redis journals pass the shared stream-journal contract."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import redis
from asgiref.sync import async_to_sync, sync_to_async
from django.db import connections

from deuz_django.core.journal import DONE
from deuz_django.core.testing.contracts import StreamJournalContract
from deuz_django.models import Run
from deuz_django.storage import stream_journal as journal_module
from deuz_django.storage.stream_journal import DatabaseJournal, RedisJournal

pytestmark = pytest.mark.django_db(transaction=True)


class TestDatabaseJournal(StreamJournalContract):
    @pytest.fixture
    def journal(self) -> DatabaseJournal:
        return DatabaseJournal()

    @pytest.fixture
    async def stream_id(self) -> str:
        run = await sync_to_async(Run.objects.create)(
            run_id="run-journal", agent="scripted"
        )
        return run.run_id


@pytest.fixture(scope="session")
def redis_prefix() -> Iterator[str]:
    """A key prefix of this test session's own: whatever a test leaves under it is
    deleted at the end — and reported, since each test cleans up after itself."""
    prefix = f"deuz:test:{uuid.uuid4().hex}:"
    yield prefix
    client = redis.Redis.from_url(RedisJournal().url)
    try:
        left = sorted(key.decode() for key in client.scan_iter(match=f"{prefix}*"))
        if left:
            client.delete(*left)
    finally:
        client.close()
    assert left == [], f"Redis keys left behind by the tests: {left}"


class TestRedisJournal(StreamJournalContract):
    @pytest.fixture
    async def journal(self, redis_prefix: str) -> AsyncIterator[RedisJournal]:
        journal = RedisJournal(prefix=f"{redis_prefix}{uuid.uuid4().hex}:")
        yield journal
        client = journal._redis
        keys = [key async for key in client.scan_iter(match=f"{journal.prefix}*")]
        if keys:
            await client.delete(*keys)
        await journal.aclose()

    async def test_a_tests_journal_keys_live_under_the_sessions_prefix(
        self, journal: RedisJournal, stream_id: str, redis_prefix: str
    ) -> None:
        # So the fixture finds and deletes them, and the session checks none are left.
        await journal.append(stream_id, [(0, "{}")])
        keys = [key async for key in journal._redis.scan_iter(match=f"{redis_prefix}*")]
        assert keys == [f"{journal.prefix}{stream_id}"]

    @pytest.fixture
    def stream_id(self) -> str:
        return "run-journal"


async def test_deleting_a_run_deletes_its_database_journal() -> None:
    run = await sync_to_async(Run.objects.create)(run_id="run-gone", agent="scripted")
    journal = DatabaseJournal()
    await journal.append(run.run_id, [(0, "{}")])
    await sync_to_async(run.delete)()
    assert await DatabaseJournal().last_seq("run-gone") is None


async def test_a_long_lived_database_journal_remembers_a_bounded_number_of_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A daphne streams runs for months: what its journal remembers of each (the row,
    the next seq) is forgotten past ``KNOWN_RUNS``, and a forgotten run appends and
    reads as before."""
    monkeypatch.setattr(journal_module, "KNOWN_RUNS", 3)
    journal = DatabaseJournal()
    run_ids = [f"run-many-{index}" for index in range(7)]
    for run_id in run_ids:
        await sync_to_async(Run.objects.create)(run_id=run_id, agent="scripted")
        await journal.append(run_id, [(0, '{"type":"start"}')])
        assert len(journal._run_pks) <= 3
        assert len(journal._next_seq) <= 3
    for run_id in run_ids:  # forgotten or not, each continues where it stopped
        await journal.append(run_id, [(1, '{"type":"finish"}')])
        assert await journal.read(run_id) == [
            (0, '{"type":"start"}'),
            (1, '{"type":"finish"}'),
        ]


def test_an_append_on_one_event_loop_never_waits_for_another_loops_round_trip(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker runs each leg on an event loop of its own, and its sweeper closes the
    journals dead processes left open on another. The sweeper's append completes on
    its loop while a leg's round trip is in flight on the other (when one round served
    every loop, the sweeper's append joined the leg's and was resolved from the leg's
    thread, which never woke the sweeper's loop: that sweep, and every later one of the
    process, waited forever, and the journal stayed open)."""
    Run.objects.create(run_id="run-leg", agent="scripted")
    Run.objects.create(run_id="run-ended", agent="scripted")
    journal = DatabaseJournal()
    in_flight, finish = threading.Event(), threading.Event()
    append_many = journal._append_many

    def slow_for_the_leg(batches: list[Any]) -> list[Exception | None]:
        if any(stream_id == "run-leg" for stream_id, _, _ in batches):
            in_flight.set()
            finish.wait(30)
        return append_many(batches)

    monkeypatch.setattr(journal, "_append_many", slow_for_the_leg)

    def leg() -> None:
        async_to_sync(journal.append)("run-leg", [(0, '{"type":"start"}')])
        connections.close_all()

    async def close_the_ended_run() -> None:
        await asyncio.wait_for(journal.append("run-ended", [(0, DONE)]), 10)  # a guard

    thread = threading.Thread(target=leg)
    thread.start()
    try:
        assert in_flight.wait(10)
        async_to_sync(close_the_ended_run)()
        assert journal.read_sync("run-ended") == [(0, DONE)]
    finally:
        finish.set()
        thread.join(30)
    assert journal.read_sync("run-leg") == [(0, '{"type":"start"}')]


async def test_a_leg_whose_lease_was_taken_over_cannot_append_to_the_journal() -> None:
    from deuz_django.core.journal import JournalWriter
    from deuz_django.storage import leases

    run = await sync_to_async(Run.objects.create)(run_id="run-fenced", agent="scripted")
    stale = await sync_to_async(leases.acquire)(run.run_id)
    journal = DatabaseJournal()
    writer = await JournalWriter.open(journal, run.run_id, message_id="m", fence=stale)
    writer.add_ui({"type": "text-delta", "text": "before"})
    await asyncio.sleep(0.05)  # the first append goes through
    # The lease lapses and another leg takes the run over (a new generation).
    await sync_to_async(Run.objects.filter(pk=run.pk).update)(lease_expires_at=None)
    fresh = await sync_to_async(leases.acquire)(run.run_id)
    assert fresh.generation == stale.generation + 1
    writer.add_ui({"type": "text-delta", "text": "stale"})
    await writer.close()
    assert writer.fenced
    assert [data for _, data in await journal.read(run.run_id)] == [
        '{"type":"start","messageId":"m"}',
        '{"type":"text-delta","text":"before"}',
    ]


async def test_deleting_a_journal_goes_through_the_configured_journal(
    settings: Any,
) -> None:
    # `deuz prune` and run deletion must reach Redis journals too, not just the table.
    from deuz_django import services
    from deuz_django.storage.stream_journal import get_journal

    settings.DEUZ = {
        **settings.DEUZ,
        "STREAM_JOURNAL": "deuz_django.storage.stream_journal.RedisJournal",
    }
    get_journal.cache_clear()
    try:
        journal = get_journal()
        assert isinstance(journal, RedisJournal)
        stream_id = f"run-{uuid.uuid4().hex}"
        await journal.append(stream_id, [(0, "{}")])
        await sync_to_async(services.delete_journal)(stream_id)
        assert await journal.last_seq(stream_id) is None
        await journal.aclose()
    finally:
        get_journal.cache_clear()
