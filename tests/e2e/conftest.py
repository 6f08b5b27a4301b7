"""Browser tests: the example project served by a real daphne process, driven by Chromium.

``site`` is the project on its own freshly migrated database (see ``tests.live_site``);
``server`` is daphne serving it on a free port; ``page`` is a fresh browser context on that
server. Static files are answered inside the browser context from Django's finders — as a
CDN or whitenoise would serve them in production — so the server runs exactly
``daphne example_project.asgi:application``.

Chromium is Debian's (``/usr/bin/chromium``); ``playwright install`` is never needed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest
from django.conf import settings
from django.contrib.staticfiles import finders
from playwright.sync_api import Browser, Page, Route, sync_playwright

from tests.live_site import ROOT, Daphne, LiveSite

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


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveSite]:
    live = LiveSite(tmp_path_factory.mktemp("e2e-site"))
    try:
        yield live
    finally:
        live.close()


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


@pytest.fixture
def page(browser: Browser, server: Daphne) -> Iterator[Page]:
    context = browser.new_context(
        base_url=server.http,
        viewport={"width": 1440, "height": 900},
        color_scheme="light",
    )
    context.route(f"{server.http}{urlparse(settings.STATIC_URL).path}**", serve_static)
    tab = context.new_page()
    try:
        yield tab
    finally:
        context.close()
