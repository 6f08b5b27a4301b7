"""Cancelling the task that drives a leg aborts the leg but keeps its lease until the
leg really stopped: a tool still running in a worker thread is never raced by a new leg."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from deuz_django import services
from deuz_django.models import Run
from tests.django.run_support import ready_to_resume

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_cancelled_leg_holds_its_lease_until_its_tool_returns(
    make_user: Callable[..., Any], effects: Callable[[], list[str]], gate: Path
) -> None:
    owner = await sync_to_async(make_user)("ann")
    run = await sync_to_async(ready_to_resume)(owner)
    leg = asyncio.ensure_future(services.aresume_run(run.run_id))
    async with asyncio.timeout(60):  # a guard against hanging, not a timing test
        # The effect is a line a worker thread writes to a file: nothing to await.
        while effects() != ["hold:once"]:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
    leg.cancel()
    await asyncio.sleep(0)
    assert not leg.done()
    held = await Run.objects.aget(pk=run.pk)
    assert held.lease_owner  # still this leg's: its tool is running
    await asyncio.to_thread(gate.touch)
    with pytest.raises(asyncio.CancelledError):
        await leg
    released = await Run.objects.aget(pk=run.pk)
    assert (released.lease_owner, released.status) == ("", "suspended")
    # The aborted step was never checkpointed, but its tool's outcome is in the step
    # journal: the next leg uses it and does not run the tool again.
    outcome = await services.aresume_run(run.run_id)
    assert outcome.status == "completed"
    assert effects() == ["hold:once"]
    await sync_to_async(connections.close_all)()
