"""Answering a question over REST and the WebSocket: the answer travels with the verdict
and its token; an answer that fails the question is a 400 (an ``error`` frame on the
socket) naming the field and the problem, and nothing is recorded."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User

from deuz_django.models import ApprovalStatus, Run
from deuz_django.runs.continuing import join_handed_off
from tests.api.support import API, approve, client, started, verdicts_url
from tests.django.run_support import approval, follow, tool_results, until_done

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def asked(ann: User) -> Run:
    """A ``questioner`` run of ann's, suspended on its question ``q1``."""
    return started(ann, agent="questioner")


def answering(run: Run, answer: Any) -> dict[str, Any]:
    return {**approve(run, "q1"), "answer": answer}


def post(user: User, run: Run, verdict: dict[str, Any], resume: bool = False) -> Any:
    return client(user).post(
        verdicts_url(run), {"verdicts": [verdict], "resume": resume}, format="json"
    )


def assert_nothing_recorded(run: Run) -> None:
    row = approval(run, "ask_human")
    assert (row.status, row.answer, row.decided_by) == (
        ApprovalStatus.PENDING,
        None,
        None,
    )


# -- REST -----------------------------------------------------------------------------------


def test_the_pending_question_is_listed_with_what_it_asks(
    asked: Run, ann: User
) -> None:
    listed = client(ann).get(f"{API}/approvals/", {"runId": asked.run_id}).json()
    (row,) = listed["results"]
    assert (row["kind"], row["approvalId"], row["answer"]) == ("question", "q1", None)
    assert row["question"] == {
        "text": "Refund order A-1 to the card or as store credit?",
        "choices": ["card", "store credit"],
    }
    assert row["token"]


def test_an_answer_over_rest_is_recorded_and_the_run_continues_with_it(
    asked: Run, ann: User
) -> None:
    response = post(ann, asked, answering(asked, "card"), resume=True)
    assert response.status_code == 202, response.json()
    (decided,) = response.json()["decided"]
    assert (decided["status"], decided["answer"], decided["decidedBy"]) == (
        "approved",
        "card",
        "ann",
    )
    join_handed_off()
    asked.refresh_from_db()
    assert asked.status == "completed"
    assert tool_results(asked)["q1"] == ("card", False)


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("cash", "answer: expected one of 'card', 'store credit'"),
        ({"method": "card"}, "answer: expected one of 'card', 'store credit'"),
    ],
)
def test_an_answer_that_fails_the_question_is_a_400_and_nothing_is_recorded(
    asked: Run, ann: User, answer: Any, problem: str
) -> None:
    response = post(ann, asked, answering(asked, answer))
    assert response.status_code == 400, response.json()
    (error,) = response.json()["errors"]
    assert (error["index"], error["approvalId"], error["field"]) == (0, "q1", "answer")
    assert error["message"] == problem
    assert_nothing_recorded(asked)


def test_a_schema_answer_error_names_the_field_inside_the_answer(ann: User) -> None:
    run = started(ann, agent="form_asker")
    response = post(ann, run, answering(run, {"amount": 0}))
    assert response.status_code == 400
    (error,) = response.json()["errors"]
    assert error["field"] == "answer"
    assert error["message"] == "answer.amount: 0 is less than the minimum of 1"
    assert post(ann, run, answering(run, {"amount": 5})).status_code == 200


def test_approving_a_question_without_an_answer_is_a_400(asked: Run, ann: User) -> None:
    response = post(ann, asked, approve(asked, "q1"))
    assert response.status_code == 400
    (error,) = response.json()["errors"]
    assert (error["field"], error["message"]) == (
        "answer",
        "answer: give the answer to the question",
    )
    assert_nothing_recorded(asked)


def test_an_answer_without_its_token_is_refused(asked: Run, ann: User) -> None:
    response = post(ann, asked, {**answering(asked, "card"), "token": "v1.x.y"})
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "token"
    assert_nothing_recorded(asked)


def test_the_openapi_schema_documents_the_answer_and_the_question(ann: User) -> None:
    schema = client(ann).get(f"{API}/schema/", HTTP_ACCEPT="application/json").json()
    components = schema["components"]["schemas"]
    assert "answer" in components["VerdictRequest"]["properties"]
    assert set(components["Question"]["properties"]) == {"text", "choices", "schema"}
    assert "question" in components["Approval"]["properties"]


# -- the WebSocket ---------------------------------------------------------------------------


async def test_an_answer_travels_with_the_approval_response_frame(
    asked: Run, ann: User, ws_as: Any
) -> None:
    ws = await ws_as(ann)
    await follow(ws, asked.run_id)
    verdict = await sync_to_async(answering)(asked, "store credit")
    await ws.send_json_to(
        {"type": "approval-response", "runId": asked.run_id, **verdict}
    )
    frames = await until_done(ws)
    recorded = next(f for f in frames if f.get("type") == "approval-recorded")
    assert (recorded["status"], recorded["resuming"]) == ("approved", True)
    row = await sync_to_async(approval)(asked, "ask_human")
    assert (row.answer, row.decided_by_id) == ("store credit", ann.pk)


async def test_a_bad_answer_on_the_socket_gets_an_error_frame_and_nothing_is_recorded(
    asked: Run, ann: User, ws_as: Any
) -> None:
    ws = await ws_as(ann)
    verdict = await sync_to_async(answering)(asked, "cash")
    await ws.send_json_to(
        {"type": "approval-response", "runId": asked.run_id, **verdict}
    )
    error = await ws.receive_json_from(timeout=5)
    assert (error["type"], error["code"]) == ("error", "invalid_verdict")
    assert error["message"] == (
        "Approval q1: answer: expected one of 'card', 'store credit'."
    )
    await sync_to_async(assert_nothing_recorded)(asked)
