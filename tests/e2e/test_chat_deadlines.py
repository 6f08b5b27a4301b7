"""A deadline in a real browser: the customer's refund waits for staff with the time
left counted down on its card; nobody decides, so it goes to the Finance leads, then
times out — and the customer's page shows the run continuing with "timed out", live.

The demo's refund deadline (an hour, then an hour more for the leads) is shrunk for this
site by ``DEUZ_DEMO_DEADLINE_SCALE`` to about 3.6 seconds each; daphne's sweeper runs
every half second (``DEUZ_RECOVERY_INTERVAL``), as in production every 15 seconds.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.live_site import Daphne, LiveSite

from .conftest import (
    CUSTOMER,
    answered,
    approval_card,
    ask,
    chat_page,
    demo,
    run_status,
    screenshot_path,
    sign_in,
)

SCALE = "0.001"  # 60 minutes -> 3.6 seconds
SWEEP_SECONDS = "0.5"
TIMED_OUT_ANSWER = (
    "I'm sorry, the refund request timed out before finance decided, so no money "
    "moved. Ask me again and I'll send a new request."
)
WAIT_MS = 20_000  # a guard against hanging, never a timing


@pytest.fixture(scope="module")
def hurried_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveSite]:
    site = demo(
        tmp_path_factory.mktemp("deadline-site"),
        DEUZ_DEMO_DEADLINE_SCALE=SCALE,
        DEUZ_RECOVERY_INTERVAL=SWEEP_SECONDS,
    )
    with closing(site):
        yield site


@pytest.fixture(scope="module")
def hurried_server(hurried_site: LiveSite) -> Daphne:
    return hurried_site.daphne()


@pytest.fixture
def chat(browser: Browser, hurried_server: Daphne) -> Iterator[Page]:
    with chat_page(browser, hurried_server) as page:
        yield page


def test_a_refund_nobody_decides_times_out_and_the_run_continues_with_timed_out(
    chat: Page, hurried_site: LiveSite, tmp_path: Path
) -> None:
    sign_in(chat, *CUSTOMER)
    run_id = ask(chat, "Please refund order A-1002")

    card = approval_card(chat, "issue_refund")
    expect(card).to_contain_text("Waiting for staff approval")
    clock = card.get_by_role("timer")
    expect(clock).to_have_text(
        re.compile(r"^Goes to Finance leads too in \d seconds?\.$")
    )
    chat.screenshot(path=screenshot_path(tmp_path, "chat-deadline-card.png"))

    # Nobody decides: the refund goes to the Finance leads, with a new deadline ...
    expect(clock).to_have_text(
        re.compile(r"^Escalated to Finance leads\. Times out in \d seconds?\.$"),
        timeout=WAIT_MS,
    )
    # ... which passes too: the run goes on, and the page shows it live.
    expect(card.get_by_role("heading")).to_have_text(
        "Timed out: issue_refund", timeout=WAIT_MS
    )
    expect(card).to_contain_text(
        re.compile(
            r"Timed out: nobody decided within \d seconds\. The call did not run; "
            r"the assistant continues\."
        )
    )
    expect(clock).to_be_hidden()
    expect(answered(chat, TIMED_OUT_ANSWER)).to_be_visible(timeout=WAIT_MS)
    expect(
        chat.get_by_text(
            re.compile(r"^issue_refund denied: Timed out: nobody decided within")
        )
    ).to_be_visible()
    expect(run_status(chat)).to_have_text("Answer complete")
    chat.screenshot(path=screenshot_path(tmp_path, "chat-deadline-timed-out.png"))

    stored = hurried_site.script(
        f"""
        from deuz_django.models import Approval
        from example_project.models import Order
        row = Approval.objects.get(run__run_id={run_id!r})
        print(json.dumps([
            row.status, row.reason, row.escalated_at is not None,
            Order.objects.get(number="A-1002").status,
        ]))
        """
    )
    assert stored[0] == "expired"
    assert re.fullmatch(r"Timed out: nobody decided within \d seconds\.", stored[1])
    assert stored[2:] == [True, "shipped"]  # escalated first; no money moved
