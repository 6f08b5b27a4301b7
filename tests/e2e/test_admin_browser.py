"""The admin in a real browser: the approval queue fits a laptop and a phone screen, and a
staff member approves a suspended run's calls there and on the run page until the run
completes. The queue's and the run page's screenshots are the ones the documentation shows."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from playwright.sync_api import Browser, Page, expect

from tests.django.agents import TOOL_PERMISSION
from tests.live_site import Daphne, LiveSite

from .agents import BODY
from .conftest import (
    DESKTOP,
    QUEUE,
    RUNS,
    SCREENS,
    admin_sign_in,
    new_context,
    overflowing,
    screenshot_path,
    scrolls_sideways,
)

APPROVER = (
    "deuz_django.view_run",
    "deuz_django.view_approval",
    "deuz_django.decide_approval",
    TOOL_PERMISSION,
)
SUSPEND = """
from django.contrib.auth.models import Permission, User
from deuz_django import services
from deuz_django.models import Approval

finance, created = User.objects.get_or_create(username="finance", is_staff=True)
if created:
    finance.set_password("pw")
    finance.save()
    for perm in params["approver"]:
        app, codename = perm.split(".")
        finance.user_permissions.add(
            Permission.objects.get(content_type__app_label=app, codename=codename)
        )
for name in ("ann", "bob"):
    User.objects.get_or_create(username=name)
texts = {
    "gated": ("ann", "Refund order A-1 and email Ann."),
    "nested": ("bob", "Ask the researcher to email Bob."),
    "verbose": ("ann", "Publish the quarterly refunds report for every region."),
}
runs = {}
for agent in params["agents"]:
    owner, text = texts[agent]
    run = services.start_run(
        agent=agent, owner=User.objects.get(username=owner),
        messages=[{"role": "user", "content": text}],
    )
    services.resume_run(run.run_id)
    runs[agent] = run.run_id
for agent, tool, approved, decider in params["verdicts"]:
    decision = services.decide_approval(
        Approval.objects.get(run__run_id=runs[agent], tool_name=tool),
        user=User.objects.get(username=decider),
        approved=approved,
        reason="" if approved else "Not needed any more, thanks.",
    )
    if decision.run_ready:
        services.resume_run(runs[agent])
print(json.dumps(runs))
"""


def run_status_once_settled(site: LiveSite, run_id: str) -> Any:
    """The run's status once no leg holds it (at most a minute)."""
    return site.script(
        f"""
        import time
        from deuz_django.models import Run
        deadline = time.monotonic() + 60
        while Run.objects.filter(run_id={run_id!r}).exclude(lease_owner="").exists():
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        print(json.dumps(Run.objects.get(run_id={run_id!r}).status))
        """
    )


def suspended_runs(
    site: LiveSite, *agents: str, verdicts: tuple[tuple[str, str, bool, str], ...] = ()
) -> Any:
    """The staff member ``finance``, two owners, and runs of ``agents`` waiting for
    approvals; then each ``(agent, tool, approved, decider)`` of ``verdicts`` recorded,
    and a run whose last approval that was resumed."""
    params = {
        "approver": list(APPROVER),
        "agents": list(agents),
        "verdicts": list(verdicts),
    }
    return site.script(f"params = {params!r}\n{SUSPEND}")


@SCREENS
def test_the_queue_fits_the_screen_and_shows_the_work_still_to_do(
    browser: Browser,
    server: Daphne,
    site: LiveSite,
    screen: dict[str, int],
    tmp_path: Path,
) -> None:
    suspended_runs(
        site,
        "gated",
        "nested",
        "verbose",
        verdicts=(("gated", "send_email", False, "ann"),),
    )
    context = new_context(browser, server, **screen)
    try:
        page = context.new_page()
        admin_sign_in(page, "finance", QUEUE)
        expect(page.get_by_role("heading", name="Approval queue")).to_be_visible()

        # Pending calls only, by default: the status filter says so.
        statuses = page.locator("#result_list td.field-status_badge .deuz-badge")
        expect(statuses.first).to_be_visible()
        assert set(statuses.all_inner_texts()) == {"pending"}
        status_filter = page.locator('#changelist-filter [data-filter-title="status"]')
        expect(status_filter.locator("li.selected")).to_have_text("pending")
        assert overflowing(page, "#result_list th, #result_list td") == []
        assert not scrolls_sideways(page)

        # A long input is cut short; the tooltip holds all of it.
        summary = page.locator(".field-call_input .deuz-summary", has_text="Refunds")
        summary = summary.first
        assert summary.inner_text().endswith("…")
        assert BODY[:60] in (summary.get_attribute("title") or "")
        assert (summary.bounding_box() or {"width": 1e9})["width"] < 300

        # Everything, decided calls greyed out after the pending ones.
        status_filter.get_by_role("link", name="All").click()
        decided = page.get_by_role("row").filter(has_text="denied").first
        expect(decided).to_contain_text("Not needed any more")
        pending = page.get_by_role("row").filter(has_text="pending").first
        assert shade(decided) != shade(pending)
        assert overflowing(page, "#result_list th, #result_list td") == []
        if screen == DESKTOP:
            page.screenshot(
                path=screenshot_path(tmp_path, "admin-approval-queue.png"),
                full_page=True,
            )
    finally:
        context.close()


def shade(row: Any) -> str:
    return str(
        row.locator("td").last.evaluate(
            "cell => getComputedStyle(cell).backgroundColor"
        )
    )


@SCREENS
def test_the_run_page_gives_long_results_the_width_and_folds_very_long_ones(
    browser: Browser, server: Daphne, site: LiveSite, screen: dict[str, int]
) -> None:
    run_id = suspended_runs(
        site, "verbose", verdicts=(("verbose", "publish", True, "finance"),)
    )["verbose"]
    context = new_context(browser, server, **screen)
    try:
        page = context.new_page()
        admin_sign_in(page, "finance", RUNS)
        page.get_by_role("link", name=run_id).click()
        transcript = page.locator(".deuz-transcript")
        expect(transcript).to_contain_text("Published the report.")
        # The section headings are one line tall: none stretches up behind the form,
        # which the admin floats.
        for heading in page.locator("#content h2").all():
            assert heading.bounding_box()["height"] < 60, heading.inner_text()

        # Every input and result wraps in the whole width of its entry.
        blocks = transcript.locator("pre.deuz-json:visible")
        assert blocks.count() >= 4
        for index in range(blocks.count()):
            share = blocks.nth(index).evaluate(
                """pre => pre.scrollWidth <= pre.clientWidth
                  && pre.offsetWidth / pre.closest("li").offsetWidth"""
            )
            assert share > 0.85
        publish = transcript.locator(".deuz-entry--tool-call").filter(
            has_text="publish"
        )
        expect(publish).to_contain_text(BODY.strip()[-60:])  # nothing clipped

        # The 305-line report shows its start, and all of it on request.
        report = transcript.locator(".deuz-entry--tool-result").filter(
            has_text="fetch_report"
        )
        expand = report.get_by_text(re.compile(r"Show all of it \(\d+ lines"))
        expect(report.locator(".deuz-preview")).to_contain_text('"region": "region-0"')
        expect(report.get_by_text('"region": "region-59"')).to_be_hidden()
        expand.click()
        expect(report.get_by_text(re.compile('"region": "region-59"'))).to_be_visible()
        expect(report.locator(".deuz-preview")).to_be_hidden()
        report.get_by_text("Show less").click()
        expect(report.locator(".deuz-preview")).to_be_visible()
        assert overflowing(page, "#content *") == []
        assert not scrolls_sideways(page)
    finally:
        context.close()


def test_staff_approves_in_the_queue_and_on_the_run_page_and_the_run_completes(
    site: LiveSite, page: Page, tmp_path: Path
) -> None:
    run_id = suspended_runs(site, "gated")["gated"]
    admin_sign_in(page, "finance", QUEUE)

    expect(page.get_by_role("heading", name="Approval queue")).to_be_visible()
    refund = page.get_by_role("row", name=re.compile(r"refund r1")).filter(
        has_text=run_id[:8]
    )
    expect(refund).to_contain_text('"order_id": "A-1"')

    refund.get_by_role("checkbox").check()
    page.get_by_role("combobox", name="Action").select_option("approve_selected")
    page.locator(".actions").get_by_role("button", name="Run").click()

    expect(page.get_by_role("heading", name="Approve these calls?")).to_be_visible()
    page.get_by_label("Reason (optional)").fill("Customer verified by phone.")
    page.get_by_role("button", name="Approve 1 call").click()

    expect(page.locator(".messagelist")).to_contain_text(
        f"Approved refund (r1) on run {run_id}."
    )
    page.get_by_role("row", name=re.compile(r"send_email e1")).filter(
        has_text=run_id[:8]
    ).get_by_role("link", name="Refund order A-1 and email Ann.").click()

    # A misclick on Deny asks first, and can be taken back.
    page.get_by_role("button", name="Deny send_email (e1)").click()
    expect(page.get_by_role("heading", name="Deny these calls?")).to_be_visible()
    page.get_by_role("button", name="No, take me back").click()
    expect(page.get_by_role("heading", name="1 approval pending")).to_be_visible()

    page.get_by_role("button", name="Approve send_email (e1)").click()
    expect(page.get_by_role("heading", name="Approve these calls?")).to_be_visible()
    expect(page.locator(".deuz-confirm")).to_contain_text("ann@example.com")
    page.get_by_role("button", name="Approve 1 call").click()

    expect(page.locator(".messagelist")).to_contain_text(
        f"Run {run_id} resumed: it continues on this server."
    )
    # The leg runs on the server after the response: the page shows its end on reload.
    assert run_status_once_settled(site, run_id) == "completed"
    page.reload()
    expect(page.locator(".field-status_badge")).to_contain_text("completed")
    expect(page.locator(".deuz-transcript")).to_contain_text(
        "Refund and email handled."
    )
    history = page.locator(".deuz-history")
    expect(history).to_contain_text("Customer verified by phone.")
    expect(history).to_contain_text("finance")
    page.screenshot(
        path=screenshot_path(tmp_path, "admin-run-page.png"), full_page=True
    )
