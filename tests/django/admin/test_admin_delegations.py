"""Delegations in the admin: a delegate decides from the run page on their delegator's
behalf, and the queue says so; staff make delegations and revoke them ("Revoke now"),
never rewrite or delete one."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from deuz_django.approvals.delegated import delegate
from deuz_django.models import Delegation
from tests.django.admin_support import (
    APPROVER,
    QUEUE,
    VIEWER,
    approval,
    decide_url,
    suspended_run,
)

pytestmark = pytest.mark.django_db
MakeUser = Callable[..., User]
DELEGATIONS = reverse("admin:deuz_django_delegation_changelist")


def test_a_delegate_approves_on_the_run_page_and_the_queue_names_both(
    client: Client, make_user: MakeUser
) -> None:
    fin = make_user("fin", *APPROVER, staff=True)
    bob = make_user("bob", *VIEWER, staff=True)
    delegate(fin, bob, ends_at=timezone.now() + timedelta(days=3))
    run = suspended_run(make_user("ann"))
    refund = approval(run, "refund")
    client.force_login(bob)
    client.post(decide_url(refund), {"verdict": "approve", "post": "yes"})
    refund.refresh_from_db()
    assert (refund.status, refund.decided_on_behalf_of) == ("approved", fin)
    queue = client.get(f"{QUEUE}?status=approved").content.decode()
    assert "bob on behalf of fin" in queue


def test_staff_make_a_delegation_and_revoke_it_now(
    client: Client, make_user: MakeUser
) -> None:
    fin = make_user("fin", *APPROVER, staff=True)
    bob = make_user("bob", *VIEWER, staff=True)
    client.force_login(make_user("root", superuser=True))
    ends = timezone.now() + timedelta(days=2)
    added = client.post(
        reverse("admin:deuz_django_delegation_add"),
        {
            "delegator": fin.pk,
            "delegate": bob.pk,
            "starts_at_0": timezone.now().strftime("%Y-%m-%d"),
            "starts_at_1": "00:00:00",
            "ends_at_0": ends.strftime("%Y-%m-%d"),
            "ends_at_1": ends.strftime("%H:%M:%S"),
            "note": "Holidays",
        },
    )
    assert added.status_code == 302, added.content.decode()[:2000]
    made = Delegation.objects.get()
    listing = client.get(DELEGATIONS).content.decode()
    assert "fin → bob" in listing
    assert "in force" in listing

    page = client.get(reverse("admin:deuz_django_delegation_change", args=[made.pk]))
    assert 'name="ends_at_0"' not in page.content.decode()  # made, then only revoked
    client.post(DELEGATIONS, {"action": "revoke_now", "_selected_action": [made.pk]})
    made.refresh_from_db()
    assert made.revoked_at is not None
    assert "revoked" in client.get(DELEGATIONS).content.decode()
    deleted = client.post(
        reverse("admin:deuz_django_delegation_delete", args=[made.pk]), {"post": "yes"}
    )
    assert deleted.status_code == 403
    assert Delegation.objects.filter(pk=made.pk).exists()


def test_a_delegation_to_oneself_is_refused_by_the_form(
    client: Client, make_user: MakeUser
) -> None:
    fin = make_user("fin", *APPROVER, staff=True)
    client.force_login(make_user("root", superuser=True))
    ends = timezone.now() + timedelta(days=2)
    page = client.post(
        reverse("admin:deuz_django_delegation_add"),
        {
            "delegator": fin.pk,
            "delegate": fin.pk,
            "starts_at_0": timezone.now().strftime("%Y-%m-%d"),
            "starts_at_1": "00:00:00",
            "ends_at_0": ends.strftime("%Y-%m-%d"),
            "ends_at_1": ends.strftime("%H:%M:%S"),
        },
    )
    assert page.status_code == 200  # the form again, with the error
    assert "errornote" in page.content.decode()
    assert not Delegation.objects.exists()
