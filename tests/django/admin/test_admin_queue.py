"""The approval queue: what each staff member sees, its order and columns, and the
Approve/Deny actions with their confirmation page."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.contrib.admin import helpers
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone
from django.utils.html import strip_tags

from deuz_django.models import Approval, ApprovalStatus, RunStatus
from deuz_django.runs.continuing import join_handed_off
from tests.django.admin_support import (
    APPROVER,
    DECIDER,
    QUEUE,
    VIEWER,
    approval,
    messages_of,
    suspended_run,
)
from tests.django.agents import TOOL_PERMISSION
from tests.django.run_support import background_leg

pytestmark = pytest.mark.django_db
MakeUser = Callable[..., User]


def act(client: Client, action: str, approvals: list[Approval], **confirm: str) -> Any:
    """Post the changelist's action bar, or with ``post="yes"`` its confirmation page."""
    data: dict[str, Any] = {
        "action": action,
        helpers.ACTION_CHECKBOX_NAME: [str(a.pk) for a in approvals],
        **confirm,
    }
    if not confirm:
        data["index"] = "0"  # which action bar was used
    return client.post(QUEUE, data, follow=True)


def text_of(page: str) -> str:
    """The page's text without its tags, as a reader sees it."""
    return strip_tags(page).replace("\xa0", " ")


def action_names(response: Any) -> list[str]:
    form = response.context["action_form"]  # None when no action is offered
    return [] if form is None else [name for name, _ in form.fields["action"].choices]


def test_the_queue_shows_pending_calls_oldest_first_by_default(
    client: Client, make_user: MakeUser
) -> None:
    older = suspended_run(make_user("ann"))
    newer = suspended_run(make_user("bob"))
    Approval.objects.filter(run=older).update(
        created_at=timezone.now() - timedelta(hours=1)
    )
    client.force_login(make_user("fin", *APPROVER, staff=True))
    client.post(
        reverse(
            "admin:deuz_django_approval_decide", args=[approval(older, "refund").pk]
        ),
        {"verdict": "deny", "post": "yes"},
    )

    response = client.get(QUEUE)

    rows = list(response.context["cl"].result_list)
    assert [(a.run_id, a.tool_name, a.status) for a in rows] == [
        (older.pk, "send_email", "pending"),
        (newer.pk, "refund", "pending"),
        (newer.pk, "send_email", "pending"),
    ]
    page = response.content.decode()
    assert "&quot;order_id&quot;: &quot;A-1&quot;" in page  # the input, on one line
    assert "asked 1 hour ago" in text_of(page)
    (status_filter,) = [
        f for f in response.context["cl"].filter_specs if f.title == "status"
    ]
    choices = list(status_filter.choices(response.context["cl"]))
    assert [(c["display"], c["selected"]) for c in choices] == [
        ("pending", True),
        ("approved", False),
        ("denied", False),
        ("expired", False),
        ("cancelled", False),
        ("All", False),
    ]


def test_all_shows_decided_calls_after_the_pending_ones_marked_as_decided(
    client: Client, make_user: MakeUser
) -> None:
    run = suspended_run(make_user("ann"))
    client.force_login(make_user("fin", *APPROVER, staff=True))
    client.post(
        reverse("admin:deuz_django_approval_decide", args=[approval(run, "refund").pk]),
        {"verdict": "deny", "reason": "Duplicate.", "post": "yes"},
    )

    response = client.get(QUEUE, {"status": "all"})

    rows = list(response.context["cl"].result_list)
    assert [(a.tool_name, a.status) for a in rows] == [
        ("send_email", "pending"),
        ("refund", "denied"),
    ]
    page = response.content.decode()
    assert page.count('class="deuz-decided"') == 1
    assert "fin · just now" in text_of(page)
    assert "Duplicate." in page
    denied = client.get(QUEUE, {"status": "denied"})
    assert [a.tool_name for a in denied.context["cl"].result_list] == ["refund"]


def test_a_long_input_is_cut_short_with_all_of_it_in_the_tooltip(
    client: Client, make_user: MakeUser
) -> None:
    run = suspended_run(make_user("ann"))
    body = "word " * 400
    Approval.objects.filter(run=run, tool_name="send_email").update(
        input={"to": "ann@example.com", "body": body}
    )
    client.force_login(make_user("root", superuser=True))

    page = client.get(QUEUE).content.decode()

    (summary,) = [
        code
        for code in re.findall(r'<code class="deuz-summary[^>]*>[^<]*', page)
        if "word" in code
    ]
    title, text = summary.split(">", 1)
    assert body.strip() in title  # the tooltip: the whole input, pretty-printed
    assert text.endswith("…")
    assert len(html.unescape(text)) == 120
    change = reverse(
        "admin:deuz_django_approval_change", args=[approval(run, "send_email").pk]
    )
    assert body.strip() in client.get(change).content.decode()


def test_the_queue_shows_only_approvals_on_runs_the_user_may_see(
    client: Client, make_user: MakeUser
) -> None:
    owner = make_user("ann", "deuz_django.view_approval", staff=True)
    mine = suspended_run(owner)
    suspended_run(make_user("bob"))
    client.force_login(owner)

    response = client.get(QUEUE)

    assert {a.run_id for a in response.context["cl"].result_list} == {mine.pk}


def test_the_queue_needs_the_view_approval_permission(
    client: Client, make_user: MakeUser
) -> None:
    client.force_login(make_user("runs-only", "deuz_django.view_run", staff=True))

    assert client.get(QUEUE).status_code == 403


def test_the_expiry_shows_only_when_approvals_expire(
    client: Client, make_user: MakeUser
) -> None:
    run = suspended_run(make_user("ann"))
    client.force_login(make_user("root", superuser=True))

    assert "expires in 23 hours" in text_of(client.get(QUEUE).content.decode())
    Approval.objects.filter(run=run, tool_name="refund").update(
        created_at=timezone.now() - timedelta(days=2)
    )
    expired = '<br><span class="deuz-badge deuz-badge--expired">expired</span>'
    assert expired in client.get(QUEUE).content.decode()
    with override_settings(DEUZ={**settings.DEUZ, "APPROVAL_MAX_AGE": None}):
        page = client.get(QUEUE).content.decode()
    assert "expires" not in page


def test_approve_and_deny_are_offered_only_to_those_who_may_decide(
    client: Client, make_user: MakeUser
) -> None:
    suspended_run(make_user("ann"))
    client.force_login(make_user("viewer", *VIEWER, staff=True))
    assert action_names(client.get(QUEUE)) == []

    client.force_login(make_user("clerk", *DECIDER, staff=True))
    assert action_names(client.get(QUEUE)) == ["", "approve_selected", "deny_selected"]


def test_an_action_first_confirms_exactly_what_will_be_decided(
    client: Client, make_user: MakeUser
) -> None:
    run = suspended_run(make_user("ann"))
    client.force_login(make_user("clerk", *DECIDER, staff=True))
    refund, email = approval(run, "refund"), approval(run, "send_email")

    response = act(client, "approve_selected", [refund, email])

    assert response.templates[0].name == (
        "admin/deuz_django/approval/decide_confirmation.html"
    )
    assert [a.pk for a, _ in response.context["decidable"]] == [email.pk]
    assert response.context["skipped"] == [
        (refund, f"Deciding refund calls needs the '{TOOL_PERMISSION}' permission.")
    ]
    page = response.content.decode()
    assert f'name="_selected_action" value="{email.pk}"' in page
    assert f'name="_selected_action" value="{refund.pk}"' not in page
    assert "Approve 1 call" in page
    assert {a.status for a in Approval.objects.filter(run=run)} == {"pending"}


@background_leg
def test_confirming_records_who_when_and_why_and_resumes_the_run(
    client: Client, make_user: MakeUser, effects: Callable[[], list[str]]
) -> None:
    run = suspended_run(make_user("ann"))
    fin = make_user("fin", *APPROVER, staff=True)
    client.force_login(fin)
    selected = [approval(run, "refund"), approval(run, "send_email")]

    response = act(
        client, "approve_selected", selected, post="yes", reason="Verified by phone."
    )

    assert messages_of(response) == [
        f"Approved 2 calls: refund (r1) on run {run.run_id}, "
        f"send_email (e1) on run {run.run_id}.",
        f"Run {run.run_id} resumed: it continues on this server.",
    ]
    for row in Approval.objects.filter(run=run):
        assert (row.status, row.decided_by, row.reason) == (
            ApprovalStatus.APPROVED,
            fin,
            "Verified by phone.",
        )
        assert row.decided_at is not None
    join_handed_off()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert sorted(effects()) == ["refund:A-1", "send_email:ann@example.com"]


@background_leg
def test_denying_records_the_reason_and_the_run_completes_without_the_calls(
    client: Client, make_user: MakeUser, effects: Callable[[], list[str]]
) -> None:
    run = suspended_run(make_user("ann"))
    client.force_login(make_user("root", superuser=True))

    response = act(
        client,
        "deny_selected",
        [approval(run, "refund"), approval(run, "send_email")],
        post="yes",
        reason="Duplicate request.",
    )

    assert (
        messages_of(response)[-1]
        == f"Run {run.run_id} resumed: it continues on this server."
    )
    assert set(Approval.objects.filter(run=run).values_list("status", "reason")) == {
        ("denied", "Duplicate request.")
    }
    join_handed_off()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert effects() == []


def test_a_crafted_action_post_without_the_decide_permission_records_nothing(
    client: Client, make_user: MakeUser
) -> None:
    run = suspended_run(make_user("ann"))
    client.force_login(make_user("viewer", *VIEWER, TOOL_PERMISSION, staff=True))

    response = act(
        client, "approve_selected", [approval(run, "send_email")], post="yes"
    )

    assert response.status_code == 200  # the queue, with no action to run
    assert messages_of(response) == []
    assert {a.status for a in Approval.objects.filter(run=run)} == {"pending"}


def test_a_crafted_confirmation_for_an_undecidable_call_records_nothing(
    client: Client, make_user: MakeUser
) -> None:
    run = suspended_run(make_user("ann"))
    client.force_login(make_user("clerk", *DECIDER, staff=True))

    response = act(client, "approve_selected", [approval(run, "refund")], post="yes")

    assert messages_of(response) == [
        f"refund (r1) on run {run.run_id}: Deciding refund calls needs the "
        f"'{TOOL_PERMISSION}' permission. Nothing was recorded."
    ]
    assert approval(run, "refund").is_pending


def test_a_crafted_action_post_for_an_invisible_run_records_nothing(
    client: Client, make_user: MakeUser
) -> None:
    run = suspended_run(make_user("ann"))
    mallory = make_user(
        "mallory",
        "deuz_django.view_approval",
        "deuz_django.decide_approval",
        staff=True,
    )
    client.force_login(mallory)

    act(client, "approve_selected", [approval(run, "send_email")], post="yes")

    assert {a.status for a in Approval.objects.filter(run=run)} == {"pending"}


def test_an_approval_page_is_read_only_and_never_shows_the_token(
    client: Client, make_user: MakeUser
) -> None:
    run = suspended_run(make_user("ann"))
    refund = approval(run, "refund")
    client.force_login(make_user("root", superuser=True))
    url = reverse("admin:deuz_django_approval_change", args=[refund.pk])

    page = client.get(url).content.decode()

    assert refund.token not in page
    assert 'name="_save"' not in page
    assert client.post(url, {"status": "approved"}).status_code == 403
    assert client.get(reverse("admin:deuz_django_approval_add")).status_code == 403
    delete = reverse("admin:deuz_django_approval_delete", args=[refund.pk])
    assert client.post(delete, {"post": "yes"}).status_code == 403
    assert approval(run, "refund").is_pending
