"""Standing rules and grants in a real browser: the demo's rule approves a small refund
with nobody asked and the card says which rule and why; "Approve and allow for this
chat" approves the conversation's next email too; staff keep rules in the admin, where
a malformed condition is refused naming its clause and the run page names the rule."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import Browser, Page, expect

from tests.live_site import Daphne

from .conftest import (
    CUSTOMER,
    RUNS,
    STAFF,
    admin_sign_in,
    answered,
    approval_card,
    ask,
    new_context,
    run_status,
    screenshot_path,
    sign_in,
)

SMALL_REFUND = (
    "Good news: Refunded $15.00 on A-1002. It reaches your card in 3–5 business days."
)
TWO_EMAILS = (
    "Done — Email 'About your order A-1001' sent to customer@example.com. "
    "Email 'About your order A-1002' sent to customer@example.com."
)
RULE_REASON = "Refunds of at most $20 are approved automatically."


def test_a_small_refund_is_approved_by_the_standing_rule_with_nobody_asked(
    chat: Page, browser: Browser, demo_server: Daphne, tmp_path: Path
) -> None:
    sign_in(chat, *CUSTOMER)
    run_id = ask(chat, "Please refund $15 on order A-1002")

    card = approval_card(chat, "issue_refund")
    expect(answered(chat, SMALL_REFUND)).to_be_visible()
    expect(card.get_by_role("heading")).to_have_text(
        "Approved automatically: issue_refund"
    )
    expect(card).to_contain_text(f"Approved automatically: {RULE_REASON}")
    expect(card).to_contain_text(
        re.compile(
            r"By rule #\d+: approve issue_refund of assistant, when amount <= 20"
        )
    )
    expect(card.get_by_role("button")).to_have_count(0)
    expect(run_status(chat)).to_have_text("Answer complete")
    card.screenshot(path=screenshot_path(tmp_path, "chat-standing-rule.png"))

    staff = new_context(browser, demo_server)
    try:
        admin = staff.new_page()
        admin_sign_in(admin, STAFF[0], RUNS, password=STAFF[1])
        admin.get_by_role("link", name=re.compile(run_id)).click()
        history = admin.get_by_role("region", name="Decision history")
        expect(history).to_contain_text("automatic")
        expect(history).to_contain_text(RULE_REASON)
        history.get_by_role("link", name=re.compile(r"rule #\d+")).click()
        expect(
            admin.get_by_role("heading", name="Change standing rule")
        ).to_be_visible()
    finally:
        staff.close()


def test_approve_and_allow_for_this_chat_approves_the_next_email_too(
    chat: Page,
) -> None:
    sign_in(chat, *CUSTOMER)
    run_id = ask(chat, "Email me about A-1001 and A-1002")

    first = chat.get_by_role("region", name="Approval needed: send_email")
    expect(first).to_contain_text('"subject": "About your order A-1001"')
    first.get_by_role("button", name="Approve and allow for this chat").click()

    expect(answered(chat, TWO_EMAILS)).to_be_visible()
    second = chat.get_by_role("region", name="Approved automatically: send_email")
    expect(second).to_contain_text('"subject": "About your order A-1002"')
    # The grant is named once, in words a customer reads: never by its run's id.
    expect(second).to_contain_text(
        re.compile(r"Allowed by grant #\d+: send_email in this conversation\.")
    )
    expect(second.get_by_text(re.compile("grant #"))).to_have_count(1)
    expect(second).not_to_contain_text(run_id[:8])
    expect(second.get_by_role("button")).to_have_count(0)
    expect(run_status(chat)).to_have_text("Answer complete")


def test_staff_keep_a_rule_in_the_admin_and_a_malformed_condition_is_refused(
    browser: Browser, demo_server: Daphne
) -> None:
    context = new_context(browser, demo_server)
    try:
        admin = context.new_page()
        add = "/admin/deuz_django/standingrule/add/"
        admin_sign_in(admin, STAFF[0], add, password=STAFF[1])
        admin.get_by_label("Tool").fill("issue_refund")
        admin.get_by_label("Condition").fill("amount > 100000 or amount < 0")
        admin.get_by_label("Action").select_option("deny")
        admin.get_by_label("Reason").fill("Refunds that large are never made here.")
        admin.get_by_role("button", name="Save", exact=True).click()

        expect(admin.locator(".errorlist")).to_contain_text(
            "Clause 1: expected 'and' or the end at character 17 "
            "(clauses are joined by 'and' only)."
        )
        admin.get_by_label("Condition").fill("amount > 100000")
        admin.get_by_role("button", name="Save", exact=True).click()

        expect(admin.locator(".messagelist")).to_contain_text("was added successfully")
        row = admin.get_by_role("row", name=re.compile("amount > 100000"))
        expect(row).to_contain_text("in force")
        expect(row).to_contain_text("staff")
    finally:
        context.close()
