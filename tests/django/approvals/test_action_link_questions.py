"""A notification's link to a question opens a page that asks it: a GET shows the
question and its answer form and records nothing; a POST answers (or declines) as every
verdict does, and the run goes on with the answer; a bad answer is a 400 saying what is
wrong, and nothing is recorded."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from deuz_django.approvals import links as action_links
from deuz_django.models import Approval, ApprovalStatus, Run
from deuz_django.runs.continuing import join_handed_off
from tests.django.notify_support import notifying
from tests.django.run_support import approval, suspended, tool_results

pytestmark = pytest.mark.django_db(transaction=True)
QUESTION = "Refund order A-1 to the card or as store credit?"


@pytest.fixture(autouse=True)
def links_on() -> Iterator[None]:
    with notifying():
        yield


@pytest.fixture
def asked(ann: User) -> Run:
    return suspended("questioner", owner=ann)


def question(run: Run) -> Approval:
    return approval(run, "ask_human")


def link_path(call: Approval) -> str:
    return reverse(
        action_links.ROUTE, kwargs={"token": action_links.make_token(call, "open")}
    )


def browser(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_question_is_only_opened_by_a_link(asked: Run) -> None:
    assert list(action_links.links(question(asked))) == ["open"]


def test_opening_the_link_asks_the_question_and_records_nothing(
    asked: Run, ann: User
) -> None:
    page = browser(ann).get(link_path(question(asked)))
    assert page.status_code == 200
    html = page.content.decode()
    assert f'<p class="question">{QUESTION}</p>' in html
    assert 'name="answer" value="card"' in html
    assert 'name="answer" value="store credit"' in html
    assert (
        '<button type="submit" name="verdict" value="approve">Answer</button>' in html
    )
    assert (
        '<button type="submit" name="verdict" value="deny">Decline to answer</button>'
        in html
    )
    assert question(asked).status == ApprovalStatus.PENDING


def test_answering_on_the_page_records_the_answer_and_the_run_goes_on(
    asked: Run, ann: User
) -> None:
    client = browser(ann)
    path = link_path(question(asked))
    done = client.post(path, {"verdict": "approve", "answer": "store credit"})
    assert done.status_code == 302
    row = question(asked)
    assert (row.status, row.answer, row.decided_by) == (
        ApprovalStatus.APPROVED,
        "store credit",
        ann,
    )
    join_handed_off()
    assert tool_results(asked)["q1"] == ("store credit", False)
    after = client.get(path).content.decode()
    assert "This call was decided already" in after
    assert "&quot;store credit&quot;" in after


def test_a_bad_answer_on_the_page_says_why_and_records_nothing(
    asked: Run, ann: User
) -> None:
    client = browser(ann)
    path = link_path(question(asked))
    done = client.post(path, {"verdict": "approve", "answer": "cash"}, follow=True)
    assert "answer: expected one of" in done.content.decode()
    assert question(asked).status == ApprovalStatus.PENDING


def test_an_answer_that_is_not_json_where_the_schema_needs_it_is_a_400(
    ann: User,
) -> None:
    run = suspended("form_asker", owner=ann)
    page = browser(ann).post(
        link_path(question(run)), {"verdict": "approve", "answer": "{nope"}
    )
    assert page.status_code == 400
    html = page.content.decode()
    assert "Answer: enter it as JSON (text in double quotes)." in html
    assert "It must match this JSON schema:" in html
    assert question(run).status == ApprovalStatus.PENDING


def test_declining_on_the_page_tells_the_model(asked: Run, ann: User) -> None:
    browser(ann).post(
        link_path(question(asked)), {"verdict": "deny", "reason": "Ask someone else."}
    )
    join_handed_off()
    assert question(asked).status == ApprovalStatus.DENIED
    assert tool_results(asked)["q1"] == (
        "Tool call denied. Reason: Ask someone else.",
        True,
    )
