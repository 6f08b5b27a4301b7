"""A question in a real browser: the customer mentions store credit, the assistant asks
(the built-in ``ask_human``) on a question card with a button per choice, the customer
answers in the chat, and the run continues with the answer — the refund, small enough
for staff's standing rule, goes through as store credit. The card's screenshot is the
one the documentation shows."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page, expect

from tests.live_site import LiveSite

from .conftest import CUSTOMER, answered, ask, run_status, screenshot_path, sign_in

QUESTION = "Should the refund go back to your card, or be store credit?"
REFUNDED_AS_CREDIT = (
    "Good news: Refunded $15.00 on A-1003. It is on your account as store credit."
)


def test_a_customer_answers_a_question_card_and_the_run_continues_with_the_answer(
    chat: Page, demo_site: LiveSite, tmp_path: Path
) -> None:
    sign_in(chat, *CUSTOMER)
    run_id = ask(chat, "Refund $15 on order A-1003 or give me store credit")

    card = chat.locator("section.question")  # its name changes once answered
    expect(card.get_by_role("heading")).to_have_text("A question for you")
    expect(card).to_contain_text(QUESTION)
    expect(card).to_be_focused()
    expect(run_status(chat)).to_have_text("Waiting for your answer")
    expect(chat.locator(f'a[href="?run={run_id}"]')).to_contain_text(
        "Waiting for an answer"
    )
    choices = card.get_by_role("button")
    expect(choices).to_have_text(["card", "store credit", "Decline to answer"])
    chat.screenshot(path=screenshot_path(tmp_path, "chat-question-card.png"))

    card.get_by_role("button", name="store credit").click()

    expect(answered(chat, REFUNDED_AS_CREDIT)).to_be_visible()
    expect(card.get_by_role("heading")).to_have_text("Answered")
    expect(card).to_contain_text("Answered: store credit — the assistant continues.")
    expect(run_status(chat)).to_have_text("Answer complete")

    stored = demo_site.script(
        f"""
        from deuz_django.models import Approval
        question = Approval.objects.get(run__run_id={run_id!r}, kind="question")
        refund = Approval.objects.get(run__run_id={run_id!r}, tool_name="issue_refund")
        print(json.dumps([
            question.status, question.answer, question.decided_by.username,
            refund.input["reason"], refund.status,
        ]))
        """
    )
    assert stored == [
        "approved",
        "store credit",
        "customer",
        "Customer request (as store credit)",
        "approved",
    ]
