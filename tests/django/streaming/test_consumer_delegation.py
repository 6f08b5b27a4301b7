"""Delegation on the WebSocket: a delegate's ``approval-response`` frame is recorded on
their delegator's behalf; once the delegation is revoked, the same frame is refused
and nothing is recorded."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.utils import timezone

from deuz_django.approvals.delegated import delegate, revoke
from deuz_django.models import Approval, ApprovalStatus, Run
from tests.django.agents import TOOL_PERMISSION
from tests.django.run_support import suspended

pytestmark = pytest.mark.django_db(transaction=True)
Connect = Callable[[Any], Awaitable[WebsocketCommunicator]]
DECIDES = ("deuz_django.view_run", "deuz_django.decide_approval", TOOL_PERMISSION)


def setting_up(make_user: Any) -> tuple[Any, Any, Run]:
    fin = make_user("fin", *DECIDES, staff=True)
    bob = make_user("bob", "deuz_django.view_run", staff=True)
    lent = delegate(fin, bob, ends_at=timezone.now() + timedelta(days=1))
    return bob, lent, suspended(owner=make_user("ann"))


def frame(run: Run, approval_id: str, token: str) -> dict[str, Any]:
    return {
        "type": "approval-response",
        "runId": run.run_id,
        "approvalId": approval_id,
        "approved": True,
        "token": token,
    }


async def test_a_delegates_verdict_on_the_socket_is_on_their_delegators_behalf(
    ws_as: Connect, make_user: Any
) -> None:
    bob, lent, run = await sync_to_async(setting_up)(make_user)
    row = await Approval.objects.aget(run=run, approval_id="r1")
    ws = await ws_as(bob)
    await ws.send_json_to(frame(run, "r1", row.token))
    for _ in range(500):  # a guard against hanging, not a timing
        await row.arefresh_from_db()
        if row.status != ApprovalStatus.PENDING:
            break
        await ws.receive_nothing(timeout=0.02)
    assert (row.status, row.decided_by_id, row.decided_on_behalf_of_id) == (
        ApprovalStatus.APPROVED,
        bob.pk,
        lent.delegator_id,
    )


async def test_after_the_revocation_the_same_frame_is_refused(
    ws_as: Connect, make_user: Any
) -> None:
    bob, lent, run = await sync_to_async(setting_up)(make_user)
    await sync_to_async(revoke)(lent)
    row = await Approval.objects.aget(run=run, approval_id="e1")
    ws = await ws_as(bob)
    await ws.send_json_to(frame(run, "e1", row.token))
    error = await ws.receive_json_from(timeout=10)
    assert (error["type"], error["code"]) == ("error", "not_permitted")
    await row.arefresh_from_db()
    assert (row.status, row.decided_by_id) == (ApprovalStatus.PENDING, None)
