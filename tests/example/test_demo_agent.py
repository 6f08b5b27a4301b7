"""The demo agent's conversations, driven through the run service as the chat drives them:
start, resume, decide, resume."""

from __future__ import annotations

import io
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from deuz_django import services
from deuz_django.core import Deps, Reconciliation, ToolContext
from deuz_django.core.approvals import input_digest
from deuz_django.core.durable import Authorization
from deuz_django.deadlines import sweep as deadline_sweep
from deuz_django.exceptions import NotPermitted
from deuz_django.models import Approval, Run, StandingRule
from deuz_django.permissions import decide_refusal
from deuz_django.rules.grants import Allow
from deuz_django.storage.step_journal import DjangoStepJournal
from example_project.agents import issue_refund, send_email
from example_project.models import Order, Refund, SentEmail
from tests.django.run_support import let_time_pass

from .support import answer, ask, decide, pending

# The tools run in worker threads, on their own connections: data must be committed.
pytestmark = pytest.mark.django_db(transaction=True)


def test_a_greeting_is_answered_with_what_the_assistant_can_do(shop: Any) -> None:
    run = ask(shop["customer"], "Hello!")
    assert run.status == "completed"
    assert answer(run).startswith("Hi! I can look up an order")


def test_an_order_question_looks_the_order_up(shop: Any) -> None:
    run = ask(shop["customer"], "Where is order A-1002?")
    assert run.status == "completed"
    assert answer(run) == "Order A-1002 (Coffee grinder, $89.50) is shipped."


def test_an_unknown_order_gets_a_friendly_answer(shop: Any) -> None:
    run = ask(shop["customer"], "Where is order Z-999?")
    assert run.status == "completed"
    assert answer(run) == "I couldn't find that order: There is no order Z-999."


def test_a_refund_waits_for_staff_the_customer_may_not_approve_it(shop: Any) -> None:
    run = ask(shop["customer"], "Please refund order A-1001")
    assert run.status == "suspended"
    approval = pending(run)
    assert (approval.tool_name, approval.input) == (
        "issue_refund",
        {"order_id": "A-1001", "amount": 249, "reason": "Customer request"},
    )
    with pytest.raises(NotPermitted, match="needs the 'example_project"):
        services.decide_approval(
            approval, user=shop["customer"], approved=True, token=approval.token
        )

    run = decide(run, shop["staff"], approved=True)

    assert run.status == "completed"
    assert answer(run) == (
        "Good news: Refunded $249.00 on A-1001. It reaches your card in 3–5 business days."
    )
    order = Order.objects.get(number="A-1001")
    assert (order.status, order.refunded) == ("refunded", Decimal("249.00"))


@pytest.mark.parametrize("refunded", [True, False], ids=["happened", "did-not-happen"])
def test_a_refund_a_crash_left_in_doubt_completes_without_asking_anyone(
    shop: Any, refunded: bool
) -> None:
    """Staff approved; a leg started the refund and died — after the refund went out,
    or before. The next leg asks the tool, which finds its ``Refund`` row (or none, and
    refunds now): the run completes, the order is refunded once, and no person is asked
    whether it happened."""
    run = ask(shop["customer"], "Please refund order A-1001")
    approval = pending(run)
    services.decide_approval(
        approval, user=shop["staff"], approved=True, token=approval.token
    )
    journal = DjangoStepJournal()
    step = journal.latest_step(run.run_id)
    assert step is not None
    journal.record_start(  # on the staff's decision, as the leg that died did
        run.run_id,
        step.step_index,
        approval.tool_call_id,
        tool_name="issue_refund",
        authorization=Authorization(str(approval.pk), input_digest(approval.input)),
    )
    if refunded:
        ctx = ToolContext(
            tool_call_id=approval.tool_call_id,
            tool_name="issue_refund",
            messages=(),
            signal=None,
            deps=Deps(),
            idempotency_scope=run.run_id,
        )
        assert issue_refund.execute is not None
        issue_refund.execute(approval.input, ctx)

    services.resume_run(run.run_id)
    run.refresh_from_db()

    assert run.status == "completed"
    assert answer(run).startswith("Good news: Refunded $249.00 on A-1001.")
    assert Order.objects.get(number="A-1001").refunded == Decimal("249.00")
    assert Refund.objects.count() == 1
    assert not run.approvals.filter(kind="outcome_unknown").exists()


def test_a_refund_of_at_most_20_dollars_is_approved_by_staffs_standing_rule(
    shop: Any,
) -> None:
    """No person is asked: the rule decides as the run suspends, and the run goes on."""
    run = ask(shop["customer"], "Please refund $15 on order A-1003")

    assert run.status == "completed"
    assert answer(run) == (
        "Good news: Refunded $15.00 on A-1003. It reaches your card in 3–5 business days."
    )
    (approval,) = Approval.objects.filter(run=run).select_related("decided_by_rule")
    rule = StandingRule.objects.get(tool_name="issue_refund")
    assert (approval.status, approval.decided_by_rule, approval.reason) == (
        "approved",
        rule,
        "Refunds of at most $20 are approved automatically.",
    )
    assert rule.created_by == shop["staff"]
    assert Order.objects.get(number="A-1003").refunded == Decimal("15.00")


def test_a_refund_over_20_dollars_still_waits_for_staff(shop: Any) -> None:
    run = ask(shop["customer"], "Please refund $25 on order A-1003")

    assert run.status == "suspended"
    assert pending(run).input["amount"] == 25


def _answered(run: Run, user: User, answer: str) -> Run:
    """Answer the run's pending question (echoing its token, as the chat does), resume."""
    question = pending(run)
    decision = services.decide_approval(
        question, user=user, approved=True, answer=answer, token=question.token
    )
    assert decision.run_ready
    services.resume_run(run.run_id)
    run.refresh_from_db()
    return run


def test_a_customer_who_mentions_store_credit_is_asked_and_the_answer_is_used(
    shop: Any,
) -> None:
    run = ask(shop["customer"], "Refund order A-1001 or give me store credit")
    assert run.status == "suspended"
    question = pending(run)
    assert (question.kind, question.tool_name, question.question) == (
        "question",
        "ask_human",
        {
            "text": "Should the refund go back to your card, or be store credit?",
            "choices": ["card", "store credit"],
        },
    )

    run = _answered(run, shop["customer"], "store credit")

    assert run.status == "suspended"  # the refund itself still waits for staff
    refund = pending(run)
    assert refund.input["reason"] == "Customer request (as store credit)"
    run = decide(run, shop["staff"], approved=True)
    assert answer(run) == (
        "Good news: Refunded $249.00 on A-1001. It is on your account as store credit."
    )
    assert (
        Approval.objects.get(run=run, tool_name="ask_human").decided_by
        == (shop["customer"])
    )


def test_a_question_the_customer_declines_refunds_nothing(shop: Any) -> None:
    run = ask(shop["customer"], "Refund order A-1002 or store credit?")
    services.decide_approval(
        pending(run), user=shop["customer"], approved=False, reason="Not now."
    )
    services.resume_run(run.run_id)
    assert answer(run) == (
        "Understood, I won't refund it yet. (Tool call denied. Reason: Not now.)"
    )
    assert Order.objects.get(number="A-1002").refunded == Decimal("0")


def test_a_refund_staff_deny_is_explained_and_refunds_nothing(shop: Any) -> None:
    run = ask(shop["customer"], "Please refund order A-1002")
    run = decide(run, shop["staff"], approved=False, reason="Outside the policy.")
    assert answer(run) == (
        "I'm sorry, the refund was not approved. "
        "(Tool call denied. Reason: Outside the policy.)"
    )
    order = Order.objects.get(number="A-1002")
    assert (order.status, order.refunded) == ("shipped", Decimal("0"))


def test_a_refund_nobody_decides_goes_to_the_finance_leads_then_times_out(
    shop: Any,
) -> None:
    run = ask(shop["customer"], "Please refund order A-1002")
    refund = pending(run)
    assert refund.deadline_at == refund.created_at + timedelta(hours=1)
    assert refund.remind_at == refund.created_at + timedelta(minutes=15)
    assert refund.escalate_to == "group:Finance leads"
    # The lead, whom it escalates to, may decide it (the group's permissions).
    assert decide_refusal(shop["lead"], refund, approving=True) is None
    let_time_pass(run, timedelta(hours=1, seconds=1))
    assert deadline_sweep.sweep().escalated == [f"{run.run_id}:{refund.approval_id}"]
    let_time_pass(run, timedelta(hours=1, seconds=1))
    assert deadline_sweep.sweep().continued == [run.run_id]
    run.refresh_from_db()
    assert run.status == "completed"
    assert answer(run) == (
        "I'm sorry, the refund request timed out before finance decided, so no "
        "money moved. Ask me again and I'll send a new request."
    )
    order = Order.objects.get(number="A-1002")
    assert (order.status, order.refunded) == ("shipped", Decimal("0"))


@pytest.mark.parametrize(
    ("approved", "expected"),
    [
        (True, "Done — Email 'About your order A-1003' sent to ann@example.com."),
        (
            False,
            "Understood, I did not send the email. "
            "(Tool call denied. Reason: Not now.)",
        ),
    ],
)
def test_the_customer_decides_an_email_in_the_chat(
    shop: Any, approved: bool, expected: str
) -> None:
    run = ask(shop["customer"], "Email order A-1003 to ann@example.com")
    assert pending(run).input == {
        "to": "ann@example.com",
        "subject": "About your order A-1003",
        "body": "Here is the summary you asked for.",
    }
    run = decide(run, shop["customer"], approved=approved, reason="Not now.")
    assert run.status == "completed"
    assert answer(run) == expected


def test_allowing_the_first_of_two_emails_for_the_chat_sends_the_second_unasked(
    shop: Any,
) -> None:
    run = ask(shop["customer"], "Email me about A-1001 and A-1002")
    first = pending(run)
    assert first.input["subject"] == "About your order A-1001"

    services.decide_approval(
        first,
        user=shop["customer"],
        approved=True,
        token=first.token,
        allow=Allow("run"),
    )
    services.resume_run(run.run_id)
    run.refresh_from_db()

    assert run.status == "completed"
    assert answer(run) == (
        "Done — Email 'About your order A-1001' sent to customer@example.com. "
        "Email 'About your order A-1002' sent to customer@example.com."
    )
    second = Approval.objects.select_related("decided_by_grant").get(
        run=run, approval_id="email_1_2"
    )
    assert second.decided_by_grant.approval == first


def test_the_researchers_note_bubbles_up_with_its_agent_path(shop: Any) -> None:
    run = ask(shop["customer"], "Research the return policy")
    approval = pending(run)
    assert (approval.tool_name, approval.agent_path) == ("save_note", ["researcher"])
    note = approval.input["text"]
    assert note.startswith(
        "Returns are accepted within 30 days of delivery. Refunds reach the original "
    )
    assert ".;" not in note
    assert note.endswith("'Returns and refunds'.")  # the article the question is about

    run = decide(run, shop["customer"], approved=True)

    assert run.status == "completed"
    # The researcher's answer is its own (shown in its box); the assistant's does not
    # repeat it.
    child = Run.objects.get(parent=run)
    assert answer(child) == (
        "Returns are accepted within 30 days and refunds take 3–5 business days. "
        "I saved a note to your file."
    )
    assert answer(run) == "That is what the researcher found. Anything else?"


def test_an_email_without_an_order_number_uses_the_latest_order_and_says_so(
    shop: Any,
) -> None:
    run = ask(shop["customer"], "Email me the details")
    assert pending(run).input["subject"] == "About your order A-1003"

    run = decide(run, shop["customer"], approved=True)

    assert answer(run) == (
        "Done — Email 'About your order A-1003' sent to customer@example.com. "
        "You didn't name an order, so I used your latest one, A-1003."
    )


def test_a_refund_without_an_order_number_asks_which_order(shop: Any) -> None:
    run = ask(shop["customer"], "Please refund my order")
    assert run.status == "completed"
    assert answer(run).startswith("Which order should I refund?")
    assert not run.approvals.exists()


def test_an_order_question_without_a_number_answers_about_the_latest_order(
    shop: Any,
) -> None:
    run = ask(shop["customer"], "Where is my order?")
    assert (
        answer(run)
        == "Your latest order, A-1003 (Milk frother, $39.90), is processing."
    )


def test_demo_setup_can_run_again_and_prints_the_credentials(shop: Any) -> None:
    out = io.StringIO()
    call_command("demo_setup", stdout=out)
    assert "customer / customer-pass" in out.getvalue()
    assert "staff / staff-pass" in out.getvalue()
    assert "lead / lead-pass" in out.getvalue()
    assert User.objects.count() == 3
    assert StandingRule.objects.count() == 1
    assert list(Order.objects.values_list("number", flat=True)) == [
        "A-1001",
        "A-1002",
        "A-1003",
    ]
    staff = User.objects.get(username="staff")
    assert staff.is_staff
    assert staff.has_perm("example_project.approve_refund")
    assert staff.has_perm("deuz_django.edit_approval_input")
    assert User.objects.get(username="customer").check_password("customer-pass")
    assert not User.objects.get(username="customer").has_perm(
        "example_project.approve_refund"
    )


def test_a_refund_and_an_email_in_doubt_are_found_by_their_idempotency_key(
    shop: Any,
) -> None:
    """Both demo tools reconcile against the row they write under the call's key: before
    the call ran it did not happen; after, it happened, with the answer the call gave.
    A repeat of the same call still refunds and emails once."""
    ctx = ToolContext(
        tool_call_id="toolu_1",
        tool_name="issue_refund",
        messages=(),
        signal=None,
        deps=Deps(),
        idempotency_scope="run-1",
    )
    refund = {"order_id": "A-1001", "amount": 20.0, "reason": "late"}
    email = {"to": "ann@example.com", "subject": "Hi", "body": "."}
    for demo_tool, args in ((issue_refund, refund), (send_email, email)):
        assert demo_tool.reconcile is not None
        assert demo_tool.execute is not None
        assert demo_tool.reconcile(args, ctx) == Reconciliation.did_not_happen()
        told = demo_tool.execute(args, ctx)
        assert demo_tool.execute(args, ctx) == told
        assert demo_tool.reconcile(args, ctx) == Reconciliation.happened(told)
    assert Order.objects.get(number="A-1001").refunded == Decimal("20.00")
    assert Refund.objects.count() == SentEmail.objects.count() == 1
