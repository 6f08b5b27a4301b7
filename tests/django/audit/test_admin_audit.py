"""The audit trail in the admin: a run's page shows its records as a timeline to whoever
may see the run; the audit list is read-only and needs ``view_auditrecord``."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from deuz_django import audit, services
from deuz_django.models import AuditRecord
from tests.django.admin_support import VIEWER, approval, run_url, suspended_run

pytestmark = pytest.mark.django_db
MakeUser = Callable[..., User]
AUDIT = reverse("admin:deuz_django_auditrecord_changelist")


def test_a_runs_page_shows_its_audit_timeline_oldest_first(
    client: Client, make_user: MakeUser
) -> None:
    ann = make_user("ann", *VIEWER, staff=True)
    run = suspended_run(ann)
    services.decide_approval(
        approval(run, "send_email"), user=ann, approved=False, reason="Not now."
    )
    services.stop_run(run.run_id, user=ann, reason="Wrong order.")
    audit.append("decision", run_id="another-run")
    client.force_login(ann)

    page = client.get(run_url(run))

    entries = page.context["audit_timeline"]
    assert [(e.record.action, e.summary) for e in entries] == [
        ("decision", "denied send_email"),
        ("stop", "Wrong order."),
    ]
    html = page.content.decode()
    assert "Audit trail" in html
    assert entries[1].record.digest in html


def test_a_run_nothing_happened_to_says_so(client: Client, make_user: MakeUser) -> None:
    client.force_login(make_user("root", superuser=True))
    page = client.get(run_url(suspended_run()))
    assert "Nothing audited yet." in page.content.decode()


def test_the_audit_list_is_read_only_and_searched_by_run_id(
    client: Client, make_user: MakeUser
) -> None:
    audit.append("decision", run_id="run-a", details={"status": "approved"})
    audit.append("stop", run_id="run-b", details={"reason": "enough"})
    client.force_login(make_user("root", superuser=True))

    listed = client.get(AUDIT, {"q": "run-b"})
    shown = client.get(
        reverse(
            "admin:deuz_django_auditrecord_change",
            args=[AuditRecord.objects.get(run_id="run-a").pk],
        )
    )

    assert [r.run_id for r in listed.context["cl"].result_list] == ["run-b"]
    assert listed.context["has_add_permission"] is False
    assert listed.context["action_form"] is None  # no delete action
    assert shown.status_code == 200
    assert shown.context["has_change_permission"] is False
    assert client.post(shown.request["PATH_INFO"], {}).status_code == 403


def test_the_audit_list_is_filtered_by_action(
    client: Client, make_user: MakeUser
) -> None:
    audit.append("decision", run_id="run-a")
    audit.append("stop", run_id="run-a")
    client.force_login(make_user("root", superuser=True))

    listed = client.get(AUDIT, {"action__exact": "stop"})

    assert [r.action for r in listed.context["cl"].result_list] == ["stop"]


def test_the_audit_list_needs_the_view_permission(
    client: Client, make_user: MakeUser
) -> None:
    client.force_login(make_user("staff", *VIEWER, staff=True))
    assert client.get(AUDIT).status_code == 403
    client.force_login(make_user("auditor", "deuz_django.view_auditrecord", staff=True))
    assert client.get(AUDIT).status_code == 200
