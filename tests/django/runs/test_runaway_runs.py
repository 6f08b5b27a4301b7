"""One approval, one execution: a verdict settles the call of the ask it was given on,
never a later call that looks the same; a leg that ends where it began stops the run;
run-wide limits stop runaways that no person watches."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from deuz_django import services
from deuz_django.core import Message, ToolUsePart
from deuz_django.core.approvals import input_digest
from deuz_django.core.durable import Authorization, UnauthorizedExecution
from deuz_django.exceptions import RunNotResumable
from deuz_django.models import Approval, ApprovalStatus, Run, RunCall, RunStatus
from deuz_django.models.rules import StandingRule
from deuz_django.runs.continuing import join_handed_off
from deuz_django.signals import run_stopped
from deuz_django.storage.step_journal import DjangoStepJournal
from tests.api.support import client, started, verdicts_url
from tests.django.admin_support import decide_url, run_url
from tests.django.streaming.test_consumer import until

pytestmark = pytest.mark.django_db(transaction=True)


def asks(run: Run) -> list[tuple[int | None, str, str]]:
    """``(ask, call id, status)`` of every approval row, oldest first."""
    return list(
        Approval.objects.filter(run=run)
        .order_by("pk")
        .values_list("step_index", "approval_id", "status")
    )


def rule(maker: User, tool: str) -> StandingRule:
    return StandingRule.objects.create(
        tool_name=tool, action="approve", reason=f"{tool} is fine.", created_by=maker
    )


@pytest.fixture
def boss(make_user: Callable[..., User]) -> User:
    return make_user("boss", superuser=True)


# -- the reproduction -------------------------------------------------------------------


def test_one_approval_in_the_admin_runs_the_call_once_when_every_leg_reuses_its_id(
    ann: User, boss: User, effects: Callable[[], list[str]]
) -> None:
    """Each leg builds its ScriptedModel anew, so each re-issues ``toolu_1``: the one
    verdict settles the first ask only, the re-ask is the leg ending where it began,
    and the run stops there — with send_email run exactly once."""
    run = started(ann, agent="per_leg")
    assert run.status == RunStatus.SUSPENDED
    first = Approval.objects.get(run=run)

    browser = Client()
    browser.force_login(boss)
    response = browser.post(decide_url(first), {"verdict": "approve", "post": "yes"})
    assert response.status_code == 302  # at once: the leg is handed off
    join_handed_off(timeout=60)

    assert effects() == ["send_email:ann@example.com"]
    run.refresh_from_db()
    assert run.status == RunStatus.STOPPED
    assert "asked again for send_email" in run.stop_reason
    assert run.stopper == "the system"
    assert run.step_index <= 5  # within max_steps, far from a thousand
    assert [(s, i, st) for s, i, st in asks(run)] == [
        (first.step_index, "toolu_1", ApprovalStatus.APPROVED),
        (first.step_index + 1, "toolu_1", ApprovalStatus.CANCELLED),
    ]
    receipt = RunCall.objects.get(decision=first)
    assert (receipt.tool_call_id, receipt.tool_name, receipt.finished) == (
        "toolu_1",
        "send_email",
        True,
    )


def test_a_rule_that_approves_every_ask_does_not_loop_on_a_reused_call(
    ann: User, boss: User, effects: Callable[[], list[str]]
) -> None:
    """The automatic decision would re-trigger itself each leg: the second identical
    ask is not decided by the rule, and the run stops with the reason."""
    rule(boss, "send_email")
    received: list[Run] = []
    run_stopped.connect(lambda sender, run, **kw: received.append(run), weak=False)
    try:
        run = started(ann, agent="per_leg")
    finally:
        run_stopped.receivers.clear()
    assert effects() == ["send_email:ann@example.com"]
    run.refresh_from_db()
    assert run.status == RunStatus.STOPPED
    statuses = [status for _, _, status in asks(run)]
    assert statuses == [ApprovalStatus.APPROVED, ApprovalStatus.CANCELLED]
    assert [r.run_id for r in received] == [run.run_id]


# -- verdicts bound to their ask ----------------------------------------------------------


def test_a_token_from_an_earlier_ask_of_the_same_call_approves_nothing(
    ann: User, effects: Callable[[], list[str]]
) -> None:
    """The same call asked twice (same id, tool, input) signs to a valid token each
    time; a client echoing the first ask's token does not approve the second."""
    run = started(ann, agent="per_leg")
    first = Approval.objects.get(run=run)
    earlier_token = first.token
    # Ask the same call again at a later boundary, as a re-used id would.
    Run.objects.filter(pk=run.pk).update(step_index=run.step_index + 1)
    again = Approval.objects.create(
        run=run,
        approval_id="toolu_1",
        step_index=run.step_index + 1,
        tool_call_id="toolu_1",
        tool_name="send_email",
        input=first.input,
        input_digest=first.input_digest,
        token=first.token + "x",  # another signature than the first ask's
    )
    response = client(ann).post(
        verdicts_url(run),
        {
            "verdicts": [
                {"approvalId": "toolu_1", "approved": True, "token": earlier_token}
            ]
        },
        format="json",
    )
    assert response.status_code == 400
    assert "earlier request of this call" in response.json()["errors"][0]["message"]
    again.refresh_from_db()
    assert again.status == ApprovalStatus.PENDING
    assert effects() == []


def test_the_api_shows_each_decisions_receipt_and_its_ask(
    ann: User, boss: User
) -> None:
    run = started(ann, agent="per_leg")
    first = Approval.objects.get(run=run)
    services.decide_approval(first, user=ann, approved=True)
    services.resume_run(run.run_id)
    body = client(boss).get("/api/deuz/approvals/", {"status": "approved"}).json()
    (shown,) = body["results"]
    assert shown["stepIndex"] == first.step_index
    assert shown["execution"]["toolCallId"] == "toolu_1"
    assert shown["execution"]["finished"] is True
    assert shown["toolChanges"] == []


# -- the journal refuses executions without their own decision ---------------------------


def _decided(run: Run, call_id: str, **fields: Any) -> Approval:
    values = {
        "approval_id": call_id,
        "tool_call_id": call_id,
        "tool_name": "send_email",
        "input": {"to": "ann@example.com"},
        "status": ApprovalStatus.APPROVED,
        **fields,
    }
    values.setdefault("input_digest", input_digest(values["input"]))
    return Approval.objects.create(run=run, decided_at=timezone.now(), **values)


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"status": ApprovalStatus.DENIED}, "was denied"),
        ({"tool_call_id": "other"}, "approved call other"),
        ({"tool_name": "refund"}, "approved call"),
        ({"input": {"to": "eve@example.com"}}, "not the input it approved"),
        ({"edited_input": {"to": "bob@example.com"}}, "not the input it approved"),
    ],
)
def test_a_call_never_starts_on_a_decision_that_did_not_approve_exactly_it(
    ann: User, fields: dict[str, Any], why: str
) -> None:
    run = started(ann, agent="per_leg")
    decision = _decided(run, "toolu_9", step_index=99, **fields)
    journal = DjangoStepJournal()
    journal.record_turn(run.run_id, 50, 1, _turn("toolu_9"))
    with pytest.raises(UnauthorizedExecution, match=why):
        journal.record_start(
            run.run_id,
            50,
            "toolu_9",
            tool_name="send_email",
            authorization=Authorization(
                str(decision.pk), input_digest({"to": "ann@example.com"})
            ),
        )
    assert not RunCall.objects.filter(tool_call_id="toolu_9").exists()


def _turn(call_id: str) -> Message:
    return Message(
        "assistant", (ToolUsePart(call_id, "send_email", {"to": "ann@example.com"}),)
    )


# -- run-wide limits ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("agent", "reason", "executions"),
    [
        ("echo_forever", "limit of 3 executions of echo", 3),
        ("steps_bounded", "limit of 4 steps", 4),
        ("tokens_bounded", "limit of 40 tokens", 3),
    ],
)
def test_a_run_that_reaches_a_limit_stops_with_the_limit_as_its_reason(
    ann: User,
    agent: str,
    reason: str,
    executions: int,
    effects: Callable[[], list[str]],
) -> None:
    received: list[Run] = []
    run_stopped.connect(lambda sender, run, **kw: received.append(run), weak=False)
    try:
        run = started(ann, agent=agent)
    finally:
        run_stopped.receivers.clear()
    run.refresh_from_db()
    assert run.status == RunStatus.STOPPED
    assert reason in run.stop_reason
    assert run.last_error == ""  # stopped, not failed
    assert len(effects()) == executions
    assert [r.run_id for r in received] == [run.run_id]
    with pytest.raises(RunNotResumable, match="is stopped"):
        services.resume_run(run.run_id)  # nothing continues a stopped run


def test_legs_are_bounded_over_the_whole_run(
    ann: User, boss: User, effects: Callable[[], list[str]]
) -> None:
    """A rule approves each new ask (each a different call): the run would go on leg
    after leg; it stops when its legs run out."""
    rule(boss, "notify")
    run = started(ann, agent="endless_asks")
    run.refresh_from_db()
    assert run.status == RunStatus.STOPPED
    assert "limit of 3 legs" in run.stop_reason
    assert run.legs == 3
    assert effects() == ["notify:ann:n0", "notify:ann:n1"]


def test_a_run_stopped_by_a_limit_says_so_in_the_api_the_admin_and_the_command(
    ann: User, boss: User
) -> None:
    run = started(ann, agent="echo_forever")
    reason = "The run reached its limit of 3 executions of echo."
    shown = client(ann).get(f"/api/deuz/runs/{run.run_id}/").json()
    assert shown["status"] == "stopped"
    assert (shown["stop"]["by"], shown["stop"]["reason"]) == ("the system", reason)
    browser = Client()
    browser.force_login(boss)
    page = browser.get(run_url(run)).content.decode()
    assert f"Stopped by the system: {reason}" in page
    out = io.StringIO()
    call_command("deuz", "show", run.run_id, stdout=out)
    assert f"Stopped by the system: {reason}" in out.getvalue()


async def test_a_client_following_a_run_sees_the_limit_stop_it(
    ann: User, ws_as: Any
) -> None:
    ws = await ws_as(ann)
    await ws.send_json_to({"type": "start", "agent": "echo_forever", "text": "go"})
    frames = await until(ws, lambda frame: frame.get("type") == "done")
    parts = [f["part"] for f in frames if "part" in f]
    executed = [p for p in parts if p["type"] == "tool-result"]
    assert len(executed) == 3
    assert parts[-1] == {
        "type": "error",
        "message": "Stopped by the system: the run reached its limit of 3 "
        "executions of echo.",
    }
