"""Deadlines in the admin: the queue, the run page and the approval's page show when a
call times out or escalates and the time left, whom it was escalated to, and a call
that timed out — recorded expired by the system, with the reason the model was told;
a verdict that comes too late records nothing."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils.html import strip_tags

from deuz_django.deadlines import sweep as deadline_sweep
from deuz_django.models import Approval
from tests.django.admin_support import (
    APPROVER,
    QUEUE,
    approval,
    decide_url,
    messages_of,
    run_url,
    suspended_run,
)
from tests.django.run_support import let_time_pass

pytestmark = pytest.mark.django_db
MakeUser = Callable[..., User]
HOUR = timedelta(hours=1)


def text_of(response: Any) -> str:
    return " ".join(strip_tags(response.content.decode()).split())


@pytest.fixture
def staff(client: Client, make_user: MakeUser) -> Client:
    client.force_login(make_user("fin", *APPROVER, staff=True))
    return client


def test_the_queue_shows_what_each_deadline_does_and_the_time_left(
    staff: Client, make_user: MakeUser
) -> None:
    suspended_run(make_user("ann"), agent="timed")
    page = text_of(staff.get(QUEUE))
    assert "escalates to Finance leads in 3 hours, 59 minutes" in page
    assert "times out in 59 minutes" in page


def test_the_run_page_shows_the_deadline_of_each_pending_call(
    staff: Client, make_user: MakeUser
) -> None:
    run = suspended_run(make_user("ann"), agent="timed")
    let_time_pass(run, 4 * HOUR - timedelta(seconds=30))
    page = text_of(staff.get(run_url(run)))
    assert re.search(r"escalates to Finance leads in \d\d seconds", page)  # refund
    assert "times out now" in page  # send_email: past its hour, the sweep is due


def test_the_approval_page_shows_the_deadline_and_the_reminder(
    staff: Client, make_user: MakeUser
) -> None:
    run = suspended_run(make_user("ann"), agent="timed")
    refund = approval(run, "refund")
    url = reverse("admin:deuz_django_approval_change", args=[refund.pk])
    page = text_of(staff.get(url))
    assert "Reminder: due in 29 minutes" in page
    assert "escalates to Finance leads in 3 hours, 59 minutes" in page
    let_time_pass(run, 31 * timedelta(minutes=1))
    deadline_sweep.sweep()
    assert "Reminder: sent just now" in text_of(staff.get(url))


def test_an_escalated_call_says_whom_it_went_to_and_when_it_times_out(
    staff: Client, make_user: MakeUser
) -> None:
    run = suspended_run(make_user("ann"), agent="timed")
    let_time_pass(run, 4 * HOUR + timedelta(seconds=1))
    deadline_sweep.sweep()
    queue = text_of(staff.get(QUEUE))
    assert "escalated to Finance leads times out in 3 hours, 59 minutes" in queue
    assert "escalated to Finance leads times out" in text_of(staff.get(run_url(run)))


def test_a_timed_out_call_is_in_the_history_as_expired_by_the_system(
    staff: Client, make_user: MakeUser
) -> None:
    run = suspended_run(make_user("ann"), agent="timed")
    let_time_pass(run, 4 * HOUR + timedelta(seconds=1))
    deadline_sweep.sweep()
    let_time_pass(run, 4 * HOUR + timedelta(seconds=1))
    deadline_sweep.sweep()
    page = text_of(staff.get(run_url(run)))
    history = page.split("Decision history")[1]
    assert "refund r1 — expired escalated to Finance leads the system" in history
    assert "Timed out: nobody decided within 8 hours." in history
    assert "send_email e1 — expired the system" in history
    assert "Timed out: nobody decided within 1 hour." in history
    decided = text_of(staff.get(f"{QUEUE}?status=expired"))
    assert "Timed out: nobody decided within 8 hours." in decided
    assert "escalated to Finance leads" in decided


def test_approving_a_call_after_it_timed_out_records_nothing(
    staff: Client, make_user: MakeUser
) -> None:
    run = suspended_run(make_user("ann"), agent="timed")
    email = approval(run, "send_email")
    let_time_pass(run, 2 * HOUR)
    deadline_sweep.act_on_due()  # timed out; its run still waits for the refund
    response = staff.post(
        decide_url(email), {"verdict": "approve", "post": "yes"}, follow=True
    )
    [message] = messages_of(response)
    assert f"send_email (e1) on run {run.run_id} was already expired by the system" in (
        message
    )
    email.refresh_from_db()
    assert (email.status, email.decided_by) == ("expired", None)
    assert Approval.objects.filter(run=run, status="approved").count() == 0
