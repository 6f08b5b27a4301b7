"""Runs of the test agents in the states the run-service tests start from."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.db import connection, connections, transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from deuz_django import services
from deuz_django.core import Message, ToolUsePart
from deuz_django.models import Approval, Run
from deuz_django.storage.step_journal import DjangoStepJournal
from deuz_django.storage.store import DjangoSessionStore, decode_message

PROMPT = [{"role": "user", "content": "Refund order A-1 and email Ann."}]

# For a test that looks at what a leg a request resumed did: the leg runs in the
# background (``continuation.hand_off``) on connections of its own, so the test commits
# what it sets up, and waits for the leg with ``continuation.join_handed_off()``.
background_leg = pytest.mark.django_db(transaction=True)


def suspended(agent: str = "gated", owner: Any = None) -> Run:
    """A run after its first leg, suspended on its gated calls."""
    run = services.start_run(agent=agent, messages=PROMPT, owner=owner)
    outcome = services.resume_run(run.run_id)
    assert outcome.status == "suspended", outcome
    run.refresh_from_db()
    return run


def ready_to_resume(owner: Any) -> Run:
    """A ``held`` run suspended on its one gated call, approved: ready for its next leg."""
    run = services.start_run(agent="held", messages=PROMPT, owner=owner)
    assert services.resume_run(run.run_id).status == "suspended"
    services.decide_approval(approval(run, "hold"), user=owner, approved=True)
    return run


def died_in(agent: str, call: ToolUsePart, owner: Any = None) -> Run:
    """A run of ``agent`` whose first leg recorded step 0's turn (the one ``call``) and
    the call's start, then died."""
    run = services.start_run(agent=agent, messages=PROMPT, owner=owner)
    journal = DjangoStepJournal()
    journal.record_turn(run.run_id, 0, 1, Message("assistant", (call,)))
    journal.record_start(run.run_id, 0, call.id)
    return run


def in_doubt(owner: Any) -> Run:
    """A ``slow`` run that died in ``s1`` (:func:`died_in`); its next leg suspends on
    ``s1`` (an ``outcome_unknown`` approval) instead of running it again."""
    run = died_in("slow", ToolUsePart("s1", "slow", {"step": 1}), owner)
    assert services.resume_run(run.run_id).status == "suspended"
    run.refresh_from_db()
    return run


def approval(run: Run, tool_name: str) -> Approval:
    return Approval.objects.select_related("run").get(run=run, tool_name=tool_name)


def age(approval: Approval, seconds: float) -> None:
    """Make an approval ``seconds`` old."""
    Approval.objects.filter(pk=approval.pk).update(
        created_at=timezone.now() - timedelta(seconds=seconds)
    )
    approval.refresh_from_db()


def history(run: Run) -> list[Any]:
    checkpoint = DjangoSessionStore().load(run.run_id)
    assert checkpoint is not None
    return list(checkpoint.messages)


def tool_results(run: Run) -> dict[str, tuple[Any, bool]]:
    """Each tool call's result in the run's history: ``{call_id: (result, is_error)}``."""
    results = {}
    for message in history(run):
        for part in message.parts:
            if hasattr(part, "tool_use_id"):
                results[part.tool_use_id] = (part.result, bool(part.is_error))
    return results


def stored_rows(run: Run) -> list[tuple[int, str]]:
    """The run's history rows as (index, role), to check none is lost or duplicated."""
    return list(run.messages.order_by("index").values_list("index", "role"))


def decoded(run: Run) -> list[Any]:
    return [
        decode_message(data, f"row {index}")
        for index, data in run.messages.values_list("index", "data")
    ]


def let_time_pass(run: Run, duration: timedelta) -> None:
    """As if ``duration`` passed since the run's calls were recorded: every time on its
    approval rows moves that much into the past."""
    fields = ("created_at", "remind_at", "reminded_at", "deadline_at", "escalated_at")
    Approval.objects.filter(run=run).update(
        **{name: F(name) - duration for name in fields}
    )
    Run.objects.filter(pk=run.pk).update(updated_at=F("updated_at") - duration)


async def follow(ws: WebsocketCommunicator, run_id: str) -> None:
    """Follow the run on the socket, past the replay of its first leg."""
    await ws.send_json_to({"type": "subscribe", "runId": run_id})
    seen: set[Any] = set()
    while not {"subscribed", "done"} <= seen:
        seen.add((await ws.receive_json_from(timeout=5)).get("type"))


async def until_done(ws: WebsocketCommunicator) -> list[dict[str, Any]]:
    """The frames up to the end of the leg a verdict resumed (it must not outlive the
    test: its connection would)."""
    frames = []
    while not frames or frames[-1].get("type") != "done":
        frames.append(await ws.receive_json_from(timeout=5))
    return frames


@contextmanager
def held_elsewhere(rows: QuerySet[Any], **sqlite_write: Any) -> Iterator[None]:
    """``rows`` held by another thread's open transaction until the block ends, as a
    stalled process or a verdict in flight holds them: locked on PostgreSQL; on SQLite,
    which locks the whole file, written (``sqlite_write``), making it the one writer."""
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                if connection.vendor == "sqlite":
                    rows.update(**sqlite_write)
                else:
                    list(rows.select_for_update())
                locked.set()
                release.wait(30)
        finally:
            connections.close_all()

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert locked.wait(10)
        yield
    finally:
        release.set()
        thread.join()


@contextmanager
def short_lock_timeout() -> Iterator[None]:
    """Waiting for a lock fails after 2 s on this thread's connection instead of the
    configured timeout (PostgreSQL's ``lock_timeout``, SQLite's busy timeout)."""
    connection.ensure_connection()
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA busy_timeout = 2000")
        try:
            yield
        finally:
            connection.close()  # the next query reconnects with the configured timeout
    else:
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '2s'")
        try:
            yield
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET lock_timeout")
