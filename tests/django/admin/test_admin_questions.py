"""Questions in the admin: the run page, the approval's page and the queue show what a
question asks; its answer form (radio buttons for choices, a JSON box for a schema) goes
through the confirmation page, is recorded with who answered, and the run goes on with
it. A bad answer is refused with a message naming the problem, and nothing is recorded."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from deuz_django.models import Approval, ApprovalStatus, Run
from deuz_django.runs.continuing import join_handed_off
from tests.django.admin_support import DECIDER, QUEUE, decide_url, messages_of, run_url
from tests.django.run_support import approval, suspended, tool_results

pytestmark = pytest.mark.django_db(transaction=True)
MakeUser = Callable[..., User]
QUESTION = "Refund order A-1 to the card or as store credit?"


@pytest.fixture
def ann(client: Client, make_user: MakeUser) -> User:
    """A staff member who may decide, signed in; the runs below are hers."""
    user = make_user("ann", *DECIDER, staff=True)
    client.force_login(user)
    return user


@pytest.fixture
def asked(ann: User) -> Run:
    return suspended("questioner", owner=ann)


def question(run: Run) -> Approval:
    return approval(run, "ask_human")


def post(client: Client, target: Approval, **fields: str) -> Any:
    return client.post(
        decide_url(target), {"verdict": "approve", **fields}, follow=True
    )


def test_the_run_page_asks_the_question_with_a_button_per_choice(
    client: Client, asked: Run
) -> None:
    html = client.get(run_url(asked)).content.decode()
    assert f'<p class="deuz-question">{QUESTION}</p>' in html
    assert html.count('type="radio"') == 2
    assert 'name="answer" value="card"' in html
    assert 'name="answer" value="store credit"' in html
    assert "Decline to answer" in html
    page = client.get(
        reverse("admin:deuz_django_approval_change", args=[question(asked).pk])
    ).content.decode()
    assert 'name="answer" value="card"' in page
    assert "Choices: card, store credit" in page


def test_the_queue_shows_what_a_question_asks(client: Client, asked: Run) -> None:
    html = client.get(QUEUE).content.decode()
    assert f'<span class="deuz-question">{QUESTION}</span>' in html


def test_an_answer_is_confirmed_then_recorded_and_the_run_goes_on_with_it(
    client: Client, asked: Run, ann: User
) -> None:
    row = question(asked)

    page = client.post(decide_url(row), {"verdict": "approve", "answer": "card"})
    html = page.content.decode()
    assert "The answer to record" in html
    assert 'name="answer" value="card"' in html
    assert question(asked).is_pending

    done = post(client, row, answer="card", post="yes")

    assert messages_of(done)[0] == f"Answered ask_human (q1) on run {asked.run_id}."
    row = question(asked)
    assert (row.status, row.answer, row.decided_by) == (
        ApprovalStatus.APPROVED,
        "card",
        ann,
    )
    join_handed_off()
    assert tool_results(asked)["q1"] == ("card", False)
    history = client.get(
        reverse("admin:deuz_django_approval_change", args=[row.pk])
    ).content.decode()
    assert "&quot;card&quot;" in history


@pytest.mark.parametrize(
    ("agent", "answer", "message"),
    [
        (
            "questioner",
            "cash",
            "ask_human (q1) on run {run} was not answered: Approval q1: answer: "
            "expected one of 'card', 'store credit'.",
        ),
        (
            "questioner",
            "",
            "ask_human (q1) on run {run} was not answered: Approval q1: answer: "
            "give the answer to the question.",
        ),
        (
            "form_asker",
            "{not json",
            "Nothing was recorded: Answer: enter it as JSON (text in double quotes).",
        ),
        (
            "form_asker",
            '{"amount": 0}',
            "ask_human (q1) on run {run} was not answered: Approval q1: "
            "answer.amount: 0 is less than the minimum of 1.",
        ),
    ],
)
def test_a_bad_answer_is_refused_with_a_clear_message_and_nothing_is_recorded(
    client: Client, ann: User, agent: str, answer: str, message: str
) -> None:
    run = suspended(agent, owner=ann)

    done = post(client, question(run), answer=answer, post="yes")

    assert messages_of(done) == [message.format(run=run.run_id)]
    row = question(run)
    assert (row.status, row.answer, row.decided_by) == (
        ApprovalStatus.PENDING,
        None,
        None,
    )


def test_a_schema_question_gets_a_json_box_showing_the_schema(
    client: Client, ann: User
) -> None:
    run = suspended("form_asker", owner=ann)
    html = client.get(run_url(run)).content.decode()
    assert "Answer (JSON)" in html
    assert "The answer must match this JSON schema:" in html
    done = post(client, question(run), answer='{"amount": 7}', post="yes")
    assert messages_of(done)[0] == f"Answered ask_human (q1) on run {run.run_id}."
    join_handed_off()
    assert tool_results(run)["q1"] == ({"amount": 7}, False)


def test_declining_a_question_tells_the_model(client: Client, asked: Run) -> None:
    post(client, question(asked), verdict="deny", answer="card", post="yes")
    join_handed_off()
    assert question(asked).status == ApprovalStatus.DENIED
    assert tool_results(asked)["q1"] == ("Tool call denied.", True)


def test_a_client_tools_result_is_recorded_from_the_run_page_as_json(
    client: Client, ann: User
) -> None:
    run = suspended("client_caller", owner=ann)
    html = client.get(run_url(run)).content.decode()
    assert "The client tool's result (JSON)" in html
    call = approval(run, "pick_colour")
    refused = post(client, call, answer="{nope", post="yes")
    assert messages_of(refused) == [
        "Nothing was recorded: Answer: enter it as JSON (text in double quotes)."
    ]
    post(client, call, answer='{"colour": "blue"}', post="yes")
    join_handed_off()
    assert tool_results(run)["c1"] == ({"colour": "blue"}, False)
