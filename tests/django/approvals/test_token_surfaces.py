"""Every verdict path makes the whole token check — HMAC, exactly this call, this run,
age — through one function (``verdicts.check_verdict``): the WebSocket, the surfaces that
verify the approval's stored token (the admin, the command) and the resume-time settle.
The REST API's table of bad tokens is ``test_api_verdicts``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from deuz_django import services
from deuz_django.conf import deuz_settings
from deuz_django.exceptions import InvalidVerdict
from deuz_django.models import Approval, Run
from deuz_django.routing import websocket_urlpatterns
from tests.api.support import approval, mint, started
from tests.django.agents import TOOL_PERMISSION
from tests.django.run_support import tool_results

BAD_TOKENS: dict[str, tuple[Callable[[Run, Approval], str], str]] = {
    "forged": (
        lambda run, row: mint(row, secret="not-the-secret-" * 3),
        "the token is forged, tampered with or garbled",
    ),
    "for another call": (
        lambda run, row: approval(run, "r1").token,
        "the token was minted for another call",
    ),
    "for another run": (
        lambda run, row: mint(row, run_id="some-other-run"),
        "the token was minted for another run",
    ),
    "expired": (
        # A young approval with an old token: only the token's own age can tell.
        lambda run, row: mint(
            row, age_seconds=float(deuz_settings.APPROVAL_MAX_AGE) + 60
        ),
        "the token has expired",
    ),
    "missing": (lambda run, row: "", "an approving verdict needs the approval's token"),
}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", BAD_TOKENS)
async def test_the_socket_refuses_every_kind_of_bad_token_and_stays_open(
    make_user: Any, case: str, effects: Callable[[], list[str]]
) -> None:
    ann = await sync_to_async(make_user)("ann")
    run = await sync_to_async(started)(ann)
    row = await sync_to_async(approval)(run, "e1")
    make_token, message = BAD_TOKENS[case]
    token = await sync_to_async(make_token)(run, row)
    ws = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/deuz/")
    ws.scope["user"] = ann
    assert (await ws.connect())[0]
    frame = {"type": "approval-response", "runId": run.run_id, "approvalId": "e1"}
    await ws.send_json_to({**frame, "approved": True, "token": token})
    error = await ws.receive_json_from(timeout=5)
    assert (error["type"], error["code"]) == ("error", "invalid_verdict")
    assert error["message"] == f"Approval e1: {message}."
    if token:
        assert token not in error["message"]
    row = await sync_to_async(approval)(run, "e1")
    assert row.status == "pending"
    await ws.send_json_to({**frame, "approved": False, "reason": "No."})
    recorded = await ws.receive_json_from(timeout=5)  # the socket is still open
    assert (recorded["type"], recorded["status"]) == ("approval-recorded", "denied")
    await ws.disconnect()
    assert effects() == []


@pytest.mark.django_db
@pytest.mark.parametrize("case", [c for c in BAD_TOKENS if c != "missing"])
def test_a_stored_token_gone_bad_is_refused_to_the_admin_and_the_command(
    make_user: Any, case: str
) -> None:
    ann = make_user("ann")
    run = started(ann)
    row = approval(run, "e1")
    make_token, message = BAD_TOKENS[case]
    Approval.objects.filter(pk=row.pk).update(token=make_token(run, row))
    row = approval(run, "e1")
    with pytest.raises(InvalidVerdict, match=f"^Approval e1: {message}.$"):
        services.decide_approval(row, user=ann, approved=True)  # the admin's call
    with pytest.raises(InvalidVerdict, match=f"^Approval e1: {message}.$"):
        services.record_operator_verdict(
            row, operator="ops", approved=True
        )  # the command
    assert approval(run, "e1").status == "pending"


@pytest.mark.django_db
@pytest.mark.parametrize("case", [c for c in BAD_TOKENS if c != "missing"])
def test_the_resume_time_settle_denies_an_approval_whose_token_went_bad(
    make_user: Any, case: str, effects: Callable[[], list[str]]
) -> None:
    fin = make_user(
        "fin",
        "deuz_django.view_run",
        "deuz_django.decide_approval",
        TOOL_PERMISSION,
        staff=True,
    )
    run = started(make_user("ann"))
    services.decide_approval(approval(run, "r1"), user=fin, approved=False)
    row = approval(run, "e1")
    services.decide_approval(row, user=fin, approved=True)
    make_token, _message = BAD_TOKENS[case]
    Approval.objects.filter(pk=row.pk).update(token=make_token(run, row))
    assert services.resume_run(run.run_id).status == "completed"
    assert tool_results(run)["e1"][1] is True  # denied, never executed
    assert effects() == []
