"""Staff stop a run in the admin while its answer streams to the customer's chat.

The demo's researcher answers word by word, slowly here (``DEUZ_DEMO_STREAM_DELAY``),
inside the assistant's ``researcher`` call; the assistant speaks after it. A stop asked
for meanwhile lets the executing call finish — the researcher's words — and ends the leg
at its next fence, before the assistant's model call: nothing more arrives, and the chat
says who stopped the run and why instead of "something went wrong".
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from tests.live_site import Daphne, LiveSite

from .conftest import (
    CUSTOMER,
    DESKTOP,
    RUNS,
    SCREENS,
    admin_sign_in,
    answer,
    approval_card,
    ask,
    demo,
    new_context,
    run_status,
    screenshot_path,
    sign_in,
)

RESEARCHER_SAID = (
    "Returns are accepted within 30 days and refunds take 3–5 business days. "
    "I saved a note to your file."
)
BOSS = "boss"  # staff who may stop any run (password "pw")
REASON = "Customer called."
STOPPED = f"Stopped by {BOSS}: {REASON}"


@pytest.fixture(scope="module")
def stop_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveSite]:
    # ~5 seconds of the researcher's words: time to click while they stream.
    slow = demo(tmp_path_factory.mktemp("stop-site"), DEUZ_DEMO_STREAM_DELAY="0.25")
    with closing(slow) as live:
        live.user(BOSS, "deuz_django.view_run", "deuz_django.stop_run", staff=True)
        yield live


@pytest.fixture(scope="module")
def stop_server(stop_site: LiveSite) -> Daphne:
    return stop_site.daphne()


@SCREENS
def test_staff_stop_a_streaming_run_and_the_chat_says_who_and_why(
    browser: Browser,
    stop_site: LiveSite,
    stop_server: Daphne,
    screen: dict[str, int],
    tmp_path: Path,
) -> None:
    customer = new_context(browser, stop_server, **screen)
    staff = new_context(browser, stop_server, **screen)
    try:
        chat = customer.new_page()
        sign_in(chat, *CUSTOMER)
        run_id = ask(chat, "Research the return policy")
        card = approval_card(chat, "save_note")
        expect(card.get_by_role("button", name="Approve", exact=True)).to_be_visible()

        # Staff have the run's page open, the reason written, before it streams.
        admin = staff.new_page()
        admin_sign_in(admin, BOSS, RUNS)
        admin.get_by_role("link", name=run_id).click()
        admin.get_by_text("Stop this run …").click()
        admin.get_by_label(re.compile("^Why")).fill(REASON)

        card.get_by_role("button", name="Approve", exact=True).click()
        researcher = chat.get_by_role("group", name="Agent researcher")
        expect(researcher.locator("p.text")).to_contain_text("Returns are")
        admin.get_by_role("button", name="Stop the run").click()

        # Asked while a leg holds the run: it stops at that leg's next fence.
        expect(admin.locator(".messagelist")).to_contain_text(
            f"Run {run_id} stops before its next model call or tool execution"
        )
        expect(admin.get_by_role("status")).to_contain_text("stopping")

        expect(run_status(chat)).to_have_text(STOPPED)
        # The leg is over: the executing call finished, and nothing came after it.
        expect(chat.get_by_role("log")).to_have_attribute("aria-busy", "false")
        expect(researcher.get_by_text(RESEARCHER_SAID, exact=True)).to_be_visible()
        expect(answer(chat)).not_to_contain_text("That is what")
        expect(chat.locator(f'a[href="?run={run_id}"]')).to_contain_text("Stopped")
        if screen == DESKTOP:
            chat.screenshot(path=screenshot_path(tmp_path, "chat-stopped.png"))

        admin.reload()
        banner = admin.get_by_role("status")
        expect(banner).to_contain_text("stopped")
        expect(banner).to_contain_text(STOPPED)
        expect(admin.get_by_text("Stop this run …")).to_have_count(0)
        assert stop_site.run_column(run_id, "status") == "stopped"
        assert stop_site.run_column(run_id, "stop_reason") == REASON

        # Opened again, the conversation says so from the start.
        chat.reload()
        expect(researcher.get_by_text(RESEARCHER_SAID, exact=True)).to_be_visible()
        expect(run_status(chat)).to_have_text(STOPPED)
        expect(answer(chat)).not_to_contain_text("That is what")
    finally:
        staff.close()
        customer.close()
