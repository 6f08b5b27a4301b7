"""Details a new user meets: reloading a conversation shows it at once (never the empty
"new conversation" page first), a decided card's heading says how it was decided, and no
page of the demo or its admin asks for a favicon that is not there."""

from __future__ import annotations

import time
from typing import Any

from playwright.sync_api import Browser, ConsoleMessage, Response, Route, expect

from tests.live_site import Daphne, LiveSite

from .conftest import (
    CUSTOMER,
    QUEUE,
    RUNS,
    SCREENS,
    STAFF,
    admin_sign_in,
    approval_card,
    ask,
    new_context,
    run_status,
    sign_in,
)

QUESTION = "Email me the details of order A-1002"
# What the page shows, recorded at every change from the first parsed byte on.
WATCH = """
window.seen = [];
new MutationObserver(() => {
  const heading = document.getElementById("deuz-chat-heading");
  if (!heading) return;
  const shown = (id) => Boolean(document.getElementById(id)?.checkVisibility());
  window.seen.push({
    heading: heading.textContent.trim(),
    welcome: shown("deuz-chat-welcome"),
    noConversations: shown("deuz-chat-no-conversations"),
  });
}).observe(document, { subtree: true, childList: true, characterData: true,
                       attributes: true });
"""


def slowly(route: Route) -> None:
    time.sleep(1.5)  # the conversation list answers late, as on a busy server
    route.continue_()


@SCREENS
def test_reloading_a_conversation_shows_it_from_the_start_without_a_flash(
    browser: Browser, demo_server: Daphne, screen: dict[str, int]
) -> None:
    context = new_context(browser, demo_server, **screen)
    try:
        page = context.new_page()
        sign_in(page, *CUSTOMER)
        ask(page, QUESTION)
        expect(approval_card(page, "send_email")).to_be_visible()

        page.add_init_script(WATCH)
        page.route("**/api/deuz/runs/?*", slowly)
        page.reload()
        expect(approval_card(page, "send_email")).to_contain_text("About your order")
        expect(run_status(page)).to_have_text("Waiting for your approval")

        seen: list[dict[str, Any]] = page.evaluate("window.seen")
        assert seen
        assert {state["heading"] for state in seen} == {QUESTION}
        assert not any(state["welcome"] for state in seen)
        assert not any(state["noConversations"] for state in seen)
    finally:
        context.close()


@SCREENS
def test_a_decided_card_says_how_it_was_decided(
    browser: Browser,
    demo_server: Daphne,
    demo_site: LiveSite,
    screen: dict[str, int],
) -> None:
    context = new_context(browser, demo_server, **screen)
    try:
        page = context.new_page()
        sign_in(page, *CUSTOMER)
        run_id = ask(page, QUESTION)
        card = approval_card(page, "send_email")
        expect(card.get_by_role("heading")).to_have_text("Approval needed: send_email")

        # Nobody decided in time: the approval was recorded as expired.
        demo_site.script(
            f"""
            from django.utils import timezone
            from deuz_django.models import Approval
            from deuz_django.approvals.verdicts import EXPIRED_REASON
            Approval.objects.filter(run__run_id={run_id!r}).update(
                status="expired", reason=EXPIRED_REASON, decided_at=timezone.now()
            )
            print(1)
            """
        )
        page.reload()
        # Said so from the server's record, or — when the reload re-drove the run first —
        # from the call's settled denial ("Approval expired.").
        expect(card.get_by_role("heading")).to_have_text("Expired: send_email")
        expect(card).to_contain_text("not decided in time")
        expect(card.get_by_role("button")).to_have_count(0)
    finally:
        context.close()


@SCREENS
def test_no_page_of_the_demo_or_its_admin_misses_a_file(
    browser: Browser,
    demo_server: Daphne,
    demo_site: LiveSite,
    screen: dict[str, int],
) -> None:
    # A run nobody owns (started by a script) beside one the customer owns, for the runs
    # list's owner filter — which shows itself only once some run has an owner, so the
    # test makes one whatever ran before it.
    demo_site.script(
        """
        from django.contrib.auth.models import User
        from deuz_django import services
        hi = [{"role": "user", "content": "Hi"}]
        services.start_run(agent="assistant", messages=hi)
        customer = User.objects.get(username="customer")
        services.start_run(agent="assistant", messages=hi, owner=customer)
        print(1)
        """
    )
    context = new_context(browser, demo_server, **screen)
    missing: list[str] = []

    def note_response(response: Response) -> None:
        if response.status >= 400:
            missing.append(f"{response.status} {response.url}")

    def note_console(message: ConsoleMessage) -> None:
        if message.type == "error":
            missing.append(f"console: {message.text}")

    try:
        page = context.new_page()
        page.on("response", note_response)
        page.on("console", note_console)
        sign_in(page, *CUSTOMER)
        expect(page.get_by_role("heading", name="Support chat")).to_be_visible()
        page.wait_for_load_state("networkidle")

        staff = context.new_page()
        staff.on("response", note_response)
        staff.on("console", note_console)
        admin_sign_in(staff, STAFF[0], QUEUE, password=STAFF[1])
        staff.wait_for_load_state("networkidle")
        staff.goto(RUNS)
        owner = staff.locator('#changelist-filter [data-filter-title="owner"]')
        expect(owner.get_by_role("link", name="No owner")).to_be_visible()
        expect(owner.get_by_role("link", name="-", exact=True)).to_have_count(0)
        staff.goto("/admin/")
        staff.wait_for_load_state("networkidle")
        assert missing == []
    finally:
        context.close()
