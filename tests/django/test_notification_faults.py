"""Faults on the way to a receiver: a queue that refuses the task, a database write that
fails after the request went out, a sweep that raises — each leaves the delivery for the
sweep (at least once, under the same id), and none reaches the run."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import OperationalError

from deuz_django import deliveries, notifications, recovery
from deuz_django.models import Delivery

from .notify_support import Receiver, later, notifying, webhook
from .run_support import suspended

pytestmark = pytest.mark.django_db


def test_a_queue_that_refuses_the_task_leaves_the_delivery_to_the_sweep(
    receiver: Receiver,
    django_capture_on_commit_callbacks: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Refused:
        def enqueue(self, *args: Any) -> None:
            raise ConnectionError("the broker is down")

    entry = webhook(receiver.url, events=["run.suspended"])
    with notifying(entry):
        monkeypatch.setattr(notifications, "deliver_task", Refused())
        with django_capture_on_commit_callbacks(execute=True):
            run = suspended()
        assert run.status == "suspended"
        [delivery] = Delivery.objects.all()
        assert (delivery.status, delivery.attempts) == ("pending", 0)
        assert "queueing delivery" in caplog.text
        assert notifications.sweep() == []  # its queued attempt may still start
        monkeypatch.undo()
        assert notifications.sweep(later(0.1)) == [delivery.pk]
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("delivered", 1)
    assert receiver.events() == ["run.suspended"]


def test_a_write_that_fails_after_sending_means_one_more_send_under_the_same_id(
    receiver: Receiver,
    django_capture_on_commit_callbacks: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def lost(*args: Any, **kwargs: Any) -> None:
        raise OperationalError("server closed the connection unexpectedly")

    entry = webhook(receiver.url, events=["run.suspended"])
    with notifying(entry):
        monkeypatch.setattr(deliveries, "record_success", lost)
        with django_capture_on_commit_callbacks(execute=True):
            suspended()
        [delivery] = Delivery.objects.all()
        assert (delivery.status, delivery.attempts) == ("pending", 1)
        monkeypatch.undo()
        notifications.sweep(later())
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("delivered", 2)
    assert [r.headers["Deuz-Webhook-Id"] for r in receiver.requests] == [
        str(delivery.delivery_id)
    ] * 2


def test_an_attempt_is_made_once_however_often_it_is_queued(
    receiver: Receiver, django_capture_on_commit_callbacks: Any
) -> None:
    receiver.statuses = [500]
    entry = webhook(receiver.url, events=["run.suspended"])
    with notifying(entry):
        with django_capture_on_commit_callbacks(execute=True):
            suspended()
        [delivery] = Delivery.objects.all()
        # The same attempt queued again (a sweep racing a slow queue): it is skipped.
        assert notifications.attempt_delivery(delivery.pk, 1) == "skipped"
        assert notifications.attempt_delivery(delivery.pk, 3) == "skipped"
    assert len(receiver.requests) == 1


@pytest.mark.django_db(transaction=True)
def test_the_recovery_sweeper_runs_the_delivery_sweep_and_survives_a_failing_one(
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert notifications.sweep in recovery._other_sweeps  # AppConfig.ready added it
    calls: list[str] = []

    def broken() -> None:
        calls.append("broken")
        raise RuntimeError("the deadline table is missing")

    monkeypatch.setattr(recovery, "_other_sweeps", [broken, *recovery._other_sweeps])
    receiver.statuses = [500]
    with notifying(webhook(receiver.url, events=["run.suspended"])):
        run = suspended()  # the transactional test commits: notified at once
        [delivery] = Delivery.objects.filter(run=run)
        Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at=later(-1))
        recovery.Sweeper(interval=60).sweep_once()
    assert calls == ["broken"]
    assert "the deadline table is missing" in caplog.text
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("delivered", 2)


def test_registering_a_sweep_twice_runs_it_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(recovery, "_other_sweeps", [])
    recovery.also_sweep(notifications.sweep)
    recovery.also_sweep(notifications.sweep)
    assert recovery._other_sweeps == [notifications.sweep]
