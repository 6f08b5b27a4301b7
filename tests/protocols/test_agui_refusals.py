"""What the AG-UI endpoint refuses before anything is recorded or streamed, each with
the API's one error shape and status: bad input, unknown agents and threads, another
user's thread, a resume that breaks AG-UI's contract, new input on a thread."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from deuz_django.models import ApprovalStatus, Run
from tests.api.support import started

pytestmark = pytest.mark.django_db
URL = "/api/deuz/agents/{agent}/ag-ui/"


def post(
    user: User | None, body: Any, agent: str = "agui_mailer", **headers: str
) -> Any:
    client = Client()
    if user is not None:
        client.force_login(user)
    data = body if isinstance(body, str) else json.dumps(body)
    return client.post(
        URL.format(agent=agent), data, content_type="application/json", headers=headers
    )


def run_input(thread: str, **fields: Any) -> dict[str, Any]:
    return {"threadId": thread, "runId": "r", "messages": [], **fields}


def entry(interrupt_id: str, **fields: Any) -> dict[str, Any]:
    return {"interruptId": interrupt_id, "status": "resolved", **fields}


@pytest.fixture
def ann() -> User:
    return User.objects.create_user("ann", password="pw")


@pytest.fixture
def waiting(ann: User) -> Run:
    """Ann's agui_mailer run, suspended on its send_email call e1."""
    return started(ann, "agui_mailer")


def refusal(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.content
    body: dict[str, Any] = response.json()
    assert set(body) <= {"detail", "code", "errors"}
    return body


def test_only_signed_in_users_post() -> None:
    assert refusal(post(None, run_input("t1")), 401)["code"] == "not_authenticated"
    assert Client().get(URL.format(agent="agui_mailer")).status_code == 405


def test_a_body_that_is_no_run_agent_input_is_refused_naming_the_field(
    ann: User,
) -> None:
    assert refusal(post(ann, "{not json"), 400)["code"] == "invalid"
    body = refusal(post(ann, {"runId": "r", "messages": []}), 400)
    assert body["errors"][0]["field"] == "threadId"
    body = refusal(post(ann, run_input("no spaces here")), 400)
    assert body["errors"] == [
        {"field": "threadId", "message": "letters, digits, '-' and '_', at most 100"}
    ]
    body = refusal(post(ann, run_input("t1")), 400)
    assert body["errors"][0]["field"] == "messages"
    assert not Run.objects.exists()


def test_an_unknown_agent_or_thread_is_not_found(ann: User, waiting: Run) -> None:
    assert refusal(post(ann, run_input("t1"), agent="nobody"), 404)
    assert refusal(post(ann, run_input(waiting.run_id), agent="scripted"), 404)
    unknown = run_input("t2", resume=[entry("e1")])
    assert refusal(post(ann, unknown), 404)
    assert refusal(post(ann, run_input("t3"), **{"Last-Event-ID": "0"}), 404)


def test_another_users_thread_is_not_found_and_nothing_is_recorded(
    waiting: Run,
) -> None:
    bob = User.objects.create_user("bob", password="pw")
    body = run_input(waiting.run_id, resume=[entry("e1", payload={"approved": True})])
    assert refusal(post(bob, body), 404)["code"] == "not_found"
    rejoin = post(bob, run_input(waiting.run_id), **{"Last-Event-ID": "0"})
    assert refusal(rejoin, 404)
    # A new thread may not take another user's thread id either.
    new = run_input(
        waiting.run_id, messages=[{"id": "u", "role": "user", "content": "hi"}]
    )
    assert refusal(post(bob, new), 404)
    assert waiting.approvals.get().status == ApprovalStatus.PENDING


def test_pending_interrupts_block_new_input(ann: User, waiting: Run) -> None:
    more = run_input(
        waiting.run_id, messages=[{"id": "u2", "role": "user", "content": "And Bob?"}]
    )
    assert refusal(post(ann, more), 409)["code"] == "interrupts_pending"


def test_a_resume_must_answer_every_open_interrupt_once(
    ann: User, waiting: Run
) -> None:
    thread = waiting.run_id
    body = refusal(post(ann, run_input(thread, resume=[entry("x9")])), 400)
    assert body["errors"] == [
        {"field": "resume[0].interruptId", "message": "no interrupt with this id here"}
    ]
    twice = [entry("e1", status="cancelled"), entry("e1", status="cancelled")]
    body = refusal(post(ann, run_input(thread, resume=twice)), 400)
    assert body["errors"][0]["message"] == "answers the same interrupt twice"
    no_payload = refusal(post(ann, run_input(thread, resume=[entry("e1")])), 400)
    assert no_payload["errors"][0]["field"] == "resume[0].payload"
    extra = entry("e1", payload={"approved": True, "editedArguments": {"to": "bob"}})
    body = refusal(post(ann, run_input(thread, resume=[extra])), 400)
    assert "editedArguments" in body["detail"]
    assert waiting.approvals.get().status == ApprovalStatus.PENDING


def test_a_finished_thread_takes_no_new_input(ann: User) -> None:
    done = started(ann, "scripted")
    assert done.status == "completed"
    more = run_input(
        done.run_id, messages=[{"id": "u2", "role": "user", "content": "Again?"}]
    )
    assert refusal(post(ann, more, agent="scripted"), 409)["code"] == (
        "thread_not_continuable"
    )


def test_every_open_interrupt_needs_an_answer_and_the_permission_rules_hold(
    ann: User,
) -> None:
    run = started(ann, "gated")  # waits on r1 (a refund) and e1 (an email)
    tokens = dict(run.approvals.values_list("approval_id", "token"))

    def approving(call: str) -> dict[str, Any]:
        envelope = {"deuz": {"token": tokens[call]}}
        return entry(call, payload={"approved": True}, metadata=envelope)

    only_e1 = run_input(run.run_id, resume=[approving("e1")])
    body = refusal(post(ann, only_e1, agent="gated"), 400)
    assert body["code"] == "interrupts_unanswered"
    assert body["errors"] == [{"field": "resume", "message": "no answer to r1"}]
    # The owner may not approve the refund (separation of duties): 403, as over REST.
    both = run_input(run.run_id, resume=[approving("r1"), approving("e1")])
    assert refusal(post(ann, both, agent="gated"), 403)["code"] == "not_permitted"
    assert set(run.approvals.values_list("status", flat=True)) == {"pending"}
