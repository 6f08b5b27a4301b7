"""The in-memory feed keeps a run only while a leg of it is journaled here or a reader
here follows it: a long-lived daphne streaming many runs keeps its memory bounded."""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from deuz_django import services
from deuz_django.routing import websocket_urlpatterns
from deuz_django.streaming.live import feed

pytestmark = pytest.mark.django_db(transaction=True)


async def stream_runs(user: Any, count: int) -> None:
    """``count`` runs, each started and followed to its end over a socket that leaves."""
    for _ in range(count):
        ws = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/deuz/")
        ws.scope["user"] = user
        assert (await ws.connect())[0]
        await ws.send_json_to({"type": "start", "agent": "streamer", "text": "go"})
        while (await ws.receive_json_from(timeout=10)).get("type") != "done":
            pass
        assert len(feed) >= 1  # the run's entry lives while its reader is here
        await ws.disconnect()


async def test_a_run_leaves_the_feed_when_its_leg_ended_and_its_readers_left(
    make_user: Any,
) -> None:
    user = await sync_to_async(make_user)("ann")
    await stream_runs(user, 3)
    assert len(feed) == 0


async def test_streaming_many_runs_keeps_the_process_memory_bounded(
    make_user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEUZ_TEST_CHUNKS", "200")  # ~200 records a run
    user = await sync_to_async(make_user)("ann")
    await stream_runs(user, 20)  # warm up: caches, connections, code objects
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        await stream_runs(user, 60)
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    grown = sum(
        stat.size_diff
        for stat in after.compare_to(before, "filename")
        if "deuz_django" in stat.traceback[0].filename
    )
    # 60 runs x 200 records kept would be megabytes; what is left is bookkeeping.
    assert grown < 200_000, grown
    assert len(feed) == 0


async def test_a_leg_run_with_no_reader_leaves_nothing_behind(make_user: Any) -> None:
    owner = await sync_to_async(make_user)("ann")
    run = await sync_to_async(services.start_run)(
        agent="streamer", messages=[{"role": "user", "content": "go"}], owner=owner
    )
    outcome = await services.aresume_run(run.run_id)
    assert outcome.status == "completed"
    assert len(feed) == 0


def test_the_feed_answers_a_reader_with_exactly_the_records_after_its_cursor() -> None:
    records = [(seq, f'{{"n":{seq}}}') for seq in range(10)]
    feed.set_writing("r3", True)
    try:
        feed.publish("r3", records[:6])
        feed.publish("r3", records[6:])
        for after in range(-1, 10):
            assert feed.recent("r3", after) == records[after + 1 :]
    finally:
        feed.set_writing("r3", False)
    assert len(feed) == 0
