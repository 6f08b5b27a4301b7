"""A minimal AG-UI front end — ``@ag-ui/client`` in a page, no framework, bundled by
esbuild at test time — approving a call in Chromium (Debian's, through Playwright)
against a real daphne. The page is answered inside the browser context on the
server's own origin, so its requests are same-origin API calls with a token."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, Route, expect, sync_playwright

from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS
from tests.live_site import LiveSite

from .conftest import token_for
from .node_client import NODE_DIR

pytestmark = [pytest.mark.e2e, pytest.mark.processes]
PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>AG-UI</title>
<link rel="icon" href="data:,"></head>
<body>
  <form><input name="text" aria-label="Message"><button>Send</button></form>
  <ol id="transcript"></ol>
  <div id="interrupts"></div>
  <p id="status" role="status"></p>
  <script type="module" src="client.js"></script>
</body></html>
"""


def bundle(out: Path) -> Path:
    """The page's script: page.mjs with @ag-ui/client, as one ES module."""
    target = out / "client.js"
    subprocess.run(
        [
            str(NODE_DIR / "node_modules" / ".bin" / "esbuild"),
            "page.mjs",
            "--bundle",
            "--format=esm",
            "--log-level=warning",
            f"--outfile={target}",
        ],
        cwd=NODE_DIR,
        check=True,
        timeout=120,
    )
    return target


@pytest.fixture
def page(tmp_path: Path) -> Iterator[Page]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS
        )
        try:
            yield browser.new_context().new_page()
        finally:
            browser.close()


def test_a_page_with_the_ag_ui_client_approves_a_call(
    site: LiveSite, effects: Path, page: Page, tmp_path: Path
) -> None:
    server = site.daphne()
    token = token_for(site, "ann")
    script = bundle(tmp_path)

    def serve(route: Route) -> None:
        if route.request.url.split("?")[0].endswith("/client.js"):
            route.fulfill(body=script.read_text(), content_type="text/javascript")
        else:
            route.fulfill(body=PAGE, content_type="text/html")

    page.route(f"{server.http}/agui-page/**", serve)
    endpoint = "/api/deuz/agents/agui_mailer/ag-ui/"
    page.goto(f"{server.http}/agui-page/?token={token}&endpoint={endpoint}")
    page.get_by_label("Message").fill("Email Ann, please.")
    page.get_by_role("button", name="Send").click()

    expect(page.get_by_role("status")).to_have_text("interrupt")
    expect(page.locator(".call")).to_have_text("calls send_email")
    expect(page.locator(".interrupt")).to_contain_text("May send_email run")
    assert not effects.exists()

    page.get_by_role("button", name="Approve").click()
    expect(page.get_by_role("status")).to_have_text("success")
    expect(page.locator(".result")).to_have_text("result: sent to ann@example.com")
    expect(page.locator(".assistant").last).to_have_text("sent 0 sent 1 sent 2")
    expect(page.locator(".interrupt")).to_have_count(0)
    assert effects.read_text().splitlines() == ["send_email:ann@example.com"]
