"""Steering from the chat: a message typed while the answer streams is sent to the run,
shown as queued, and delivered at the next step — the model reads it and answers it; an
interrupting agent drops the answer in progress for it; Stop and "Stop and say why" stop
the run.

The test agents echo the last user message ("You said: …"), a word every 0.2 s here
(``DEUZ_TEST_CHUNK_SECONDS``), so an answer has a middle to type into.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.live_site import Daphne, LiveSite

from .conftest import new_context, run_status, screenshot_path

QUESTION = "Tell me a long story about ducks and their ponds"
STEER = "Make it short."


@pytest.fixture(scope="module")
def gate(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("steering-gate") / "gate"


@pytest.fixture(scope="module")
def steering_site(
    tmp_path_factory: pytest.TempPathFactory, gate: Path
) -> Iterator[LiveSite]:
    tmp = tmp_path_factory.mktemp("steering-site")
    site = LiveSite(tmp, DEUZ_TEST_CHUNK_SECONDS="0.2", DEUZ_TEST_GATE=str(gate))
    with closing(site) as live:
        yield live


@pytest.fixture(scope="module")
def steering_server(steering_site: LiveSite) -> Daphne:
    return steering_site.daphne()


@pytest.fixture(scope="module")
def session(steering_site: LiveSite) -> str:
    """A signed-in user's session cookie (its value)."""
    return steering_site.user("ann").removeprefix("sessionid=")


@pytest.fixture
def context(
    browser: Browser, steering_server: Daphne, session: str
) -> Iterator[BrowserContext]:
    cookie = session
    context = new_context(browser, steering_server, width=1280, height=800)
    context.add_cookies(
        [{"name": "sessionid", "value": cookie, "url": steering_server.http}]
    )
    try:
        yield context
    finally:
        context.close()


def open_chat(context: BrowserContext, agent: str) -> Page:
    page = context.new_page()
    page.goto(f"/test/chat/?agent={agent}")
    expect(page.get_by_role("button", name="Send")).to_be_enabled()  # connected
    page.get_by_label("Your question").fill(QUESTION)
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("heading", name=QUESTION)).to_be_visible()
    return page


def type_mid_answer(page: Page) -> None:
    first = page.get_by_role("article", name="Assistant").first
    expect(first).to_contain_text("You said:")  # the answer is streaming
    expect(first).not_to_contain_text("ponds")  # ...and has a way to go
    page.get_by_label("Your question").fill(STEER)
    page.get_by_role("button", name="Send").click()


def test_a_message_typed_mid_answer_is_queued_then_read_at_the_next_step(
    context: BrowserContext, tmp_path: Path
) -> None:
    page = open_chat(context, "echoer")
    type_mid_answer(page)
    queued = page.get_by_role("article", name="You (queued)")
    expect(queued).to_contain_text(STEER)
    expect(queued).to_contain_text("Queued — read at the assistant's next step")
    page.screenshot(path=screenshot_path(tmp_path, "chat-steering-queued.png"))

    # The answer in progress ends; the next step gives the model the message.
    answers = page.get_by_role("article", name="Assistant")
    expect(answers).to_have_count(2)
    expect(answers.nth(0)).to_have_text(re.compile(rf"^\s*You said: {QUESTION}\s*$"))
    expect(answers.nth(1)).to_have_text(re.compile(rf"^\s*You said: {STEER}\s*$"))
    expect(queued).to_have_count(0)
    said = page.get_by_role("article", name="You", exact=True)
    expect(said).to_have_count(2)  # the question, then the message
    expect(said.nth(1)).to_have_text(STEER)
    expect(run_status(page)).to_have_text("Answer complete")
    order = page.locator("deuz-chat .conversation > article").evaluate_all(
        "els => els.map((el) => el.getAttribute('aria-label'))"
    )
    assert order == ["You", "Assistant", "You", "Assistant"]

    page.reload()  # rendered again from the run's stream: the same conversation
    expect(page.get_by_role("article", name="Assistant")).to_have_count(2)
    expect(page.get_by_role("article", name="You", exact=True).nth(1)).to_have_text(
        STEER
    )


def test_an_interrupting_agent_drops_the_answer_in_progress_for_the_message(
    context: BrowserContext,
) -> None:
    page = open_chat(context, "echoer_interrupt")
    type_mid_answer(page)
    answers = page.get_by_role("article", name="Assistant")
    expect(answers.last).to_have_text(re.compile(rf"^\s*You said: {STEER}\s*$"))
    expect(run_status(page)).to_have_text("Answer complete")
    # The interrupted answer was discarded: nothing of it is left on the page, and the
    # message shows where the model read it — before the only answer.
    expect(answers).to_have_count(1)
    order = page.locator("deuz-chat .conversation > article").evaluate_all(
        "els => els.map((el) => el.textContent)"
    )
    assert order == [QUESTION, STEER, f"You said: {STEER}"]


def test_stop_and_say_why_stops_the_run_after_its_tool(
    context: BrowserContext, gate: Path
) -> None:
    page = open_chat(context, "pauser")
    expect(page.get_by_text("pause", exact=False).first).to_be_visible()  # in the tool
    page.get_by_role("button", name="Stop and say why…").click()
    page.get_by_label("Why are you stopping it?").fill("Wrong customer.")
    page.get_by_role("button", name="Stop the run").click()
    gate.touch()  # the tool finishes (a stop never interrupts a tool); then it stops
    expect(run_status(page)).to_have_text("Stopped by ann: Wrong customer.")
    expect(page.get_by_role("button", name="Stop", exact=True)).to_be_hidden()
