"""Questions for a person through the Django app: a question tool's call suspends the
run with a ``question`` row; the answer, checked against the question and recorded with
who gave it, becomes the call's result when the run resumes — also in a fresh process.
A bad answer is refused with the problem named and nothing recorded; standing rules and
grants never answer; a question's deadline times it out like an approval's."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User

from deuz_django import services, signals
from deuz_django.deadlines import sweep as deadline_sweep
from deuz_django.exceptions import InvalidVerdict
from deuz_django.models import Approval, ApprovalKind, ApprovalStatus, Run, StandingRule
from tests.django.processes import run_manage
from tests.django.question_agents import REFUND_QUESTION
from tests.django.run_support import (
    approval,
    history,
    let_time_pass,
    suspended,
    tool_results,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def asked(ann: User) -> Run:
    """A ``questioner`` run of ann's, suspended on its question ``q1``."""
    return suspended("questioner", owner=ann)


def question(run: Run) -> Approval:
    return approval(run, "ask_human")


def answer(run: Run, user: User, value: Any, **verdict: Any) -> Any:
    return services.decide_approval(
        question(run), user=user, approved=True, answer=value, **verdict
    )


def test_the_run_suspends_with_a_question_row(asked: Run) -> None:
    row = question(asked)
    assert (row.kind, row.status, row.approval_id) == (
        ApprovalKind.QUESTION,
        ApprovalStatus.PENDING,
        "q1",
    )
    assert row.question == {
        "text": REFUND_QUESTION["question"],
        "choices": REFUND_QUESTION["choices"],
    }
    assert row.input == REFUND_QUESTION
    assert asked.status == "suspended"


def test_the_answer_becomes_the_tool_result_and_who_answered_is_recorded(
    asked: Run, ann: User
) -> None:
    decision = answer(asked, ann, "store credit")
    assert decision.run_ready

    assert services.resume_run(asked.run_id).status == "completed"

    assert tool_results(asked)["q1"] == ("store credit", False)
    assert history(asked)[-1].content[0].text == "Answer: store credit"
    row = question(asked)
    assert (row.status, row.answer, row.decided_by) == (
        ApprovalStatus.APPROVED,
        "store credit",
        ann,
    )


def test_a_fresh_process_resumes_with_the_recorded_answer(
    asked: Run, ann: User
) -> None:
    answer(asked, ann, "card")
    resumed = run_manage("deuz", "resume", asked.run_id)
    assert resumed.returncode == 0, resumed.stderr
    asked.refresh_from_db()
    assert asked.status == "completed"
    assert tool_results(asked)["q1"] == ("card", False)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("cash", "answer: expected one of 'card', 'store credit'"),
        (None, "answer: give the answer to the question"),
        (["card"], "answer: expected one of 'card', 'store credit'"),
    ],
)
def test_a_bad_answer_is_refused_naming_the_problem_and_nothing_is_recorded(
    asked: Run, ann: User, value: Any, problem: str
) -> None:
    with pytest.raises(InvalidVerdict, match=problem) as refused:
        answer(asked, ann, value)
    assert "q1" in str(refused.value)
    row = question(asked)
    assert (row.status, row.answer, row.decided_by) == (
        ApprovalStatus.PENDING,
        None,
        None,
    )


def test_a_schema_answer_names_the_field_that_failed(ann: User) -> None:
    run = suspended("form_asker", owner=ann)
    with pytest.raises(InvalidVerdict, match=r"answer\.amount: 'ten' is not of type"):
        answer(run, ann, {"amount": "ten"})
    answer(run, ann, {"amount": 10})
    assert services.resume_run(run.run_id).status == "completed"
    assert tool_results(run)["q1"] == ({"amount": 10}, False)


def test_an_answer_to_a_call_that_asks_nothing_is_refused(ann: User) -> None:
    run = suspended("gated", owner=ann)
    with pytest.raises(InvalidVerdict, match="only a question is answered"):
        services.decide_approval(
            approval(run, "send_email"), user=ann, approved=True, answer="yes"
        )
    assert approval(run, "send_email").status == ApprovalStatus.PENDING


def test_declining_to_answer_tells_the_model_the_reason(asked: Run, ann: User) -> None:
    services.decide_approval(
        question(asked), user=ann, approved=False, reason="Ask me tomorrow."
    )
    assert services.resume_run(asked.run_id).status == "completed"
    assert tool_results(asked)["q1"] == (
        "Tool call denied. Reason: Ask me tomorrow.",
        True,
    )


def test_someone_who_may_not_see_the_run_cannot_answer(
    asked: Run, make_user: Callable[..., User]
) -> None:
    with pytest.raises(Exception, match="No approval with id"):
        answer(asked, make_user("eve"), "card")
    assert question(asked).status == ApprovalStatus.PENDING


def test_a_standing_rule_never_answers_a_question(
    make_user: Callable[..., User], ann: User
) -> None:
    StandingRule.objects.create(
        tool_name="ask_human",
        action="approve",
        created_by=make_user("boss"),
    )
    run = suspended("questioner", owner=ann)
    row = question(run)
    assert (row.status, row.decided_by_rule) == (ApprovalStatus.PENDING, None)


@pytest.fixture
def signalled() -> Iterator[list[tuple[str, Approval]]]:
    sent: list[tuple[str, Approval]] = []

    def asked(sender: type, approval: Approval, **kwargs: Any) -> None:
        sent.append(("question_asked", approval))

    def requested(sender: type, approval: Approval, **kwargs: Any) -> None:
        sent.append(("approval_requested", approval))

    signals.question_asked.connect(asked)
    signals.approval_requested.connect(requested)
    yield sent
    signals.question_asked.disconnect(asked)
    signals.approval_requested.disconnect(requested)


def test_a_question_sends_question_asked_not_approval_requested(
    ann: User, signalled: list[tuple[str, Approval]]
) -> None:
    run = suspended("questioner", owner=ann)
    assert [(name, a.approval_id) for name, a in signalled] == [
        ("question_asked", "q1")
    ]
    assert signalled[0][1].run == run


def test_an_unanswered_question_times_out_and_the_model_is_told(asked: Run) -> None:
    let_time_pass(asked, timedelta(hours=2))
    assert deadline_sweep.sweep().continued == [asked.run_id]
    assert question(asked).status == ApprovalStatus.EXPIRED
    asked.refresh_from_db()
    assert asked.status == "completed"
    assert tool_results(asked)["q1"] == (
        "Tool call denied. Reason: Timed out: nobody decided within 1 hour.",
        True,
    )
