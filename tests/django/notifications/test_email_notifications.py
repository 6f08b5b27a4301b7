"""Mail to the people who may decide a waiting call: one mail each, text and HTML, with
links to Approve, Deny and Open it; retried while the mail server is away."""

from __future__ import annotations

import re
import smtplib
from collections.abc import Callable
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.mail import EmailMultiAlternatives
from django.test import Client

from deuz_django import notifications, services, signals
from deuz_django.deadlines import sweep as deadline_sweep
from deuz_django.models import Approval
from deuz_django.runs.continuing import join_handed_off
from tests.django.agents import TOOL_PERMISSION
from tests.django.notify_support import (
    EMAIL,
    MAIL_SERVER_DOWN,
    SITE,
    deliveries,
    later,
    notifying,
)
from tests.django.run_support import (
    approval,
    background_leg,
    in_doubt,
    let_time_pass,
    suspended,
)

pytestmark = pytest.mark.django_db

DECIDER = ("deuz_django.view_run", "deuz_django.decide_approval")


@pytest.fixture
def staff(make_user: Callable[..., User]) -> dict[str, User]:
    def with_email(user: User) -> User:
        user.email = f"{user.username}@example.com"
        user.save()
        return user

    return {
        "ann": with_email(make_user("ann")),
        "boss": with_email(make_user("boss", *DECIDER, TOOL_PERMISSION)),
        "clerk": with_email(make_user("clerk", *DECIDER)),
    }


def mails_to(outbox: list[Any], address: str) -> list[Any]:
    return [m for m in outbox if m.to == [address]]


def links(text: str) -> dict[str, str]:
    return dict(
        re.findall(
            r"^(Approve|Deny|Open|Run it again|Mark it failed): (\S+)$", text, re.M
        )
    )


def test_a_suspension_mails_each_person_who_may_decide_each_call(
    staff: dict[str, User],
    mailoutbox: list[Any],
    django_capture_on_commit_callbacks: Any,
) -> None:
    entry = {**EMAIL, "FROM_EMAIL": "approvals@example.com"}
    with notifying(entry), django_capture_on_commit_callbacks(execute=True):
        run = suspended(owner=staff["ann"])
    assert {m.from_email for m in mailoutbox} == {"approvals@example.com"}
    subjects = sorted((m.to[0], m.subject) for m in mailoutbox)
    title = run.title
    assert subjects == [
        ("ann@example.com", f"Approval needed: send_email in “{title}”"),
        ("boss@example.com", f"Approval needed: refund in “{title}”"),
        ("boss@example.com", f"Approval needed: send_email in “{title}”"),
        ("clerk@example.com", f"Approval needed: send_email in “{title}”"),
    ]
    # One row per event: its recipients, settled when it was sent.
    assert sorted((d.target, d.status) for d in deliveries(channel="email")) == [
        ("ann@example.com, boss@example.com, clerk@example.com", "delivered"),
        ("boss@example.com", "delivered"),
    ]


def test_a_mail_shows_the_call_and_links_to_approve_deny_and_open_it(
    staff: dict[str, User],
    mailoutbox: list[Any],
    django_capture_on_commit_callbacks: Any,
) -> None:
    with notifying(EMAIL), django_capture_on_commit_callbacks(execute=True):
        run = suspended(owner=staff["ann"])
    [mail] = [
        m for m in mails_to(mailoutbox, "boss@example.com") if "refund" in m.subject
    ]
    assert mail.from_email == settings.DEFAULT_FROM_EMAIL  # unless FROM_EMAIL says
    for text in ("refund (r1)", run.run_id, "Owner: ann", '"order_id": "A-1"'):
        assert text in mail.body
    found = links(mail.body)
    assert set(found) == {"Approve", "Deny", "Open"}
    for url in found.values():
        assert url.startswith(f"{SITE}/deuz/approvals/act/")
    [(html, kind)] = mail.alternatives
    assert kind == "text/html"
    for url in found.values():
        assert f'href="{url}"' in html
    [delivery] = [
        d for d in deliveries() if d.target == "boss@example.com" and "refund" in d.body
    ]
    assert mail.extra_headers["X-Deuz-Delivery"] == str(delivery.delivery_id)
    # The link opens the call's page for the person it was sent to; nothing is decided.
    browser = Client()
    browser.force_login(staff["boss"])
    with notifying(EMAIL):
        page = browser.get(urlsplit(found["Approve"]).path)
    assert page.status_code == 200
    assert b"refund" in page.content
    assert approval(run, "refund").status == "pending"


def test_a_call_in_doubt_is_mailed_in_the_words_of_its_answers(
    staff: dict[str, User],
    mailoutbox: list[Any],
    django_capture_on_commit_callbacks: Any,
) -> None:
    with notifying(EMAIL), django_capture_on_commit_callbacks(execute=True):
        run = in_doubt(staff["ann"])
    [mail] = mails_to(mailoutbox, "ann@example.com")
    assert mail.subject == f"Did slow happen? A crash cut it off in “{run.title}”"
    assert "started before a crash and left no outcome" in mail.body
    assert set(links(mail.body)) == {"Run it again", "Mark it failed", "Open"}


@pytest.mark.parametrize(
    ("signal", "extra", "prefix", "recipients"),
    [
        ("approval_reminder", {}, "Reminder: Approval needed", ["boss@example.com"]),
        (
            "approval_escalated",
            {"to": "perm:deuz_django.decide_approval"},
            "Escalated: Approval needed",
            ["boss@example.com"],
        ),
        (
            "question_asked",
            {},
            "A question waits for your answer",
            ["boss@example.com"],
        ),
    ],
)
def test_reminders_escalations_and_questions_are_mailed_to_who_may_decide(
    staff: dict[str, User],
    mailoutbox: list[Any],
    signal: str,
    extra: dict[str, str],
    prefix: str,
    recipients: list[str],
) -> None:
    run = suspended(owner=staff["ann"])
    refund = approval(run, "refund")
    with notifying(EMAIL):
        getattr(signals, signal).send_robust(Approval, approval=refund, **extra)
    assert sorted(m.to[0] for m in mailoutbox) == recipients
    assert all(m.subject.startswith(prefix) for m in mailoutbox)
    if "to" in extra:
        assert "Escalated to: perm:deuz_django.decide_approval" in mailoutbox[0].body


@background_leg
def test_the_deadline_sweep_mails_its_escalation_to_the_leads_who_may_decide(
    staff: dict[str, User],
    make_user: Callable[..., User],
    mailoutbox: list[Any],
    django_capture_on_commit_callbacks: Any,
) -> None:
    """End to end: the ``timed`` agent's refund escalates to "Finance leads" at 4 hours;
    the sweep's escalation becomes one mail, to the leads who may approve a refund."""
    leads = Group.objects.create(name="Finance leads")
    lead = make_user("lead", *DECIDER, TOOL_PERMISSION)
    trainee = make_user("trainee", *DECIDER)  # a lead who may not approve refunds
    for user in (lead, trainee):
        user.email = f"{user.username}@example.com"
        user.save()
        user.groups.add(leads)
    run = suspended("timed", owner=staff["ann"])
    let_time_pass(run, timedelta(minutes=31))
    with notifying(EMAIL), django_capture_on_commit_callbacks(execute=True):
        assert deadline_sweep.sweep().reminded == [f"{run.run_id}:r1"]
    # The reminder goes to whoever may decide a refund: the usual people.
    assert sorted(m.to[0] for m in mailoutbox) == [
        "boss@example.com",
        "lead@example.com",
    ]
    mailoutbox.clear()
    let_time_pass(run, timedelta(hours=3, minutes=30))
    with notifying(EMAIL), django_capture_on_commit_callbacks(execute=True):
        assert deadline_sweep.sweep().escalated == [f"{run.run_id}:r1"]
    [mail] = mailoutbox  # boss may decide too, but the escalation names the leads
    assert mail.to == ["lead@example.com"]
    assert mail.subject == f"Escalated: Approval needed: refund in “{run.title}”"
    assert "Escalated to: group:Finance leads" in mail.body
    [delivery] = deliveries(event="approval.escalated")
    assert (delivery.target, delivery.status) == ("lead@example.com", "delivered")
    # The lead approves from the mail; the run then waits for nothing (its email timed
    # out in the same sweep) and goes on.
    browser = Client()
    browser.force_login(lead)
    with notifying(EMAIL), django_capture_on_commit_callbacks(execute=True):
        page = browser.post(
            urlsplit(links(mail.body)["Approve"]).path, {"verdict": "approve"}
        )
    assert page.status_code == 302
    refund = approval(run, "refund")
    assert (refund.status, refund.decided_by) == ("approved", lead)
    assert approval(run, "send_email").status == "expired"
    join_handed_off()
    run.refresh_from_db()
    assert run.status == "completed"


def test_a_verdict_or_a_run_event_mails_nobody(
    staff: dict[str, User],
    mailoutbox: list[Any],
    django_capture_on_commit_callbacks: Any,
) -> None:
    run = suspended(owner=staff["ann"])
    with notifying(EMAIL), django_capture_on_commit_callbacks(execute=True):
        services.decide_approval(
            approval(run, "send_email"), user=staff["ann"], approved=True
        )
        services.resume_run(run.run_id, user=staff["ann"], deny_remaining=True)
    assert mailoutbox == []


def test_a_mail_server_that_is_away_is_retried_and_the_run_goes_on(
    staff: dict[str, User],
    mailoutbox: list[Any],
    django_capture_on_commit_callbacks: Any,
) -> None:
    with (
        notifying(EMAIL),
        MAIL_SERVER_DOWN,
        django_capture_on_commit_callbacks(execute=True),
    ):
        run = suspended(owner=staff["ann"])
    run.refresh_from_db()
    assert run.status == "suspended"  # the leg ended as it would have
    assert {(d.status, d.attempts) for d in deliveries()} == {("pending", 1)}
    assert {d.last_error.split(": ", 1)[1] for d in deliveries()} == {
        "SMTPServerDisconnected: Connection unexpectedly closed"
    }
    assert mailoutbox == []
    with notifying(EMAIL):  # the mail server is back
        assert len(notifications.sweep(later()).queued) == 2
    assert {(d.status, d.attempts) for d in deliveries()} == {("delivered", 2)}
    assert len(mailoutbox) == 4


def test_a_mail_server_away_for_every_attempt_leaves_the_delivery_failed(
    staff: dict[str, User],
    mailoutbox: list[Any],
    django_capture_on_commit_callbacks: Any,
) -> None:
    entry = {**EMAIL, "MAX_ATTEMPTS": 2}
    with notifying(entry), MAIL_SERVER_DOWN:
        with django_capture_on_commit_callbacks(execute=True):
            suspended(owner=staff["ann"])
        notifications.sweep(later())
    assert {(d.status, d.attempts) for d in deliveries()} == {("failed", 2)}


def test_a_retry_mails_only_the_people_the_last_attempt_did_not_reach(
    staff: dict[str, User],
    mailoutbox: list[Any],
    django_capture_on_commit_callbacks: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    refused = {"boss@example.com"}
    send = EmailMultiAlternatives.send

    def refusing(message: EmailMultiAlternatives, *args: Any, **kwargs: Any) -> int:
        if set(message.to) & refused:
            raise smtplib.SMTPRecipientsRefused({message.to[0]: (450, b"Try later")})
        return send(message, *args, **kwargs)

    monkeypatch.setattr(EmailMultiAlternatives, "send", refusing)
    entry = {**EMAIL, "EVENTS": ["approval.requested"]}
    with notifying(entry), django_capture_on_commit_callbacks(execute=True):
        run = suspended(owner=staff["ann"])
    email_row = next(d for d in deliveries() if "send_email" in d.body)
    assert email_row.status == "pending"
    assert email_row.last_error.startswith("boss@example.com: SMTPRecipientsRefused")
    assert [m.to for m in mailoutbox] == [["ann@example.com"]]  # then boss refused
    refused.clear()
    with notifying(entry):
        notifications.sweep(later())
    reached = sorted(m.to[0] for m in mailoutbox if "send_email" in m.subject)
    assert reached == ["ann@example.com", "boss@example.com", "clerk@example.com"]
    assert approval(run, "send_email").status == "pending"


def test_nobody_is_mailed_about_a_call_decided_before_the_mail_went_out(
    staff: dict[str, User],
    mailoutbox: list[Any],
    django_capture_on_commit_callbacks: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Busy:  # a queue whose workers have not got to it yet
        def enqueue(self, *args: Any) -> None:
            pass

    monkeypatch.setattr(notifications, "deliver_task", Busy())
    with notifying(EMAIL), django_capture_on_commit_callbacks(execute=True):
        run = suspended(owner=staff["ann"])
    services.decide_approval(
        approval(run, "send_email"), user=staff["ann"], approved=True
    )
    monkeypatch.undo()
    with notifying(EMAIL):
        notifications.sweep(later())
    assert [m.subject for m in mailoutbox] == [
        f"Approval needed: refund in “{run.title}”"
    ]
    decided = next(
        d for d in deliveries() if d.target.startswith("who may decide send")
    )
    assert decided.status == "delivered"
    assert "decided before everyone was mailed" in decided.body
