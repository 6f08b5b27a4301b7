"""A staff member approves a suspended run's calls in the admin, in a real browser, and
the run completes. The queue's screenshot is the one the README shows."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, expect

from tests.django.agents import TOOL_PERMISSION
from tests.live_site import LiveSite

from .conftest import screenshot_path

APPROVER = (
    "deuz_django.view_run",
    "deuz_django.view_approval",
    "deuz_django.decide_approval",
    TOOL_PERMISSION,
)
SUSPEND = """
from django.contrib.auth.models import Permission, User
from deuz_django import services

finance = User.objects.create_user("finance", password="pw", is_staff=True)
for perm in params["approver"]:
    app, codename = perm.split(".")
    finance.user_permissions.add(
        Permission.objects.get(content_type__app_label=app, codename=codename)
    )
for name in ("ann", "bob"):
    User.objects.create_user(name, password="pw")
runs = {}
for agent, owner, text in [
    ("gated", "ann", "Refund order A-1 and email Ann."),
    ("nested", "bob", "Ask the researcher to email Bob."),
]:
    run = services.start_run(
        agent=agent, owner=User.objects.get(username=owner),
        messages=[{"role": "user", "content": text}],
    )
    services.resume_run(run.run_id)
    runs[agent] = run.run_id
print(json.dumps(runs))
"""


def suspended_runs(site: LiveSite) -> Any:
    """The staff member, two owners, and their runs waiting for approvals."""
    return site.script(f"params = {{'approver': {list(APPROVER)!r}}}\n{SUSPEND}")


def test_staff_approves_in_the_queue_and_on_the_run_page_and_the_run_completes(
    site: LiveSite, page: Page, tmp_path: Path
) -> None:
    run_id = suspended_runs(site)["gated"]

    page.goto("/admin/login/?next=/admin/deuz_django/approval/")
    page.get_by_label("Username").fill("finance")
    page.get_by_label("Password").fill("pw")
    page.get_by_role("button", name="Log in").click()

    expect(page.get_by_role("heading", name="Approval queue")).to_be_visible()
    refund = page.get_by_role("row", name=re.compile(r"refund \(r1\)")).filter(
        has_text=run_id[:12]
    )
    expect(refund).to_contain_text('"order_id": "A-1"')
    page.get_by_role("button", name="Toggle navigation").click()  # room for the queue
    page.screenshot(
        path=screenshot_path(tmp_path, "admin-approval-queue.png"), full_page=True
    )

    refund.get_by_role("checkbox").check()
    page.get_by_role("combobox", name="Action").select_option("approve_selected")
    page.locator(".actions").get_by_role("button", name="Run").click()

    expect(page.get_by_role("heading", name="Approve these calls?")).to_be_visible()
    page.get_by_label("Reason (optional)").fill("Customer verified by phone.")
    page.get_by_role("button", name="Approve 1 call").click()

    expect(page.locator(".messagelist")).to_contain_text(
        f"Approved refund (r1) on run {run_id}."
    )
    page.get_by_role("row", name=re.compile(r"send_email \(e1\)")).filter(
        has_text=run_id[:12]
    ).get_by_role("link", name="Refund order A-1 and email Ann.").click()

    page.get_by_role("button", name="Approve send_email (e1)").click()

    expect(page.locator(".messagelist")).to_contain_text(
        f"Run {run_id} resumed in the background; it is now completed."
    )
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
