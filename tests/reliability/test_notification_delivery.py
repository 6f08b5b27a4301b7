"""Notification deliveries survive their workers: a ``db_worker`` killed while a webhook
request is in flight leaves the delivery pending, and another worker's sweep delivers it
— once more, under the same id — with no operator."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from datetime import timedelta

import pytest
from django.utils import timezone

from deuz_django.models import Delivery
from deuz_django.notifications.notifiers import Event
from deuz_django.notifications.webhooks import WebhookNotifier
from tests.django.notify_support import SECRET, Receiver, webhook
from tests.django.processes import wait_until
from tests.django.run_support import suspended

from .test_graceful_shutdown import db_worker

pytestmark = pytest.mark.django_db(transaction=True)


def worker(url: str) -> subprocess.Popen[str]:
    """A real ``db_worker`` that sweeps every half second, with the webhook configured."""
    process: subprocess.Popen[str] = db_worker(
        DEUZ_RECOVERY_SWEEPER="1",
        DEUZ_RECOVERY_INTERVAL="0.5",
        DEUZ_TEST_NOTIFIERS=json.dumps([webhook(url, timeout=30)]),
    )
    return process


def stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()


def test_a_worker_killed_mid_request_leaves_the_delivery_pending_for_the_sweep() -> (
    None
):
    receiver = Receiver()
    hang = threading.Event()
    receiver.holds = [hang]  # the first request gets no answer
    try:
        run = suspended()
        notifier = WebhookNotifier(url=receiver.url, secret=SECRET)
        [delivery] = Delivery.objects.bulk_create(
            notifier.deliveries(Event("run.suspended", run))
        )
        # Its first queueing was lost: the sweep of the first worker takes it.
        Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())
        first = worker(receiver.url)
        try:
            wait_until(lambda: receiver.requests, "the worker to send the request")
        finally:
            os.kill(first.pid, signal.SIGKILL)
            first.communicate()
        delivery.refresh_from_db()
        assert (delivery.status, delivery.attempts, delivery.last_error) == (
            "pending",
            1,
            "",
        )
        # Not before the attempt's timeout and the backoff have passed...
        assert delivery.next_attempt_at > timezone.now() + timedelta(seconds=60)
        # ...which the test skips: the next worker's sweep delivers it.
        Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())
        second = worker(receiver.url)
        try:
            wait_until(
                lambda: Delivery.objects.filter(
                    pk=delivery.pk, status="delivered"
                ).exists(),
                "the next worker's sweep to deliver it",
            )
        finally:
            stop(second)
    finally:
        hang.set()
        receiver.close()
    delivery.refresh_from_db()
    assert (delivery.attempts, delivery.last_status_code) == (2, 200)
    assert [r.headers["webhook-id"] for r in receiver.requests] == [
        str(delivery.delivery_id)
    ] * 2
