"""Webhooks: every event as a signed JSON POST to a real local server, retried with backoff
while it fails, marked failed after the last attempt, never in the way of a run. The
requests as sent verify with the Standard Webhooks reference library."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import standardwebhooks

from deuz_django import notifications, services
from deuz_django.core.webhooks import (
    WebhookSignatureError,
    WebhookSignatureExpired,
    verify_signature,
)
from deuz_django.models import Delivery, Run
from deuz_django.models.deliveries import retry_delay
from tests.django.notify_support import (
    SECRET,
    SITE,
    Receiver,
    deliveries,
    later,
    notifying,
    webhook,
)
from tests.django.run_support import approval, suspended
from tests.live_site import free_port

pytestmark = pytest.mark.django_db
ONLY_SUSPENSIONS = ["run.suspended"]
ANOTHER_SECRET = "whsec_YW5vdGhlci1zZWNyZXQtb2YtMzItYnl0ZXMtbG9uZyE="


@pytest.fixture
def suspend(django_capture_on_commit_callbacks: Any, ann: Any) -> Callable[..., Run]:
    """Suspend a gated run of ann's with a webhook to ``url`` configured; the leg's
    commits notify at once."""

    def run_with(url: str, **options: Any) -> Run:
        with (
            notifying(webhook(url, **options)),
            django_capture_on_commit_callbacks(execute=True),
        ):
            return suspended(owner=ann)

    return run_with


def test_a_suspension_posts_each_request_then_the_suspension_signed_and_in_order(
    receiver: Receiver, suspend: Callable[..., Run]
) -> None:
    run = suspend(receiver.url)
    assert receiver.events() == [
        "approval.requested",
        "approval.requested",
        "run.suspended",
    ]
    for request in receiver.requests:
        verify_signature(request.body, request.headers, SECRET)  # raises if forged
        assert request.path == "/hooks/deuz"
        assert request.headers["Content-Type"] == "application/json"
        assert request.headers["webhook-id"] == request.json()["id"]
    body = receiver.requests[0].json()
    assert set(body) == {"id", "event", "createdAt", "data"}
    assert body["createdAt"].endswith("Z")
    assert body["data"]["run"]["runId"] == run.run_id
    assert body["data"]["run"]["owner"] == "ann"
    requested = {
        r.json()["data"]["approval"]["toolName"] for r in receiver.requests[:2]
    }
    assert requested == {"refund", "send_email"}
    suspension = receiver.requests[2].json()["data"]
    assert sorted(a["approvalId"] for a in suspension["approvals"]) == ["e1", "r1"]
    assert [d.status for d in deliveries()] == ["delivered"] * 3
    assert {d.last_status_code for d in deliveries()} == {200}


def test_a_body_never_carries_the_approval_token_but_links_to_the_call(
    receiver: Receiver, suspend: Callable[..., Run]
) -> None:
    run = suspend(receiver.url)
    token = approval(run, "refund").token
    assert token
    for request in receiver.requests:
        assert token.encode() not in request.body
        assert b"v1." not in request.body
    links = receiver.requests[0].json()["data"]["approval"]["links"]
    assert set(links) == {"approve", "deny", "open"}
    assert all(url.startswith(f"{SITE}/deuz/approvals/act/") for url in links.values())


def test_a_verdict_and_the_completed_run_are_posted_with_who_decided(
    receiver: Receiver, django_capture_on_commit_callbacks: Any, ann: Any
) -> None:
    run = suspended(owner=ann)
    with (
        notifying(webhook(receiver.url)),
        django_capture_on_commit_callbacks(execute=True),
    ):
        services.decide_approval(approval(run, "send_email"), user=ann, approved=True)
        services.resume_run(run.run_id, user=ann, deny_remaining=True)
    assert receiver.events() == [
        "approval.decided",
        "approval.decided",
        "run.completed",
    ]
    decided = receiver.requests[0].json()["data"]["approval"]
    assert (decided["status"], decided["decidedBy"]) == ("approved", "ann")
    assert "links" not in decided  # decided: nothing to open a link for
    assert receiver.requests[2].json()["data"]["run"]["status"] == "completed"


def test_events_outside_the_filter_are_not_posted(
    receiver: Receiver, suspend: Callable[..., Run]
) -> None:
    suspend(receiver.url, events=ONLY_SUSPENSIONS)
    assert receiver.events() == ["run.suspended"]
    assert Delivery.objects.count() == 1


def test_a_500_is_retried_with_backoff_until_the_endpoint_answers(
    receiver: Receiver, suspend: Callable[..., Run]
) -> None:
    receiver.statuses = [500, 503]
    suspend(receiver.url, events=ONLY_SUSPENSIONS)
    [delivery] = deliveries()
    assert (delivery.status, delivery.attempts) == ("pending", 1)
    assert delivery.last_status_code == 500
    assert delivery.last_error.startswith("HTTP 500")
    # The next attempt waits out the timeout and the backoff, never sooner.
    assert delivery.next_attempt_at >= delivery.created_at + retry_delay(1, 10)
    with notifying(webhook(receiver.url, events=ONLY_SUSPENSIONS)):
        assert notifications.sweep().queued == ()  # not due yet
        assert notifications.sweep(later()).queued == (delivery.pk,)
        [delivery] = deliveries()
        assert (delivery.status, delivery.attempts, delivery.last_status_code) == (
            "pending",
            2,
            503,
        )
        notifications.sweep(later(48))
    [delivery] = deliveries()
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == (
        "delivered",
        3,
        200,
    )
    assert delivery.delivered_at is not None
    assert delivery.last_error == ""
    ids = {r.headers["webhook-id"] for r in receiver.requests}
    assert ids == {str(delivery.delivery_id)}  # one id on every attempt: dedupe by it
    assert len({r.body for r in receiver.requests}) == 1  # the same bytes each time


def test_a_refused_connection_is_retried_then_failed_after_the_last_attempt(
    suspend: Callable[..., Run],
) -> None:
    url = f"http://127.0.0.1:{free_port()}/nobody-listens"
    suspend(url, events=ONLY_SUSPENSIONS, max_attempts=3)
    with notifying(webhook(url, events=ONLY_SUSPENSIONS, max_attempts=3)):
        for hours in (24, 48):
            notifications.sweep(later(hours))
        [delivery] = deliveries()
        assert (delivery.status, delivery.attempts) == ("failed", 3)
        assert delivery.next_attempt_at is None
        assert "Connection refused" in delivery.last_error or "NewConnectionError" in (
            delivery.last_error
        )
        assert (
            notifications.sweep(later(72)).queued == ()
        )  # given up: never tried again


def test_a_redirect_is_a_failure_not_followed(
    receiver: Receiver, suspend: Callable[..., Run]
) -> None:
    receiver.statuses = [302]
    suspend(receiver.url, events=ONLY_SUSPENSIONS)
    [delivery] = deliveries()
    assert (delivery.status, delivery.last_status_code) == ("pending", 302)
    assert [r.path for r in receiver.requests] == ["/hooks/deuz"]


def test_an_unreachable_endpoint_never_fails_or_holds_the_run(
    django_capture_on_commit_callbacks: Any, ann: Any
) -> None:
    url = f"http://127.0.0.1:{free_port()}/down"
    with notifying(webhook(url)), django_capture_on_commit_callbacks(execute=True):
        run = suspended(owner=ann)
        services.decide_approval(approval(run, "send_email"), user=ann, approved=True)
        outcome = services.resume_run(run.run_id, user=ann, deny_remaining=True)
    assert outcome.status == "completed"
    assert outcome.error is None
    assert {d.status for d in deliveries()} == {"pending"}


def test_a_delivery_whose_webhook_was_removed_from_the_settings_fails_at_once(
    receiver: Receiver, suspend: Callable[..., Run]
) -> None:
    receiver.statuses = [500]
    suspend(receiver.url, events=ONLY_SUSPENSIONS)
    with notifying():
        notifications.sweep(later())
    [delivery] = deliveries()
    assert delivery.status == "failed"
    assert "No webhook notifier in DEUZ['NOTIFIERS'] sends to" in delivery.last_error


def test_a_receiver_refuses_a_forged_body_and_a_replayed_request(
    receiver: Receiver, suspend: Callable[..., Run]
) -> None:
    suspend(receiver.url, events=ONLY_SUSPENSIONS)
    [request] = receiver.requests
    forged = json.dumps({**request.json(), "event": "run.completed"}).encode()
    with pytest.raises(WebhookSignatureError, match="does not match the id"):
        verify_signature(forged, request.headers, SECRET)
    with pytest.raises(WebhookSignatureError, match="does not match the id"):
        verify_signature(request.body, request.headers, ANOTHER_SECRET)
    signed_at = int(request.headers["webhook-timestamp"])
    with pytest.raises(WebhookSignatureExpired, match="a replay"):
        verify_signature(request.body, request.headers, SECRET, now=signed_at + 301)


def test_the_standard_webhooks_library_verifies_every_request_as_sent(
    receiver: Receiver, suspend: Callable[..., Run]
) -> None:
    suspend(receiver.url)
    assert len(receiver.requests) == 3
    webhook = standardwebhooks.Webhook(SECRET)
    for request in receiver.requests:
        assert webhook.verify(request.body, request.headers) == request.json()


def test_a_captured_delivery_sent_again_under_a_new_id_is_refused(
    receiver: Receiver, suspend: Callable[..., Run]
) -> None:
    # Within the tolerance, and under an id the receiver has not seen: only the
    # signature, which covers the id, can tell.
    suspend(receiver.url, events=ONLY_SUSPENSIONS)
    [request] = receiver.requests
    replayed = {**request.headers, "webhook-id": str(uuid.uuid4())}
    with pytest.raises(WebhookSignatureError, match="does not match the id"):
        verify_signature(request.body, replayed, SECRET)
    with pytest.raises(standardwebhooks.WebhookVerificationError):
        standardwebhooks.Webhook(SECRET).verify(request.body, replayed)
