"""Deadlines on the WebSocket (frames unchanged): a socket following a run sees it go on
when its call times out — the call denied with the timeout as the reason, then the
answer — and a verdict that comes after the timeout is refused with nothing recorded."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from deuz_django.deadlines import sweep as deadline_sweep
from deuz_django.models import Approval, Run
from tests.django.run_support import let_time_pass

pytestmark = pytest.mark.django_db(transaction=True)
Connect = Callable[[Any], Awaitable[WebsocketCommunicator]]
TIMED_OUT = "Timed out: nobody decided within 10 minutes."
WAIT_ROUNDS = 3000


async def frames_until_done(ws: WebsocketCommunicator) -> list[dict[str, Any]]:
    seen = []
    while True:
        frame = await ws.receive_json_from(timeout=10)
        seen.append(frame)
        if frame.get("type") == "done":
            return seen


async def suspended_on_the_socket(ws: WebsocketCommunicator) -> Run:
    """A run started on the socket, suspended, its leg over (the lease released just
    after the leg's ``done``)."""
    await ws.send_json_to({"type": "start", "agent": "timed_nested", "text": "go"})
    run_id = (await frames_until_done(ws))[0]["runId"]

    held = Run.objects.filter(run_id=run_id).exclude(lease_owner="")
    for _ in range(WAIT_ROUNDS):  # a guard against hanging, not a timing
        if not await held.aexists():
            return await Run.objects.aget(run_id=run_id)
        await asyncio.sleep(0.02)
    raise AssertionError("the leg never released its lease")


async def test_a_socket_following_the_run_sees_it_go_on_when_its_call_times_out(
    ws_as: Connect, make_user: Any
) -> None:
    ws = await ws_as(await sync_to_async(make_user)("ann"))
    run = await suspended_on_the_socket(ws)
    await sync_to_async(let_time_pass)(run, timedelta(minutes=11))
    report = await sync_to_async(deadline_sweep.sweep)()
    assert report.continued == [run.run_id]
    parts = [f["part"] for f in await frames_until_done(ws) if "part" in f]
    denied = [p for p in parts if p["type"] == "sub-agent" and p["part"].get("denied")]
    assert denied[0]["part"]["deniedReason"] == TIMED_OUT
    texts = "".join(p.get("text", "") for p in parts if p["type"] == "text-delta")
    assert texts == "The researcher finished."


async def test_a_verdict_after_the_timeout_is_refused_on_the_socket(
    ws_as: Connect, make_user: Any
) -> None:
    ws = await ws_as(await sync_to_async(make_user)("ann"))
    run = await suspended_on_the_socket(ws)
    await sync_to_async(let_time_pass)(run, timedelta(minutes=11))
    await sync_to_async(deadline_sweep.act_on_due)()  # timed out, not continued yet
    await ws.send_json_to(
        {
            "type": "approval-response",
            "runId": run.run_id,
            "approvalId": "x1",
            "approved": False,
        }
    )
    error = await ws.receive_json_from(timeout=5)
    assert (error["type"], error["code"]) == ("error", "approval_already_decided")
    assert "was already expired" in error["message"]
    row = await Approval.objects.aget(run=run)
    assert (row.status, row.reason, row.decided_by_id) == ("expired", TIMED_OUT, None)
