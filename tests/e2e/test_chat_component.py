"""The packaged chat component (``{% deuz_chat %}``) on a page of its own — not the demo's:
no demo stylesheet, no demo questions, test agents (tests/urls.py serves the page).

It asks for approval, asks a question, lets the owner edit a call's input and then
approve it, survives a dropped socket and a reload mid-answer with every part shown once,
and fits a phone. The screenshots are docs/chat-component.md's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, WebSocket, expect

from tests.live_site import Daphne, LiveSite

from .conftest import (
    PHONE,
    answer,
    approval_card,
    ask,
    new_context,
    offline,
    overflowing,
    run_status,
    screenshot_path,
    scrolls_sideways,
)

CHUNKS = 40  # the streamer's answer: "w0 w1 … w39", a chunk every 0.05 s
STREAMED = " ".join(f"w{i}" for i in range(CHUNKS))
ACCENT = "rgb(11, 110, 105)"  # the page's --deuz-accent, #0b6e69


@pytest.fixture(scope="module")
def component_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveSite]:
    tmp = tmp_path_factory.mktemp("component-site")
    site = LiveSite(tmp, DEUZ_TEST_CHUNKS=str(CHUNKS), DEUZ_TEST_CHUNK_DELAY="0.05")
    with closing(site) as live:
        yield live


@pytest.fixture(scope="module")
def component_server(component_site: LiveSite) -> Daphne:
    return component_site.daphne()


@pytest.fixture(scope="module")
def session(component_site: LiveSite) -> str:
    """A signed-in user's session cookie (its value); she may edit calls' inputs."""
    ann = component_site.user("ann", "deuz_django.edit_approval_input")
    return ann.removeprefix("sessionid=")


@pytest.fixture
def context(
    browser: Browser, component_server: Daphne, session: str
) -> Iterator[BrowserContext]:
    context = new_context(browser, component_server, width=1280, height=800)
    context.add_cookies(
        [{"name": "sessionid", "value": session, "url": component_server.http}]
    )
    try:
        yield context
    finally:
        context.close()


def open_chat(context: BrowserContext, agent: str, *prompts: str) -> Page:
    page = context.new_page()
    query = "&".join(f"prompt={prompt.replace(' ', '+')}" for prompt in prompts)
    page.goto(f"/test/chat/?agent={agent}&{query}")
    expect(page.get_by_role("button", name="Send")).to_be_enabled()  # connected
    return page


def test_an_approval_on_a_page_of_its_own_themed_and_offline(
    context: BrowserContext, component_server: Daphne, tmp_path: Path
) -> None:
    refused = offline(context, component_server)
    page = open_chat(context, "asker")
    ask(page, "Email me the summary")

    card = approval_card(page, "send_email")
    expect(card).to_contain_text('"to": "ann@example.com"')
    expect(card).to_be_focused()
    expect(run_status(page)).to_have_text("Waiting for your approval")
    approve = card.get_by_role("button", name="Approve", exact=True)
    expect(approve).to_have_css("background-color", ACCENT)  # themed by the page
    expect(card.get_by_role("button", name="Edit, then approve")).to_have_count(0)
    page.screenshot(path=screenshot_path(tmp_path, "chat-component-approval.png"))

    approve.click()

    expect(answer(page)).to_contain_text("sent39")
    expect(card.get_by_role("heading")).to_have_text("Approved: send_email")
    expect(page.get_by_text("send_email done", exact=True)).to_be_visible()
    expect(run_status(page)).to_have_text("Answer complete")
    expect(page.get_by_role("navigation", name="Conversations")).to_contain_text(
        "Email me the summary"
    )
    assert refused == []  # no CDN: everything came from the site


def test_a_question_is_answered_with_a_button(
    context: BrowserContext, tmp_path: Path
) -> None:
    page = open_chat(context, "questioner")
    ask(page, "Refund order A-1")

    card = page.locator("section.question")  # its name changes once answered
    expect(card.get_by_role("heading")).to_have_text("A question for you")
    expect(card).to_contain_text("Refund order A-1 to the card or as store credit?")
    expect(card.get_by_role("button")).to_have_text(
        ["card", "store credit", "Decline to answer"]
    )
    expect(run_status(page)).to_have_text("Waiting for your answer")
    page.screenshot(path=screenshot_path(tmp_path, "chat-component-question.png"))

    card.get_by_role("button", name="store credit").click()

    expect(answer(page)).to_contain_text("Answer: store credit")
    expect(card.get_by_role("heading")).to_have_text("Answered")
    expect(card).to_contain_text("Answered: store credit — the assistant continues.")
    expect(run_status(page)).to_have_text("Answer complete")


def test_the_owner_edits_a_calls_input_then_approves_it(
    context: BrowserContext, tmp_path: Path
) -> None:
    page = open_chat(context, "editor")
    ask(page, "Pay ann")

    card = approval_card(page, "transfer")
    expect(card).to_contain_text('"amount": 50')
    card.get_by_role("button", name="Edit, then approve").click()
    editor = card.get_by_label("Input (JSON)")
    expect(editor).to_be_focused()
    editor.fill('{"to": "ann",')
    card.get_by_role("button", name="Approve with these changes").click()
    expect(card.get_by_role("alert")).to_have_text(
        "Input: enter the call's input as a JSON object."
    )

    editor.fill('{"to": "ann", "amount": 20}')
    card.get_by_role("button", name="Approve with these changes").click()

    expect(answer(page)).to_contain_text("Done: Transferred 20.00 to ann.")
    expect(card.get_by_role("heading")).to_have_text("Approved with changes: transfer")
    expect(card.locator(".edited-input")).to_contain_text('"amount": 20')
    expect(run_status(page)).to_have_text("Answer complete")
    page.screenshot(path=screenshot_path(tmp_path, "chat-component-edit.png"))


def test_a_dropped_socket_and_a_reload_mid_answer_lose_and_repeat_nothing(
    context: BrowserContext,
) -> None:
    page = open_chat(context, "streamer", "Count for me")
    subscriptions: list[dict[str, Any]] = []

    def watch(socket: WebSocket) -> None:
        def note(payload: str | bytes) -> None:
            frame = json.loads(payload)
            if frame["type"] == "subscribe":
                subscriptions.append(frame)

        socket.on("framesent", note)

    page.on("websocket", watch)
    # An example question is a button: a click asks it.
    page.get_by_role("button", name="Count for me").click()
    expect(page.get_by_role("heading", name="Count for me")).to_be_visible()
    expect(answer(page)).to_contain_text("w3")

    page.evaluate("document.querySelector('deuz-chat').socket.close()")
    # It connects again and subscribes from the last part it had: the server replays
    # only the gap.
    for _ in range(100):
        if subscriptions:
            break
        page.wait_for_timeout(100)
    assert [frame["lastSeq"] > 0 for frame in subscriptions] == [True]
    expect(answer(page)).to_contain_text("w12")

    page.reload()  # mid-answer still: rendered from the journal's start, then live
    expect(page).to_have_url(re.compile(r"\?agent=streamer&.*run=\w+$"))
    expect(page.get_by_role("heading", name="Count for me")).to_be_visible()
    expect(answer(page)).to_have_text(re.compile(rf"^tick done\s*{STREAMED}\s*$"))
    expect(run_status(page)).to_have_text("Answer complete")
    words = re.findall(r"w\d+", answer(page).inner_text())
    assert words == [f"w{i}" for i in range(CHUNKS)]


def test_on_a_phone_the_card_fits_and_the_list_is_behind_a_toggle(
    browser: Browser, component_server: Daphne, session: str, tmp_path: Path
) -> None:
    context = new_context(browser, component_server, **PHONE)
    context.add_cookies(
        [{"name": "sessionid", "value": session, "url": component_server.http}]
    )
    try:
        page = open_chat(context, "asker")
        ask(page, "Email me on my phone")
        card = approval_card(page, "send_email")
        approve = card.get_by_role("button", name="Approve", exact=True)
        expect(approve).to_be_visible()
        assert not scrolls_sideways(page)
        assert overflowing(page, "deuz-chat *") == []
        assert approve.bounding_box()["height"] >= 44  # type: ignore[index]
        card.scroll_into_view_if_needed()
        page.screenshot(path=screenshot_path(tmp_path, "chat-component-phone.png"))

        toggle = page.get_by_role("button", name="Conversations")
        expect(toggle).to_have_attribute("aria-expanded", "false")
        conversations = page.get_by_role("navigation", name="Conversations")
        expect(conversations).to_be_hidden()
        toggle.click()
        expect(toggle).to_have_attribute("aria-expanded", "true")
        new = conversations.get_by_role("button", name="New conversation")
        expect(new).to_be_focused()
        expect(
            conversations.get_by_role("link", name=re.compile("Email me on my phone"))
        ).to_have_attribute("aria-current", "page")
        page.keyboard.press("Escape")  # closes the list, back to its toggle
        expect(conversations).to_be_hidden()
        expect(toggle).to_be_focused()
        toggle.click()
        new.click()
        expect(conversations).to_be_hidden()
        expect(page.get_by_label("Your question")).to_be_focused()
    finally:
        context.close()
