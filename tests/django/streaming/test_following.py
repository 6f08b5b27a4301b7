"""The journal reader (deuz_django.streaming.following): a nudge from the process that journals a
run wakes its readers elsewhere, whenever it comes."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from deuz_django import services
from deuz_django.core.journal import DONE
from deuz_django.storage import leases
from deuz_django.storage.stream_journal import get_journal
from deuz_django.streaming import following
from deuz_django.streaming.following import follow
from deuz_django.streaming.live import feed

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


async def test_a_reader_of_a_run_it_is_starting_does_not_check_it_for_abandonment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The consumer that starts a run continues it itself: its reader skips the check
    for an abandoned run it would otherwise make at once (a query per started run)."""
    run = await sync_to_async(services.start_run)(
        agent="streamer", messages=[{"role": "user", "content": "go"}]
    )
    checked: list[str] = []

    async def check(run_id: str) -> None:
        checked.append(run_id)

    monkeypatch.setattr(following, "_continue_if_abandoned", check)
    for starting in (True, False):
        reader = follow(run.run_id, -1, poll_seconds=NO_POLL, starting=starting)
        try:
            assert await anext(reader) == []  # nothing journaled yet
        finally:
            await reader.aclose()
    assert checked == [run.run_id]  # only the reader that did not start it checked


async def test_a_reader_that_leaves_does_not_disturb_another_reader_of_the_run() -> (
    None
):
    """Each reader waits on its own future: cancelling one while both wait for the run's
    next parts leaves the other waiting, and woken by the next wake."""
    with feed.reading("r1"):
        first, second = feed.changed("r1"), feed.changed("r1")
        leaving = asyncio.ensure_future(feed.wait(first, NO_POLL))
        staying = asyncio.ensure_future(feed.wait(second, NO_POLL))
        await asyncio.sleep(0)
        leaving.cancel()
        await asyncio.gather(leaving, return_exceptions=True)
        assert not staying.done()
        feed.wake("r1")
        async with asyncio.timeout(GUARD_SECONDS):
            await staying


async def test_a_silent_runs_polling_readers_keep_no_growing_list_of_waits() -> None:
    with feed.reading("r2"):
        for _ in range(500):  # a reader polling a silent run: every wait times out
            await feed.wait(feed.changed("r2"), 0.0)
        assert len(feed.state("r2").waiters) <= 64 + 2


async def test_a_reader_of_a_run_between_legs_checks_it_less_and_less_often(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A tab left open on a finished run, or reconnecting to one: after the leg's end
    the abandoned-run checks back off (doubling, up to a cap) instead of one query a
    second; mid-leg silence is checked at the steady pace, as a crashed leg must be
    noticed soon."""
    run = await sync_to_async(services.start_run)(
        agent="streamer", messages=[{"role": "user", "content": "go"}]
    )
    journal = get_journal()
    await journal.append(run.run_id, [(0, '{"type":"start"}')])
    checks: list[float] = []

    async def check(run_id: str) -> None:
        checks.append(asyncio.get_running_loop().time())

    monkeypatch.setattr(following, "_continue_if_abandoned", check)
    monkeypatch.setattr(following, "CONTINUE_AFTER_SECONDS", 0.02)
    monkeypatch.setattr(following, "IDLE_CHECKS_BACK_OFF_TO", 0.16)

    async def checks_within(seconds: float, cursor: int = -1) -> list[float]:
        checks.clear()
        reader = follow(run.run_id, cursor, poll_seconds=0.005)
        try:
            async with asyncio.timeout(seconds):
                async for _ in reader:
                    pass
        except TimeoutError:
            pass
        finally:
            await reader.aclose()
        return [later - earlier for earlier, later in itertools.pairwise(checks)]

    # Checks come no sooner than their interval, so the counts below are upper bounds
    # whatever the load; the mid-leg count's floor is a third of what it can reach.
    mid_leg = await checks_within(1.2)
    assert len(mid_leg) >= 20  # every ~0.02 s: up to 60

    # A tab reconnecting mid-leg, caught up (its lastSeq the leg's latest part).
    assert len(await checks_within(1.2, cursor=0)) >= 20

    await journal.append(run.run_id, [(1, DONE)])
    between_legs = await checks_within(1.2)
    assert len(between_legs) <= 8  # 0.04, 0.08, then every 0.16 s
    assert between_legs[0] < between_legs[-1]
    # A tab reconnecting caught up with the leg's end (after a deploy, every open tab
    # does) learns it from its first read, with no record to wait for.
    reconnected = await checks_within(1.2, cursor=1)
    assert len(reconnected) <= 8
    assert reconnected[0] < reconnected[-1]


async def test_a_reader_of_a_run_its_caller_just_started_does_not_read_the_empty_journal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The consumer follows a run it has just started before its leg writes anything:
    the reader waits for the leg's first parts instead of querying an empty journal."""
    run = await sync_to_async(services.start_run)(
        agent="streamer", messages=[{"role": "user", "content": "go"}]
    )
    journal = get_journal()
    real_read = journal.read
    reads: list[int] = []

    async def counting_read(run_id: str, after: int = -1, limit: int = 1000) -> Any:
        reads.append(after)
        return await real_read(run_id, after, limit)

    monkeypatch.setattr(journal, "read", counting_read)
    reader = follow(run.run_id, -1, poll_seconds=NO_POLL, starting=True)
    try:
        async with asyncio.timeout(GUARD_SECONDS):
            assert await anext(reader) == []
    finally:
        await reader.aclose()
    assert reads == []
