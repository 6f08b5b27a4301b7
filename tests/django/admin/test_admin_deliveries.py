"""The delivery log in the admin: every mail and webhook request with how it went, scoped
to the runs the staff member may see, read-only, with "Retry now" for those with the
permission."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from deuz_django.models import Delivery
from deuz_django.notifications.notifiers import Event
from deuz_django.notifications.webhooks import WebhookNotifier
from tests.django.admin_support import messages_of, suspended_run
from tests.django.notify_support import SECRET, Receiver, notifying, webhook
from tests.live_site import free_port

pytestmark = pytest.mark.django_db

LOG = reverse("admin:deuz_django_delivery_changelist")
VIEW = ("deuz_django.view_run", "deuz_django.view_delivery")
RETRY = (*VIEW, "deuz_django.retry_delivery")


def logged(url: str, *runs: Any, status: str = "failed") -> list[Delivery]:
    """A delivery per run to ``url``, written as the notifier writes them."""
    notifier = WebhookNotifier(url=url, secret=SECRET, max_attempts=2)
    rows = [d for run in runs for d in notifier.deliveries(Event("run.failed", run))]
    for row in rows:
        row.status, row.attempts, row.last_error = status, 2, "HTTP 500: no"
    return Delivery.objects.bulk_create(rows)


def admin(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_log_lists_the_deliveries_of_visible_runs_only(
    make_user: Callable[..., User],
) -> None:
    ann = make_user("ann")
    mine, theirs = suspended_run(owner=ann), suspended_run()
    logged("https://hooks.example.com/a", mine, theirs)
    owner_only = make_user("owner", "deuz_django.view_delivery", staff=True)
    page = admin(owner_only).get(LOG)
    assert page.status_code == 200
    assert list(page.context["cl"].queryset) == []  # sees no run of anyone's
    viewer = make_user("viewer", *VIEW, staff=True)
    page = admin(viewer).get(LOG)
    assert len(page.context["cl"].queryset) == 2
    assert b"HTTP 500: no" in page.content
    assert b"2 / 2" in page.content


def test_the_log_filters_by_status_channel_and_event(
    make_user: Callable[..., User],
) -> None:
    run = suspended_run()
    logged("https://hooks.example.com/a", run)
    logged("https://hooks.example.com/b", run, status="delivered")
    viewer = admin(make_user("viewer", *VIEW, staff=True))
    failed = viewer.get(LOG, {"status__exact": "failed", "channel__exact": "webhook"})
    assert [d.target for d in failed.context["cl"].queryset] == [
        "https://hooks.example.com/a"
    ]
    assert (
        len(viewer.get(LOG, {"event__exact": "run.failed"}).context["cl"].queryset) == 2
    )


def test_a_deliverys_page_shows_what_was_sent_and_changes_nothing(
    make_user: Callable[..., User],
) -> None:
    [delivery] = logged("https://hooks.example.com/a", suspended_run())
    viewer = admin(make_user("viewer", *VIEW, staff=True))
    url = reverse("admin:deuz_django_delivery_change", args=[delivery.pk])
    page = viewer.get(url)
    assert page.status_code == 200
    text = page.content.decode()
    assert "run.failed" in text
    assert str(delivery.delivery_id) in text
    viewer.post(url, {"status": "delivered"})
    delivery.refresh_from_db()
    assert delivery.status == "failed"
    assert viewer.get(reverse("admin:deuz_django_delivery_add")).status_code == 403


def test_retry_now_sends_a_failed_delivery_once_more(
    make_user: Callable[..., User], receiver: Receiver
) -> None:
    [failed] = logged(receiver.url, suspended_run())
    retrier = admin(make_user("retrier", *RETRY, staff=True))
    with notifying(webhook(receiver.url)):
        page = retrier.post(
            LOG,
            {"action": "retry_selected", "_selected_action": [failed.pk]},
            follow=True,
        )
    assert messages_of(page) == ["Retrying 1 delivery."]
    failed.refresh_from_db()
    assert (failed.status, failed.attempts, failed.max_attempts) == ("delivered", 3, 3)
    assert receiver.events() == ["run.failed"]


def test_retry_now_of_an_endpoint_still_down_leaves_it_failed(
    make_user: Callable[..., User],
) -> None:
    url = f"http://127.0.0.1:{free_port()}/down"
    [failed] = logged(url, suspended_run())
    retrier = admin(make_user("retrier", *RETRY, staff=True))
    with notifying(webhook(url)):
        retrier.post(LOG, {"action": "retry_selected", "_selected_action": [failed.pk]})
    failed.refresh_from_db()
    assert (failed.status, failed.attempts) == ("failed", 3)
    assert "Connection refused" in failed.last_error or "ConnectionError" in (
        failed.last_error
    )


def test_retry_now_needs_its_permission_and_skips_delivered_ones(
    make_user: Callable[..., User], receiver: Receiver
) -> None:
    run = suspended_run()
    [failed] = logged(receiver.url, run)
    [done] = logged(receiver.url, run, status="delivered")
    viewer = admin(make_user("viewer", *VIEW, staff=True))
    page = viewer.get(LOG)
    assert "retry_selected" not in page.context["cl"].model_admin.get_actions(
        page.wsgi_request
    )
    retrier = admin(make_user("retrier", *RETRY, staff=True))
    with notifying(webhook(receiver.url)):
        page = retrier.post(
            LOG,
            {"action": "retry_selected", "_selected_action": [failed.pk, done.pk]},
            follow=True,
        )
    assert messages_of(page) == [
        "Retrying 1 delivery.",
        "1 delivery was delivered already; it is not sent again.",
    ]
    assert len(receiver.requests) == 1
