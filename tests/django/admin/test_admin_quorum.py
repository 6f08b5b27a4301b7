"""The approval queue on a call that needs two approvals: "1 of 2 approvals", who
approved and who may still, after the first approver's Approve on the run page."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from tests.django.admin_support import (
    QUEUE,
    VIEWER,
    approval,
    decide_url,
    messages_of,
)
from tests.django.quorum_agents import FINANCE
from tests.django.run_support import suspended

pytestmark = pytest.mark.django_db
MakeUser = Callable[..., User]


def test_the_queue_shows_the_votes_of_a_call_that_needs_two(
    client: Client, make_user: MakeUser
) -> None:
    finance = Group.objects.create(name=FINANCE)
    fin, fay = (
        make_user(name, *VIEWER, "deuz_django.decide_approval", staff=True)
        for name in ("fin", "fay")
    )
    fin.groups.add(finance)
    fay.groups.add(finance)
    run = suspended("pair", owner=make_user("ann"))
    email = approval(run, "send_email")
    client.force_login(fin)
    page = client.post(
        decide_url(email), {"verdict": "approve", "post": "yes"}, follow=True
    )
    assert messages_of(page) == [
        f"Your verdict on send_email (e1) on run {run.run_id} is recorded: "
        "1 of 2 approvals."
    ]
    email.refresh_from_db()
    assert email.is_pending
    row = client.get(QUEUE).content.decode()
    assert "1 of 2 approvals" in row
    assert "approved by fin" in row
    assert "may still: fay" in row
