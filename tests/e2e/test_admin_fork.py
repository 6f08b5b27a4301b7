"""Forking from the admin, seen end to end: a customer's finished conversation is forked
by staff from its run page with the question rewritten, and the fork — a run of its
own — streams its new answer to the chat.

The test agent echoes the last user message ("You said: …"), a word every 0.5 s here
(``DEUZ_TEST_CHUNK_SECONDS``), so the fork's answer is still arriving when the chat
opens it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, expect

from tests.live_site import Daphne, LiveSite

from .conftest import RUNS, ask, new_context, run_status, screenshot_path

QUESTION = "Tell me about ducks"
REWRITTEN = "Tell me about geese and the long way they fly south every single autumn"


@pytest.fixture(scope="module")
def fork_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveSite]:
    tmp = tmp_path_factory.mktemp("fork-site")
    with closing(LiveSite(tmp, DEUZ_TEST_CHUNK_SECONDS="0.5")) as live:
        yield live


@pytest.fixture(scope="module")
def fork_server(fork_site: LiveSite) -> Daphne:
    return fork_site.daphne()


def signed_in(browser: Browser, server: Daphne, cookie: str) -> BrowserContext:
    context = new_context(browser, server, width=1280, height=900)
    value = cookie.removeprefix("sessionid=")
    context.add_cookies([{"name": "sessionid", "value": value, "url": server.http}])
    return context


def test_staff_fork_a_run_with_a_rewritten_question_and_the_fork_streams_to_the_chat(
    browser: Browser, fork_site: LiveSite, fork_server: Daphne, tmp_path: Path
) -> None:
    customer = signed_in(browser, fork_server, fork_site.user("cy"))
    staff_cookie = fork_site.user(
        "sam", "deuz_django.view_run", "deuz_django.fork_run", staff=True
    )
    staff = signed_in(browser, fork_server, staff_cookie)
    try:
        chat = customer.new_page()
        chat.goto("/test/chat/?agent=echoer")
        expect(chat.get_by_role("button", name="Send")).to_be_enabled()
        original = ask(chat, QUESTION)
        expect(run_status(chat)).to_have_text("Answer complete")

        # Staff open the run's page and fork its only step, asking differently.
        admin = staff.new_page()
        admin.goto(f"{RUNS}?q={original}")
        admin.get_by_role("link", name=original).click()
        point = admin.locator("#step-0")
        point.get_by_text("Step 0 · Fork from here").click()
        point.get_by_label(re.compile("^Ask differently")).fill(REWRITTEN)
        point.get_by_role("button", name="Fork: ask the model again").click()
        expect(admin.locator(".messagelist")).to_contain_text(
            f"Forked run {original} at step 0"
        )
        fork = re.search(
            r"this is the fork, (\w+)", admin.locator(".messagelist").inner_text()
        )
        assert fork is not None
        fork_id = fork.group(1)
        assert fork_id != original
        lineage = admin.locator(".deuz-forked-from")
        expect(lineage).to_contain_text(f"Forked from {original} at step 0")
        expect(lineage).to_contain_text(REWRITTEN)

        # The fork is the staff member's run: their chat opens it and shows its answer
        # arriving, word by word, then complete.
        watch = staff.new_page()
        watch.goto(f"/test/chat/?agent=echoer&run={fork_id}")
        said = watch.get_by_role("article", name="Assistant")
        expect(said).to_contain_text("You said: Tell me about geese")
        streamed = said.inner_text()
        watch.screenshot(path=screenshot_path(tmp_path, "chat-fork-streaming.png"))
        expect(said).to_have_text(re.compile(rf"^\s*You said: {REWRITTEN}\s*$"))
        expect(run_status(watch)).to_have_text("Answer complete")
        assert streamed.strip() != f"You said: {REWRITTEN}", (
            "already complete on arrival"
        )
        you = watch.get_by_role("article", name="You", exact=True)
        expect(you).to_have_text([REWRITTEN])

        # The original is untouched: the customer's conversation still says what it said.
        chat.reload()
        expect(chat.get_by_role("article", name="Assistant")).to_have_text(
            re.compile(rf"^\s*You said: {QUESTION}\s*$")
        )
        admin.goto(f"{RUNS}?q={original}")
        admin.get_by_role("link", name=original).click()
        expect(admin.locator(".deuz-forks")).to_contain_text(fork_id)
    finally:
        customer.close()
        staff.close()
