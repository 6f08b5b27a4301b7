"""The run page's per-row Approve/Deny buttons: who may decide, what is recorded, and how
the background resume is reported."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.utils import timezone

from deuz_django.admin.display import exact_time
from deuz_django.models import Approval, ApprovalStatus, Run, RunStatus
from deuz_django.runs.continuing import join_handed_off
from deuz_django.storage import leases
from tests.django.admin_support import (
    APPROVER,
    DECIDER,
    VIEWER,
    approval,
    decide_url,
    messages_of,
    run_url,
    suspended_run,
)
from tests.django.agents import TOOL_PERMISSION
from tests.django.run_support import background_leg

pytestmark = pytest.mark.django_db
MakeUser = Callable[..., User]


def post(client: Client, target: Approval, verdict: str, reason: str = "") -> Any:
    """Press a per-row button, confirm, and follow the redirect back to the run page."""
    return client.post(
        decide_url(target),
        {"verdict": verdict, "reason": reason, "post": "yes"},
        follow=True,
    )


@pytest.mark.parametrize("verdict", ["approve", "deny"])
def test_a_button_on_the_run_page_first_asks_for_confirmation_and_a_reason(
    client: Client, make_user: MakeUser, verdict: str
) -> None:
    run = suspended_run(make_user("ann"))
    client.force_login(make_user("root", superuser=True))
    email = approval(run, "send_email")

    page = client.post(decide_url(email), {"verdict": verdict})

    assert page.templates[0].name == (
        "admin/deuz_django/approval/decide_confirmation.html"
    )
    assert [a.pk for a, _ in page.context["decidable"]] == [email.pk]
    html = page.content.decode()
    assert f'<input type="hidden" name="verdict" value="{verdict}">' in html
    assert 'name="reason"' in html
    assert f"{verdict.capitalize()} 1 call" in html
    assert 'name="action"' not in html  # posts back here, not to the queue
    assert approval(run, "send_email").is_pending  # nothing recorded yet

    done = client.post(
        decide_url(email),
        {"verdict": verdict, "post": "yes", "reason": "Checked."},
        follow=True,
    )
    assert done.redirect_chain[0] == (f"{run_url(run)}#approvals", 302)
    decided = approval(run, "send_email")
    assert (decided.status, decided.reason) == (
        "approved" if verdict == "approve" else "denied",
        "Checked.",
    )


def statuses(run: Run) -> dict[str, str]:
    return dict(run.approvals.values_list("tool_name", "status"))


@background_leg
def test_superuser_approves_both_calls_and_the_run_completes(
    client: Client, make_user: MakeUser, effects: Callable[[], list[str]]
) -> None:
    admin = make_user("root", superuser=True)
    run = suspended_run(make_user("ann"))
    client.force_login(admin)

    first = post(client, approval(run, "refund"), "approve", "Order checked.")
    assert first.redirect_chain == [(f"{run_url(run)}#approvals", 302)]
    assert messages_of(first) == [f"Approved refund (r1) on run {run.run_id}."]
    run.refresh_from_db()
    assert run.status == RunStatus.SUSPENDED  # still waits for the email

    second = post(client, approval(run, "send_email"), "approve")
    assert messages_of(second) == [
        f"Approved send_email (e1) on run {run.run_id}.",
        f"Run {run.run_id} resumed: it continues on this server.",
    ]
    join_handed_off()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert sorted(effects()) == ["refund:A-1", "send_email:ann@example.com"]
    refund = approval(run, "refund")
    assert (refund.status, refund.decided_by, refund.reason) == (
        ApprovalStatus.APPROVED,
        admin,
        "Order checked.",
    )
    assert refund.decided_at is not None


def test_staff_with_the_decide_and_tool_permissions_approves(
    client: Client, make_user: MakeUser
) -> None:
    run = suspended_run(make_user("ann"))
    client.force_login(make_user("fin", *APPROVER, staff=True))

    response = post(client, approval(run, "refund"), "approve")

    assert messages_of(response) == [f"Approved refund (r1) on run {run.run_id}."]
    assert approval(run, "refund").decided_by.username == "fin"


def test_staff_without_the_decide_permission_is_refused_and_nothing_is_recorded(
    client: Client, make_user: MakeUser
) -> None:
    run = suspended_run(make_user("ann"))
    client.force_login(make_user("viewer", *VIEWER, TOOL_PERMISSION, staff=True))

    response = post(client, approval(run, "send_email"), "approve")

    assert response.status_code == 403
    assert statuses(run) == {"refund": "pending", "send_email": "pending"}


def test_staff_lacking_the_tools_permission_may_decide_only_the_other_calls(
    client: Client, make_user: MakeUser
) -> None:
    run = suspended_run(make_user("ann"))
    client.force_login(make_user("clerk", *DECIDER, staff=True))

    refused = post(client, approval(run, "refund"), "approve")
    allowed = post(client, approval(run, "send_email"), "approve")

    assert messages_of(refused) == [
        f"refund (r1) on run {run.run_id}: Deciding refund calls needs the "
        f"'{TOOL_PERMISSION}' permission. Nothing was recorded."
    ]
    assert messages_of(allowed) == [f"Approved send_email (e1) on run {run.run_id}."]
    assert statuses(run) == {"refund": "pending", "send_email": "approved"}


@background_leg
def test_the_owner_may_not_approve_their_own_refund_but_may_deny_it(
    client: Client, make_user: MakeUser, effects: Callable[[], list[str]]
) -> None:
    owner = make_user("ann", *VIEWER, TOOL_PERMISSION, staff=True)
    run = suspended_run(owner)
    client.force_login(owner)

    refused = post(client, approval(run, "refund"), "approve")
    assert messages_of(refused) == [
        f"refund (r1) on run {run.run_id}: The run's owner may not approve their own "
        "refund call. Nothing was recorded."
    ]
    assert statuses(run) == {"refund": "pending", "send_email": "pending"}

    post(client, approval(run, "send_email"), "approve")  # owners approve their email
    denied = post(client, approval(run, "refund"), "deny", "Not without finance.")

    assert (
        messages_of(denied)[-1]
        == f"Run {run.run_id} resumed: it continues on this server."
    )
    join_handed_off()
    assert Run.objects.get(pk=run.pk).status == RunStatus.COMPLETED
    assert statuses(run) == {"refund": "denied", "send_email": "approved"}
    assert effects() == ["send_email:ann@example.com"]


def test_a_crafted_post_for_a_run_the_user_may_not_see_is_not_found(
    client: Client, make_user: MakeUser
) -> None:
    run = suspended_run(make_user("ann"))
    # may decide, but sees only their own runs
    bob = make_user("bob", "deuz_django.view_approval", "deuz_django.decide_approval")
    bob.is_staff = True
    bob.save()
    client.force_login(bob)

    response = post(client, approval(run, "send_email"), "approve")

    assert response.status_code == 404
    assert statuses(run) == {"refund": "pending", "send_email": "pending"}


@background_leg
def test_a_double_submission_is_reported_as_already_decided_and_runs_once(
    client: Client, make_user: MakeUser, effects: Callable[[], list[str]]
) -> None:
    run = suspended_run(make_user("ann"))
    client.force_login(make_user("fin", *APPROVER, staff=True))
    post(client, approval(run, "refund"), "approve")
    email = approval(run, "send_email")
    post(client, email, "approve")

    again = post(client, email, "approve")
    join_handed_off()

    decided_at = approval(run, "send_email").decided_at
    assert decided_at is not None
    assert messages_of(again) == [
        f"send_email (e1) on run {run.run_id} was already approved by fin at "
        f"{exact_time(decided_at)}."
    ]
    assert sorted(effects()) == ["refund:A-1", "send_email:ann@example.com"]


@background_leg
@override_settings(DEUZ={**settings.DEUZ, "APPROVAL_MAX_AGE": 60})
def test_approving_an_expired_approval_records_it_as_expired(
    client: Client, make_user: MakeUser, effects: Callable[[], list[str]]
) -> None:
    run = suspended_run(make_user("ann"))
    Approval.objects.filter(run=run).update(
        created_at=timezone.now() - timedelta(minutes=2)
    )
    client.force_login(make_user("fin", *APPROVER, staff=True))

    response = post(client, approval(run, "refund"), "approve")

    assert messages_of(response)[0] == (
        f"refund (r1) on run {run.run_id} had expired; it was recorded as expired "
        "and will not run."
    )
    refund = approval(run, "refund")
    assert (refund.status, refund.reason) == (
        ApprovalStatus.EXPIRED,
        "Approval expired.",
    )
    join_handed_off()  # the run went on without the call
    assert Run.objects.get(pk=run.pk).status == RunStatus.COMPLETED
    assert effects() == []


def test_a_busy_run_is_reported_busy_and_not_resumed(
    client: Client, make_user: MakeUser, effects: Callable[[], list[str]]
) -> None:
    run = suspended_run(make_user("ann"))
    client.force_login(make_user("fin", *APPROVER, staff=True))
    post(client, approval(run, "refund"), "approve")
    leases.acquire(run.run_id)  # another leg holds the run

    response = post(client, approval(run, "send_email"), "approve")

    assert messages_of(response)[-1] == (
        f"Run {run.run_id} is busy; it will continue when the current leg ends."
    )
    run.refresh_from_db()
    assert run.status == RunStatus.SUSPENDED
    assert effects() == []


@background_leg
def test_deciding_a_stale_row_of_a_completed_run_reports_it_completed(
    client: Client, make_user: MakeUser, effects: Callable[[], list[str]]
) -> None:
    run = suspended_run(make_user("ann"))
    client.force_login(make_user("fin", *APPROVER, staff=True))
    post(client, approval(run, "refund"), "deny")
    post(client, approval(run, "send_email"), "deny")
    join_handed_off()  # the run completed
    stale = Approval.objects.create(
        run=run,
        approval_id="old",
        tool_call_id="old",
        tool_name="send_email",
        input={"to": "x@example.com"},
    )

    response = post(client, stale, "deny")

    assert messages_of(response)[-1] == f"Run {run.run_id} is already completed."
    assert effects() == []


def test_an_approval_whose_token_does_not_verify_is_not_recorded(
    client: Client, make_user: MakeUser
) -> None:
    run = suspended_run(make_user("ann"))
    Approval.objects.filter(run=run).update(token="v1.forged.token")
    client.force_login(make_user("fin", *APPROVER, staff=True))

    response = post(client, approval(run, "refund"), "approve")

    assert messages_of(response) == [
        f"refund (r1) on run {run.run_id} was not approved: Approval r1: the token is "
        "forged, tampered with or garbled."
    ]
    assert approval(run, "refund").is_pending


def test_the_decide_url_takes_only_a_post_with_a_known_verdict(
    client: Client, make_user: MakeUser
) -> None:
    run = suspended_run(make_user("ann"))
    client.force_login(make_user("fin", *APPROVER, staff=True))
    target = approval(run, "refund")

    assert client.get(decide_url(target)).status_code == 405
    response = post(client, target, "maybe")
    assert messages_of(response)[0].startswith("Nothing was recorded:")
    assert approval(run, "refund").is_pending
