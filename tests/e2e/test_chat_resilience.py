"""The chat survives a reload and a server crash mid-answer: the conversation goes on with
no text lost or shown twice, and a crashed run is continued exactly once.

The demo streams its answer word by word, slowly enough here (``DEUZ_DEMO_STREAM_DELAY``)
that the reload and the kill land in the middle of it; a short lease lets the restarted
server take over the dead one's run quickly.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.live_site import Daphne, LiveSite

from .conftest import CUSTOMER, answer, ask, demo, new_context, run_status, sign_in

GREETING = (
    "Hi! I can look up an order (try 'Where is order A-1001?'), refund one "
    "('Please refund order A-1001'), email you a summary ('Email me the details') "
    "or research a question ('Research the return policy')."
)
FIRST_WORDS = "Hi! I can"
# A crashed leg's lease must lapse and a reconnected page's subscription notice it.
RECOVERY_MS = 30_000


@pytest.fixture(scope="module")
def slow_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveSite]:
    slow = demo(tmp_path_factory.mktemp("slow-site"), DEUZ_DEMO_STREAM_DELAY="0.06")
    with closing(slow) as live:
        yield live


def customer_page(browser: Browser, server: Daphne) -> Page:
    page = new_context(browser, server).new_page()
    sign_in(page, *CUSTOMER)
    return page


def run_state(site: LiveSite, run_id: str) -> dict[str, object]:
    """The run's row, and the steps its journal announced (a re-run step twice)."""
    return dict(
        site.script(
            f"""
            from deuz_django.models import Run
            run = Run.objects.get(run_id={run_id!r})
            parts = [json.loads(e.part) for e in run.journal_entries.order_by("seq")]
            print(json.dumps({{
                "status": run.status,
                "steps": run.step_index,
                "messages": run.message_count,
                "stepStarts": [p["step"] for p in parts if p["type"] == "step-start"],
            }}))
            """
        )
    )


def test_a_reload_mid_answer_shows_the_whole_answer_once(
    browser: Browser, slow_site: LiveSite
) -> None:
    page = customer_page(browser, slow_site.daphne())
    try:
        run_id = ask(page, "Hello!")
        expect(answer(page)).to_contain_text(FIRST_WORDS)

        page.reload()

        expect(page.get_by_role("heading", name="Hello!")).to_be_visible()
        expect(answer(page)).to_have_text(GREETING)
        expect(run_status(page)).to_have_text("Answer complete")
        expect(page.get_by_text(GREETING, exact=True)).to_have_count(1)
        assert run_state(slow_site, run_id) == {
            "status": "completed",
            "steps": 1,
            "messages": 3,  # system, question, answer
            "stepStarts": [0],
        }
    finally:
        page.context.close()


def test_a_killed_server_is_reconnected_to_and_the_run_completes_once(
    browser: Browser, slow_site: LiveSite
) -> None:
    server = slow_site.daphne()
    page = customer_page(browser, server)
    try:
        run_id = ask(page, "Hi, what can you do?")
        expect(answer(page)).to_contain_text(FIRST_WORDS)

        server.kill()
        reconnecting = page.get_by_role("status").filter(has_text="Reconnecting…")
        expect(reconnecting).to_be_visible()
        slow_site.daphne(server.port)  # a deploy: same address, new process

        expect(reconnecting).to_be_hidden(timeout=RECOVERY_MS)
        # The step the dead server had begun is re-run once: its partial text is
        # replaced, never appended to.
        expect(answer(page)).to_have_text(GREETING, timeout=RECOVERY_MS)
        expect(run_status(page)).to_have_text("Answer complete")
        expect(page.get_by_text(GREETING, exact=True)).to_have_count(1)
        assert run_state(slow_site, run_id) == {
            "status": "completed",
            "steps": 1,
            "messages": 3,  # the answer stored once
            "stepStarts": [0, 0],  # the interrupted step, and its one re-run
        }

        # Rendered from the start, the journal's partial step is dropped the same way.
        page.reload()
        expect(answer(page)).to_have_text(GREETING)
        expect(page.get_by_text(GREETING, exact=True)).to_have_count(1)
    finally:
        page.context.close()
