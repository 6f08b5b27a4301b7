"""A client tool's real result across a restart (D11): the call of a tool without
``execute`` waits as a row of kind ``client_tool``; the client sends its result over REST
or the WebSocket (a verdict with ``answer``, no token), and the run — resumed by any
process — gives the call that result instead of the reference's placeholder."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User

from deuz_django import services
from deuz_django.exceptions import RunNotResumable
from deuz_django.models import ApprovalKind, ApprovalStatus, Run
from deuz_django.runs.continuing import join_handed_off
from tests.api.support import client, started, verdicts_url
from tests.django.processes import run_manage
from tests.django.run_support import approval, follow, history, tool_results, until_done

pytestmark = pytest.mark.django_db(transaction=True)
RESULT = {"colour": "blue", "hex": "#0000ff"}


@pytest.fixture
def waiting(ann: User) -> Run:
    """A ``client_caller`` run of ann's, suspended on its client tool call ``c1``."""
    return started(ann, agent="client_caller")


def post(user: User, run: Run, verdict: dict[str, Any], resume: bool = True) -> Any:
    return client(user).post(
        verdicts_url(run), {"verdicts": [verdict], "resume": resume}, format="json"
    )


def test_the_client_tool_call_waits_as_a_row(waiting: Run) -> None:
    assert waiting.status == "suspended"
    row = approval(waiting, "pick_colour")
    assert (row.kind, row.status, row.approval_id, row.token) == (
        ApprovalKind.CLIENT_TOOL,
        ApprovalStatus.PENDING,
        "c1",
        "",
    )


def test_the_result_sent_over_rest_becomes_the_calls_result(
    waiting: Run, ann: User
) -> None:
    response = post(
        ann, waiting, {"approvalId": "c1", "approved": True, "answer": RESULT}
    )
    assert response.status_code == 202, response.json()
    join_handed_off()
    waiting.refresh_from_db()
    assert waiting.status == "completed"
    assert tool_results(waiting)["c1"] == (RESULT, False)
    row = approval(waiting, "pick_colour")
    assert (row.answer, row.decided_by) == (RESULT, ann)


def test_a_fresh_process_resumes_with_the_recorded_result(
    waiting: Run, ann: User
) -> None:
    post(ann, waiting, {"approvalId": "c1", "approved": True, "answer": "green"}, False)
    resumed = run_manage("deuz", "resume", waiting.run_id)
    assert resumed.returncode == 0, resumed.stderr
    assert tool_results(waiting)["c1"] == ("green", False)
    assert history(waiting)[-1].content[0].text == "Result: green"


def test_approving_without_a_result_is_a_400_and_nothing_is_recorded(
    waiting: Run, ann: User
) -> None:
    response = post(ann, waiting, {"approvalId": "c1", "approved": True})
    assert response.status_code == 400
    (error,) = response.json()["errors"]
    assert (error["field"], error["message"]) == (
        "answer",
        "answer: give the client tool's result",
    )
    assert approval(waiting, "pick_colour").status == ApprovalStatus.PENDING


def test_the_run_waits_for_the_result_and_resuming_now_gives_the_placeholder(
    waiting: Run,
) -> None:
    with pytest.raises(RunNotResumable, match="still waits for a verdict on c1"):
        services.resume_run(waiting.run_id)
    assert services.resume_run(waiting.run_id, deny_remaining=True).status == (
        "completed"
    )
    assert tool_results(waiting)["c1"] == (
        "Tool call denied. Reason: Denied: the run was resumed without a verdict.",
        True,
    )


def test_someone_who_may_not_see_the_run_cannot_send_a_result(
    waiting: Run, make_user: Callable[..., User]
) -> None:
    response = post(
        make_user("eve"), waiting, {"approvalId": "c1", "approved": True, "answer": 1}
    )
    assert response.status_code == 404
    assert approval(waiting, "pick_colour").status == ApprovalStatus.PENDING


async def test_the_result_travels_with_an_approval_response_frame(
    waiting: Run, ann: User, ws_as: Any
) -> None:
    ws = await ws_as(ann)
    await follow(ws, waiting.run_id)
    await ws.send_json_to(
        {
            "type": "approval-response",
            "runId": waiting.run_id,
            "approvalId": "c1",
            "approved": True,
            "answer": RESULT,
        }
    )
    frames = await until_done(ws)
    recorded = next(f for f in frames if f.get("type") == "approval-recorded")
    assert (recorded["status"], recorded["resuming"]) == ("approved", True)
    row = await sync_to_async(approval)(waiting, "pick_colour")
    assert row.answer == RESULT
