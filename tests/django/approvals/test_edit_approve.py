"""Edit, then approve, over REST and the WebSocket: a decider holding the edit permission
approves a call of an ``editable`` tool with a changed input; the tool runs with it, the
row keeps both inputs, and the model's tool result says a person changed the arguments.
Every bad edit is refused with an error naming the problem, and nothing is recorded."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User

from deuz_django import services
from deuz_django.core.approvals import EDITED_NOTE, input_digest
from deuz_django.core.durable import Authorization
from deuz_django.models import Approval, ApprovalStatus, Run
from deuz_django.storage.step_journal import DjangoStepJournal
from tests.api.support import approve, client, started, verdicts_url
from tests.django.run_support import approval, tool_results

pytestmark = pytest.mark.django_db(transaction=True)
MakeUser = Callable[..., User]
EDITOR = (
    "deuz_django.view_run",
    "deuz_django.decide_approval",
    "deuz_django.edit_approval_input",
)
EDITED = {"to": "ann", "amount": 20.0}


@pytest.fixture
def run(make_user: MakeUser) -> Run:
    """A ``payer`` run of ann's, suspended on ``pay`` (p1, editable) and an email (e1)."""
    return started(make_user("ann"), agent="payer")


@pytest.fixture
def fin(make_user: MakeUser) -> User:
    return make_user("fin", *EDITOR)


def post(user: User, run: Run, *verdicts: dict[str, Any]) -> Any:
    return client(user).post(
        verdicts_url(run), {"verdicts": list(verdicts), "resume": False}, format="json"
    )


def edited(run: Run, **fields: Any) -> dict[str, Any]:
    return {**approve(run, "p1"), "editedInput": EDITED, **fields}


def assert_nothing_recorded(run: Run) -> None:
    row = approval(run, "pay")
    assert (row.status, row.edited_input) == (ApprovalStatus.PENDING, None)


def test_an_edited_approval_runs_the_tool_with_the_edit_and_tells_the_model(
    run: Run, fin: User, effects: Callable[[], list[str]]
) -> None:
    response = post(fin, run, edited(run))
    assert response.status_code == 200, response.json()
    (decided,) = response.json()["decided"]
    assert (decided["input"], decided["editedInput"]) == (
        {"to": "ann", "amount": 50.0},
        EDITED,
    )
    services.decide_approval(approval(run, "send_email"), user=fin, approved=True)

    assert services.resume_run(run.run_id).status == "completed"

    assert "pay:ann:20.0" in effects()
    assert "pay:ann:50.0" not in effects()
    assert tool_results(run)["p1"] == (
        {"result": "paid 20.0 to ann", "editedInput": EDITED, "note": EDITED_NOTE},
        False,
    )
    row = approval(run, "pay")
    assert (row.input, row.edited_input, row.decided_by) == (
        {"to": "ann", "amount": 50.0},
        EDITED,
        fin,
    )


@pytest.mark.parametrize(
    ("change", "status", "field", "problem"),
    [
        (
            {"editedInput": {"to": "ann", "amount": "lots"}},
            400,
            "editedInput",
            "editedInput.amount: Input should be a valid number",
        ),
        (
            {"editedInput": {"to": "ann", "amount": 5, "tool": "send_email"}},
            400,
            "editedInput",
            "editedInput.tool: Extra inputs are not permitted",
        ),
        (
            {"toolName": "send_email"},
            400,
            "toolName",
            "A verdict never names the tool",
        ),
        (
            {"approved": False, "token": ""},
            400,
            "editedInput",
            "only an approving verdict may edit",
        ),
    ],
)
def test_a_bad_edit_is_refused_naming_the_problem_and_nothing_is_recorded(
    run: Run, fin: User, change: dict[str, Any], status: int, field: str, problem: str
) -> None:
    response = post(fin, run, edited(run, **change))

    assert response.status_code == status, response.json()
    (error,) = response.json()["errors"]
    assert error["field"] == field
    assert problem in error["message"]
    assert_nothing_recorded(run)


def test_an_edit_on_a_tool_that_is_not_editable_is_refused(run: Run, fin: User) -> None:
    verdict = {**approve(run, "e1"), "editedInput": {"to": "bob@example.com"}}

    response = post(fin, run, verdict)

    assert response.status_code == 400
    (error,) = response.json()["errors"]
    assert (error["field"], error["message"]) == (
        "editedInput",
        "the input of send_email calls may not be edited",
    )
    assert approval(run, "send_email").is_pending


def test_a_decider_without_the_edit_permission_may_approve_but_not_edit(
    run: Run, make_user: MakeUser
) -> None:
    clerk = make_user("clerk", "deuz_django.view_run", "deuz_django.decide_approval")

    refused = post(clerk, run, edited(run))

    assert refused.status_code == 403
    (error,) = refused.json()["errors"]
    assert error["field"] == "editedInput"
    assert "'deuz_django.edit_approval_input' permission" in error["message"]
    assert_nothing_recorded(run)
    assert post(clerk, run, approve(run, "p1")).status_code == 200


def test_the_owner_holding_the_edit_permission_still_may_not_approve_their_own_call(
    make_user: MakeUser,
) -> None:
    """Separation of duties is checked again for the edited call."""
    ann = make_user("ann", "deuz_django.edit_approval_input")
    run = started(ann, agent="payer")

    response = post(ann, run, edited(run))

    assert response.status_code == 403
    assert "may not approve their own pay call" in response.json()["detail"]
    assert_nothing_recorded(run)


# -- the WebSocket -----------------------------------------------------------------------


async def test_an_edit_travels_with_the_approval_response_frame(
    run: Run, fin: User, ws_as: Any
) -> None:
    ws = await ws_as(fin)
    verdict = await sync_to_async(edited)(run)
    await ws.send_json_to({"type": "approval-response", "runId": run.run_id, **verdict})
    frame = await ws.receive_json_from(timeout=5)
    assert (frame["type"], frame["status"]) == ("approval-recorded", "approved")
    row = await sync_to_async(approval)(run, "pay")
    assert row.edited_input == EDITED


async def test_a_bad_edit_on_the_socket_gets_an_error_frame_and_nothing_is_recorded(
    run: Run, fin: User, ws_as: Any
) -> None:
    ws = await ws_as(fin)
    verdict = await sync_to_async(edited)(
        run, editedInput={"to": "ann", "amount": "lots"}
    )
    await ws.send_json_to({"type": "approval-response", "runId": run.run_id, **verdict})
    error = await ws.receive_json_from(timeout=5)
    assert (error["type"], error["code"]) == ("error", "invalid_verdict")
    assert "editedInput.amount" in error["message"]
    await sync_to_async(assert_nothing_recorded)(run)


def test_an_edited_call_a_crash_left_in_doubt_runs_again_with_the_edit(
    run: Run, fin: User, effects: Callable[[], list[str]]
) -> None:
    """The edit outlives a crash inside the edited call: the in-doubt row shows what ran
    (the edit), and "run it again" runs the edit, never the model's original input."""
    assert post(fin, run, edited(run)).status_code == 200
    services.decide_approval(approval(run, "send_email"), user=fin, approved=True)
    # The leg that settled the verdicts died inside ``pay``: started on its decision
    # (the edit), no outcome.
    decided = approval(run, "pay")
    DjangoStepJournal().record_start(
        run.run_id,
        0,
        "p1",
        tool_name="pay",
        authorization=Authorization(str(decided.pk), input_digest(EDITED)),
    )
    assert services.resume_run(run.run_id).status == "suspended"
    in_doubt = Approval.objects.get(run=run, kind="outcome_unknown")
    assert (in_doubt.tool_call_id, in_doubt.edited_input) == ("p1", EDITED)
    assert not any(line.startswith("pay:") for line in effects())

    services.decide_approval(in_doubt, user=fin, approved=True)  # run it again
    assert services.resume_run(run.run_id).status == "completed"
    assert [line for line in effects() if line.startswith("pay:")] == ["pay:ann:20.0"]
