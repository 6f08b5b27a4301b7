"""The admin dashboard in a real browser: a month of seeded activity renders as SVG charts
whose bars carry their numbers, the filters narrow them, and the documentation's screenshot is
taken here."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.live_site import Daphne, LiveSite

from .conftest import new_context, screenshot_path

SEED = """
from django.contrib.auth.models import Permission, User
from tests.django.dashboard_support import seed_demo

seed_demo()
lead = User.objects.create_user("lead", password="pw", is_staff=True)
for codename in ("view_run", "view_approval"):
    lead.user_permissions.add(
        Permission.objects.get(content_type__app_label="deuz_django", codename=codename)
    )
print(json.dumps("ok"))
"""


@pytest.fixture(scope="module")
def dashboard_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daphne]:
    with closing(LiveSite(tmp_path_factory.mktemp("dashboard-site"))) as site:
        site.script(SEED)
        yield site.daphne()


@pytest.fixture
def lead_page(browser: Browser, dashboard_server: Daphne) -> Iterator[Page]:
    context = new_context(browser, dashboard_server, width=1440, height=1000)
    try:
        page = context.new_page()
        page.goto("/admin/login/?next=/admin/deuz_django/dashboard/")
        page.get_by_label("Username").fill("lead")
        page.get_by_label("Password").fill("pw")
        page.get_by_role("button", name="Log in").click()
        yield page
    finally:
        context.close()


def test_the_dashboard_draws_its_charts_with_numbers_on_hover(
    lead_page: Page, tmp_path: Path
) -> None:
    page = lead_page
    expect(page.get_by_role("heading", name="Dashboard", exact=True)).to_be_visible()
    for title in (
        "Runs by status",
        "Approvals waiting",
        "Decision latency by tool",
        "Tokens by agent",
        "Cost by agent",
        "Failed runs",
    ):
        section = page.get_by_role("region", name=title)
        expect(section.locator("svg.deuz-chart-svg")).to_be_visible()

    runs = page.get_by_role("region", name="Runs by status")
    bar = runs.locator("rect.deuz-bar").last
    bar.hover()
    expect(bar.locator("title")).to_have_text(
        re.compile(r"^\d{4}-\d{2}-\d{2} · (running|suspended|completed): \d+$")
    )
    cost = page.get_by_role("region", name="Cost by agent").locator("rect.deuz-bar")
    expect(cost.first.locator("title")).to_have_text(re.compile(r" · \w+: \$\d"))
    latency = page.get_by_role("region", name="Decision latency by tool")
    expect(latency.locator("rect.deuz-bar title").first).to_have_text(
        re.compile(r"^\S+ · p(50|95): (\d+[dhms] ?)+$")
    )

    numbers = runs.locator("details.deuz-numbers")
    numbers.locator("summary").click()
    expect(numbers.get_by_role("row").nth(1)).to_contain_text(re.compile(r"\d"))
    numbers.locator("summary").click()

    page.get_by_role("button", name="Toggle navigation").click()  # room for the charts
    page.screenshot(
        path=screenshot_path(tmp_path, "admin-dashboard.png"), full_page=True
    )


def test_the_filters_narrow_the_charts_in_the_browser(lead_page: Page) -> None:
    page = lead_page
    page.get_by_label("Agent", exact=True).select_option("research")
    page.get_by_label("Period", exact=True).select_option("7")
    page.get_by_role("button", name="Show").click()

    expect(page).to_have_url(re.compile(r"agent=research&period=7"))
    tokens = page.get_by_role("region", name="Tokens by agent")
    titles = tokens.locator("rect.deuz-bar title")
    expect(titles.first).to_have_text(re.compile(r" · research: [\d,]+$"))
    assert all(" · research: " in t for t in titles.all_text_contents())
    rows = page.get_by_role("region", name="Runs by status").locator("tbody tr")
    expect(rows).to_have_count(7)
