"""A notification mail, end to end, in a real browser: the customer asks for a refund in
the chat; the demo's server mails staff (to its console, as ``make demo`` does); staff
open the mail's Approve link, sign in, confirm on the page it opens — which decided
nothing by being opened — and the customer's page continues live to the refund."""

from __future__ import annotations

import email
import json
import re
from collections.abc import Iterator
from contextlib import closing
from email.message import EmailMessage
from email.policy import default
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, expect

from tests.live_site import Daphne, LiveSite, free_port

from .conftest import (
    CUSTOMER,
    STAFF,
    answered,
    approval_card,
    ask,
    demo,
    new_context,
    screenshot_path,
    sign_in,
)
from .test_chat_approvals import REFUNDED

SEPARATOR = "\n" + "-" * 79 + "\n"  # what the console mail backend writes after a mail


@pytest.fixture(scope="module")
def mailing(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[LiveSite, Daphne]]:
    """The demo, notifying by mail to the console of the daphne that serves it (its
    links name the port, as ``make demo``'s do)."""
    port = free_port()
    notifiers = [{"BACKEND": "deuz_django.notifications.emails.EmailNotifier"}]
    with closing(
        demo(
            tmp_path_factory.mktemp("mailing-site"),
            PORT=str(port),
            DEUZ_TEST_NOTIFIERS=json.dumps(notifiers),
        )
    ) as site:
        yield site, site.daphne(port)


def mails(server: Daphne) -> list[EmailMessage]:
    """The mails the server wrote to its console so far."""
    found = []
    for chunk in server.log.read_text(errors="replace").split(SEPARATOR):
        start = chunk.find("MIME-Version: 1.0\n")
        if start != -1:
            message = email.message_from_string(chunk[start:], policy=default)
            assert isinstance(message, EmailMessage)
            found.append(message)
    return found


def text_of(message: EmailMessage) -> str:
    body = message.get_body(("plain",))
    assert body is not None
    return str(body.get_content())


def test_staff_approve_a_refund_from_the_link_in_their_mail(
    browser: Browser, mailing: tuple[LiveSite, Daphne], tmp_path: Path
) -> None:
    site, server = mailing
    customer = new_context(browser, server, width=1280, height=860)
    staff = new_context(browser, server, width=1280, height=860)
    try:
        chat = customer.new_page()
        sign_in(chat, *CUSTOMER)
        run_id = ask(chat, "Please refund order A-1003")
        card = approval_card(chat, "issue_refund")
        expect(card).to_contain_text("Waiting for staff approval")

        sent = [m for m in mails(server) if "issue_refund" in str(m["Subject"])]
        # Those who may approve it: staff and the Finance lead, not the customer.
        assert sorted(m["To"] for m in sent) == [
            "lead@example.com",
            "staff@example.com",
        ]
        [mail] = [m for m in sent if m["To"] == "staff@example.com"]
        assert str(mail["Subject"]).startswith("Approval needed: issue_refund in")
        text = text_of(mail)
        assert '"order_id": "A-1003"' in text
        links = dict(re.findall(r"^(Approve|Deny|Open): (\S+)$", text, re.M))
        assert set(links) == {"Approve", "Deny", "Open"}
        assert links["Approve"].startswith(f"{server.http}/deuz/approvals/act/")

        page = staff.new_page()
        page.goto(links["Approve"])  # nobody signed in: the login page, then back
        expect(page).to_have_url(re.compile(r"/login/\?next=/deuz/approvals/act/"))
        page.get_by_label("Username").fill(STAFF[0])
        page.get_by_label("Password").fill(STAFF[1])
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("heading", name="Decide this call")).to_be_visible()
        expect(page.get_by_text("issue_refund", exact=True)).to_be_visible()
        expect(page.locator("pre")).to_contain_text('"order_id": "A-1003"')
        assert _approval_status(site, run_id) == "pending"  # opening decided nothing
        page.screenshot(path=screenshot_path(tmp_path, "notification-link-page.png"))

        page.get_by_label("Reason (optional)").fill("Within the return window.")
        page.get_by_role("button", name="Approve").click()
        expect(
            page.get_by_role("heading", name="This call was decided already")
        ).to_be_visible()
        expect(page.get_by_text("by staff")).to_be_visible()
        expect(page.get_by_role("status")).to_contain_text(
            f"Run {run_id} resumed: it continues on this server"
        )
        assert urlsplit(page.url).path == urlsplit(links["Approve"]).path

        expect(answered(chat, REFUNDED)).to_be_visible()
        expect(card.get_by_role("heading")).to_have_text("Approved: issue_refund")
        assert _approval_status(site, run_id) == "approved by staff"

        # The mail's Deny link, opened afterwards, only says what happened.
        again = staff.new_page()
        again.goto(links["Deny"])
        expect(
            again.get_by_role("heading", name="This call was decided already")
        ).to_be_visible()
        expect(again.get_by_role("button", name="Deny")).to_have_count(0)
    finally:
        customer.close()
        staff.close()


def _approval_status(site: LiveSite, run_id: str) -> str:
    return str(
        site.script(
            f"""
            from deuz_django.models import Approval
            call = Approval.objects.get(run__run_id={run_id!r}, tool_name="issue_refund")
            by = f" by {{call.decided_by.username}}" if call.decided_by else ""
            print(json.dumps(call.status + by))
            """
        )
    )
