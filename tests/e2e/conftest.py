"""Browser tests: the example project served by a real daphne process, driven by Chromium.

``site`` is the project on its own freshly migrated database (see ``tests.live_site``);
``server`` is daphne serving it on a free port; ``page`` is a fresh browser context on that
server. ``demo_site`` / ``demo_server`` are the same with the demo's users and orders
(``manage.py demo_setup``) for the chat tests. Static files are answered inside the
browser context from Django's finders — as a CDN or whitenoise would serve them in
production — so the server runs exactly ``daphne example_project.asgi:application``.

Chromium is Debian's (``/usr/bin/chromium``); ``playwright install`` is never needed.

Screenshots go to ``docs/`` (the documentation's images) only with ``DEUZ_UPDATE_SCREENSHOTS=1``;
otherwise into the test's tmp dir, so a test run leaves the working tree as it was.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from urllib.parse import urlparse

import pytest
from django.conf import settings
from django.contrib.staticfiles import finders
from playwright.sync_api import (
    Browser,
    BrowserContext,
    Locator,
    Page,
    Route,
    expect,
    sync_playwright,
)

from tests.live_site import ROOT, Daphne, LiveSite


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every browser test is `e2e`, so the fast loop can leave them out by marker."""
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.e2e)


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
DOCS = ROOT / "docs"
# The screens every page is checked on: a laptop, and a phone.
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
SCREENS = pytest.mark.parametrize(
    "screen", [DESKTOP, PHONE], ids=lambda size: f"{size['width']}x{size['height']}"
)
DEMO_ENV = {"DEUZ_DEMO_STREAM_DELAY": "0.01", "DEUZ_LEASE_SECONDS": "2"}


def screenshot_path(tmp_path: Path, name: str) -> Path:
    """Where a screenshot goes: ``docs/`` when regenerating the documentation's images."""
    return (
        DOCS if os.environ.get("DEUZ_UPDATE_SCREENSHOTS") == "1" else tmp_path
    ) / name


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveSite]:
    with closing(LiveSite(tmp_path_factory.mktemp("e2e-site"))) as live:
        yield live


@pytest.fixture(scope="session")
def server(site: LiveSite) -> Daphne:
    return site.daphne()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One Chromium per test module. While Playwright's sync API runs, its event loop makes
    the Django ORM refuse to work in this thread: set data up with ``site.script`` and keep
    the browser from outliving the module."""
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield chromium
        chromium.close()


def serve_static(route: Route) -> None:
    prefix = urlparse(settings.STATIC_URL).path
    found = finders.find(urlparse(route.request.url).path.removeprefix(prefix))
    if found is None:
        route.fulfill(status=404, body="not found")
    else:
        route.fulfill(path=Path(str(found)))


def new_context(
    browser: Browser, server: Daphne, *, width: int = 1440, height: int = 900
) -> BrowserContext:
    """A fresh browser context (cookies, storage) on ``server``, static files served."""
    context = browser.new_context(
        base_url=server.http,
        viewport={"width": width, "height": height},
        color_scheme="light",
    )
    context.route(f"{server.http}{urlparse(settings.STATIC_URL).path}**", serve_static)
    return context


def offline(context: BrowserContext, server: Daphne) -> list[str]:
    """Refuse every request that does not go to ``server``; returns the refused URLs, so
    a test can say the page needed nothing from the network."""
    refused: list[str] = []

    def refuse(route: Route) -> None:
        refused.append(route.request.url)
        route.abort("internetdisconnected")

    context.route(
        lambda url: not url.startswith(server.http) and not url.startswith("data:"),
        refuse,
    )
    return refused


@pytest.fixture
def page(browser: Browser, server: Daphne) -> Iterator[Page]:
    context = new_context(browser, server)
    try:
        yield context.new_page()
    finally:
        context.close()


def demo(tmp: Path, **env: str) -> LiveSite:
    """A site with the demo's users (customer, staff) and orders."""
    live = LiveSite(tmp, **{**DEMO_ENV, **env})
    try:
        live.manage("demo_setup")
    except BaseException:
        live.close()
        raise
    return live


@pytest.fixture(scope="session")
def demo_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveSite]:
    with closing(demo(tmp_path_factory.mktemp("demo-site"))) as live:
        yield live


@pytest.fixture(scope="session")
def demo_server(demo_site: LiveSite) -> Daphne:
    return demo_site.daphne()


# -- the admin ------------------------------------------------------------------------------

QUEUE = "/admin/deuz_django/approval/"
RUNS = "/admin/deuz_django/run/"


def admin_sign_in(page: Page, username: str, url: str, password: str = "pw") -> None:
    page.goto(f"/admin/login/?next={url}")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(re.compile(re.escape(url) + "$"))


def overflowing(page: Page, selector: str) -> list[str]:
    """The visible elements matching ``selector`` that stick out of the viewport, or of
    a box that scrolls sideways (cut off there), described for the failure message."""
    found: list[str] = page.evaluate(
        """(selector) => {
          const clipped = (element) => {
            for (let box = element.parentElement; box; box = box.parentElement) {
              const overflow = getComputedStyle(box).overflowX;
              if ((overflow === "auto" || overflow === "scroll" || overflow === "hidden")
                  && box.scrollWidth > box.clientWidth + 1) return true;
            }
            return false;
          };
          return [...document.querySelectorAll(selector)]
            .filter((element) => element.getClientRects().length)
            .filter((element) => {
              const rect = element.getBoundingClientRect();
              return rect.left < 0 || rect.right > innerWidth + 0.5 || clipped(element);
            })
            .map((element) => `${element.tagName.toLowerCase()}.${element.className}: `
              + element.textContent.trim().slice(0, 40));
        }""",
        selector,
    )
    return found


def scrolls_sideways(page: Page) -> bool:
    return bool(
        page.evaluate("document.documentElement.scrollWidth > innerWidth + 0.5")
    )


# -- the chat page ----------------------------------------------------------------------------

CUSTOMER = ("customer", "customer-pass")
STAFF = ("staff", "staff-pass")


@contextmanager
def chat_page(browser: Browser, server: Daphne) -> Iterator[Page]:
    """A laptop-sized page on ``server``, nobody signed in yet."""
    context = new_context(browser, server, width=1280, height=860)
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture
def chat(browser: Browser, demo_server: Daphne) -> Iterator[Page]:
    """A chat page on the demo site."""
    with chat_page(browser, demo_server) as page:
        yield page


def sign_in(page: Page, username: str, password: str) -> None:
    """Open the chat; as nobody is signed in it sends the browser to its login page."""
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/login/\?next=/$"))
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Support chat")).to_be_visible()


def ask(page: Page, question: str) -> str:
    """Ask in a new conversation; returns its run id (the page puts it in the URL)."""
    page.get_by_label("Your question").fill(question)
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("heading", name=question)).to_be_visible()
    match = re.search(r"[?&]run=(\w+)", page.url)
    assert match is not None, page.url
    return match.group(1)


def answer(page: Page) -> Locator:
    return page.get_by_role("article", name="Assistant")


def answered(page: Page, text: str) -> Locator:
    """The assistant's paragraph saying exactly ``text`` (the words of one step)."""
    return answer(page).get_by_text(text, exact=True)


def approval_card(page: Page, tool_name: str) -> Locator:
    """The card of a gated call (or of a call a crash left in doubt), whatever its
    heading says (asking, or decided)."""
    label = (
        "Approval needed|Approved|Approved with changes|Denied|Expired|Timed out|Decided"
        "|Approved automatically|Denied automatically"
        "|Outcome unknown|It happened|Run again|Marked failed|Settled"
    )
    name = re.compile(rf"^({label}): {re.escape(tool_name)}$")
    return page.get_by_role("region", name=name)


def run_status(page: Page) -> Locator:
    return page.locator("deuz-chat .run-status")
