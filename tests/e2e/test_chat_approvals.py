"""The chat page in a real browser: the customer's approval cards, a refund only staff may
approve (decided in the admin while the customer watches, once with an edited amount), a
denial, and the researcher sub-agent's gated call. The approval-card screenshots are the
ones the documentation shows."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import Browser, Page, expect

from tests.live_site import Daphne, LiveSite

from .conftest import (
    CUSTOMER,
    QUEUE,
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

EMAIL_SENT = "Done — Email 'About your order A-1002' sent to customer@example.com."
EMAIL_DENIED = (
    "Understood, I did not send the email. (Tool call denied. Reason: Not now, thanks.)"
)
REFUNDED = (
    "Good news: Refunded $39.90 on A-1003. It reaches your card in 3–5 business days."
)
EDITED_REFUND = (
    "Good news: Refunded $20.00 on A-1001. (A staff member adjusted the request before "
    "approving it.) It reaches your card in 3–5 business days."
)
RESEARCHED = "That is what the researcher found. Anything else?"
RESEARCHER_SAID = (
    "Returns are accepted within 30 days and refunds take 3–5 business days. "
    "I saved a note to your file."
)


def test_a_customer_approves_an_email_and_the_answer_streams(
    chat: Page, tmp_path: Path
) -> None:
    sign_in(chat, *CUSTOMER)
    run_id = ask(chat, "Please email me the details of order A-1002")

    card = approval_card(chat, "send_email")
    expect(card).to_contain_text('"subject": "About your order A-1002"')
    expect(card).to_be_focused()  # the card is what needs the user now
    expect(run_status(chat)).to_have_text("Waiting for your approval")
    # Its entry in the conversation list says so (other tests' conversations may too).
    expect(chat.locator(f'a[href="?run={run_id}"]')).to_contain_text(
        "Waiting for approval"
    )
    chat.screenshot(path=screenshot_path(tmp_path, "chat-approval-card.png"))

    expect(card.get_by_role("heading")).to_have_text("Approval needed: send_email")
    card.get_by_role("button", name="Approve", exact=True).click()

    expect(answered(chat, EMAIL_SENT)).to_be_visible()
    expect(card.get_by_role("heading")).to_have_text("Approved: send_email")
    expect(card).to_contain_text("Approved")
    expect(chat.get_by_text("send_email done", exact=True)).to_be_visible()
    expect(run_status(chat)).to_have_text("Answer complete")
    expect(chat.locator(f'a[href="?run={run_id}"]')).to_contain_text("Done")


def test_staff_approve_a_refund_in_the_admin_and_the_customers_page_continues_live(
    chat: Page, browser: Browser, demo_server: Daphne, demo_site: LiveSite
) -> None:
    sign_in(chat, *CUSTOMER)
    run_id = ask(chat, "Please refund order A-1003")

    card = approval_card(chat, "issue_refund")
    expect(card).to_contain_text("Waiting for staff approval")
    expect(card.get_by_role("button")).to_have_count(0)  # the owner may not approve
    expect(run_status(chat)).to_have_text("Waiting for staff approval")
    chat.evaluate("window.sameDocument = true")  # gone if the page reloaded

    staff = new_context(browser, demo_server)
    try:
        admin = staff.new_page()
        admin.goto("/admin/login/?next=/admin/deuz_django/approval/")
        admin.get_by_label("Username").fill(STAFF[0])
        admin.get_by_label("Password").fill(STAFF[1])
        admin.get_by_role("button", name="Log in").click()
        row = admin.get_by_role("row", name=re.compile(r"issue_refund refund_1"))
        row.filter(has_text=run_id[:8]).get_by_role("checkbox").check()
        admin.get_by_role("combobox", name="Action").select_option("approve_selected")
        admin.locator(".actions").get_by_role("button", name="Run").click()
        admin.get_by_role("button", name="Approve 1 call").click()
        expect(admin.locator(".messagelist")).to_contain_text(
            f"Approved issue_refund (refund_1) on run {run_id}."
        )
    finally:
        staff.close()

    expect(answered(chat, REFUNDED)).to_be_visible()
    expect(card.get_by_role("heading")).to_have_text("Approved: issue_refund")
    expect(chat.get_by_text("issue_refund done", exact=True)).to_be_visible()
    assert chat.evaluate("window.sameDocument") is True
    status = demo_site.script(
        """
        from example_project.models import Order
        print(json.dumps(Order.objects.get(number="A-1003").status))
        """
    )
    assert status == "refunded"


def test_a_denied_email_shows_the_assistants_reaction(chat: Page) -> None:
    sign_in(chat, *CUSTOMER)
    ask(chat, "Email me a summary at ann@example.com")

    card = approval_card(chat, "send_email")
    expect(card).to_contain_text('"to": "ann@example.com"')
    card.get_by_label("Reason (optional)").fill("Not now, thanks.")
    card.get_by_role("button", name="Deny").click()

    expect(answered(chat, EMAIL_DENIED)).to_be_visible()
    expect(card).to_contain_text("Denied: Not now, thanks.")
    expect(card.get_by_role("heading")).to_have_text("Denied: send_email")
    expect(
        chat.get_by_text("send_email denied: Not now, thanks.", exact=True)
    ).to_be_visible()
    expect(run_status(chat)).to_have_text("Answer complete")


def test_the_researchers_gated_call_shows_its_agent_path_and_is_approved_on_a_phone(
    browser: Browser, demo_server: Daphne, tmp_path: Path
) -> None:
    context = new_context(browser, demo_server, width=390, height=844)
    try:
        phone = context.new_page()
        sign_in(phone, *CUSTOMER)
        ask(phone, "Research the return policy")

        researcher = phone.get_by_role("group", name="Agent researcher")
        expect(researcher).to_contain_text("search_help_center done")
        card = approval_card(phone, "save_note")
        expect(card).to_contain_text("asked by researcher")
        expect(researcher.get_by_role("region")).to_have_count(1)  # shown once
        expect(
            phone.get_by_text("researcher paused until a call is decided")
        ).to_be_visible()
        card.scroll_into_view_if_needed()
        phone.screenshot(path=screenshot_path(tmp_path, "chat-approval-card-phone.png"))

        card.get_by_role("button", name="Approve", exact=True).click()

        expect(researcher).to_contain_text("save_note done")
        expect(answered(phone, RESEARCHED)).to_be_visible()
        # The researcher's answer is shown once: in its own box.
        expect(researcher.get_by_text(RESEARCHER_SAID, exact=True)).to_be_visible()
        expect(phone.get_by_text(RESEARCHER_SAID)).to_have_count(1)
        expect(phone.get_by_text("researcher done", exact=True)).to_be_visible()

        # On a phone the conversation list sits behind a toggle.
        toggle = phone.get_by_role("button", name="Conversations")
        expect(toggle).to_have_attribute("aria-expanded", "false")
        toggle.click()
        conversations = phone.get_by_role("navigation", name="Conversations")
        expect(
            conversations.get_by_role(
                "link", name=re.compile("Research the return policy")
            )
        ).to_have_attribute("aria-current", "page")
    finally:
        context.close()


def test_staff_edit_a_refunds_amount_in_the_admin_and_the_customer_sees_it(
    chat: Page,
    browser: Browser,
    demo_server: Daphne,
    demo_site: LiveSite,
    tmp_path: Path,
) -> None:
    sign_in(chat, *CUSTOMER)
    run_id = ask(chat, "Please refund order A-1001")
    card = approval_card(chat, "issue_refund")
    expect(card).to_contain_text('"amount": 249,')
    expect(card).to_contain_text("Waiting for staff approval")

    staff = new_context(browser, demo_server)
    try:
        admin = staff.new_page()
        admin_sign_in(admin, STAFF[0], QUEUE, STAFF[1])
        row = admin.get_by_role("row", name=re.compile(r"issue_refund refund_1"))
        row.filter(has_text=run_id[:8]).get_by_role("link").first.click()
        admin.get_by_text("Edit the input, then approve").click()
        editor = admin.get_by_label("Edited input (JSON)")
        editor.fill(
            '{"order_id": "A-1001", "amount": 20.0, "reason": "Customer request"}'
        )
        admin.get_by_role("button", name=re.compile("with the edited input")).click()
        diff = admin.locator(".deuz-diff")
        expect(diff).to_contain_text("amount")
        expect(diff.locator("del")).to_have_text(re.compile(r"^249(\.0)?$"))
        expect(diff.locator("ins")).to_have_text(re.compile(r"^20(\.0)?$"))
        admin.screenshot(path=screenshot_path(tmp_path, "admin-edit-approve.png"))
        admin.get_by_role("button", name="Approve 1 call").click()
        expect(admin.locator(".messagelist")).to_contain_text(
            f"Approved issue_refund (refund_1) on run {run_id}."
        )
    finally:
        staff.close()

    expect(answered(chat, EDITED_REFUND)).to_be_visible()
    expect(card.get_by_role("heading")).to_have_text(
        "Approved with changes: issue_refund"
    )
    expect(card.locator(".edited-input")).to_contain_text('"amount": 20')
    refunded = demo_site.script(
        """
        from example_project.models import Order
        print(json.dumps(str(Order.objects.get(number="A-1001").refunded)))
        """
    )
    chat.screenshot(path=screenshot_path(tmp_path, "chat-edited-refund.png"))
    assert refunded == "20.00"
