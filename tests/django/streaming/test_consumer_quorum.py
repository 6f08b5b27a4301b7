"""A call that needs two approvals, decided on the WebSocket: the first
``approval-response`` is a vote (the call stays pending), the second approves it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Group

from deuz_django.models import Approval, ApprovalStatus, ApprovalVote
from tests.django.quorum_agents import FINANCE
from tests.django.run_support import suspended

pytestmark = pytest.mark.django_db(transaction=True)
Connect = Callable[[Any], Awaitable[WebsocketCommunicator]]
WAIT_ROUNDS = 500


def setting_up(make_user: Any) -> tuple[list[Any], Approval]:
    finance = Group.objects.create(name=FINANCE)
    voters = []
    for name in ("fin", "fay"):
        user = make_user(name, "deuz_django.view_run", "deuz_django.decide_approval")
        user.groups.add(finance)
        voters.append(user)
    run = suspended("pair", owner=make_user("ann"))
    return voters, Approval.objects.get(run=run, approval_id="e1")


async def send_vote(ws: WebsocketCommunicator, row: Approval, run_id: str) -> None:
    await ws.send_json_to(
        {
            "type": "approval-response",
            "runId": run_id,
            "approvalId": row.approval_id,
            "approved": True,
            "token": row.token,
        }
    )


async def votes_on(row: Approval, count: int) -> None:
    for _ in range(WAIT_ROUNDS):  # a guard against hanging, not a timing
        if await ApprovalVote.objects.filter(approval=row).acount() >= count:
            return
        await sync_to_async(lambda: None)()
    raise AssertionError(f"{count} votes were never recorded")


async def test_the_first_frame_is_a_vote_the_second_decides(
    ws_as: Connect, make_user: Any
) -> None:
    (fin, fay), row = await sync_to_async(setting_up)(make_user)
    run_id = await sync_to_async(lambda: row.run.run_id)()
    await send_vote(await ws_as(fin), row, run_id)
    await votes_on(row, 1)
    await row.arefresh_from_db()
    assert row.status == ApprovalStatus.PENDING
    await send_vote(await ws_as(fay), row, run_id)
    await votes_on(row, 2)
    for _ in range(WAIT_ROUNDS):
        await row.arefresh_from_db()
        if row.status != ApprovalStatus.PENDING:
            break
        await sync_to_async(lambda: None)()
    assert (row.status, row.decided_by_id) == (ApprovalStatus.APPROVED, fay.pk)
