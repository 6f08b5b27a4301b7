"""Faults on the way to a receiver: a queue that refuses the task, a database write that
fails after the request went out, a sweep that raises — each leaves the delivery for the
sweep (at least once, under the same id), and none reaches the run. The retries are one
job of the recovery sweeper (``recovery.SWEEPS``), run in its own thread."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, NoReturn

import pytest
from django.db import OperationalError

from deuz_django import notifications
from deuz_django.models import Delivery, deliveries
from deuz_django.runs import continuing as continuation
from deuz_django.runs import recovery
from tests.django.notify_support import Receiver, later, notifying, webhook
from tests.django.run_support import suspended

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
        assert notifications.sweep().queued == ()  # its queued attempt may still start
        monkeypatch.undo()
        assert notifications.sweep(later(0.1)).queued == (delivery.pk,)
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
    assert [r.headers["webhook-id"] for r in receiver.requests] == [
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
    calls: list[str] = []

    def broken() -> NoReturn:
        calls.append("broken")
        raise RuntimeError("the deadline table is missing")

    failing = recovery.Sweep("broken", broken, None)
    monkeypatch.setattr(recovery, "SWEEPS", (failing, *recovery.SWEEPS))
    receiver.statuses = [500]
    with notifying(webhook(receiver.url, events=["run.suspended"])):
        run = suspended()  # the transactional test commits: notified at once
        [delivery] = Delivery.objects.filter(run=run)
        Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at=later(-1))
        recovery.Sweeper(interval=60).sweep_once()
    assert calls == ["broken"]
    assert "the broken sweep failed" in caplog.text
    assert "the deadline table is missing" in caplog.text
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("delivered", 2)


def test_the_delivery_retries_are_one_job_of_every_sweeper() -> None:
    names = [job.name for job in recovery.SWEEPS]
    assert names.count("notifications") == 1
    [job] = [job for job in recovery.SWEEPS if job.name == "notifications"]
    assert job.run is notifications.sweep


def test_a_servers_sweeper_retries_deliveries_in_its_own_thread_not_on_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Sending mail with the immediate backend must never hold up a server's legs."""
    loop = asyncio.new_event_loop()
    serving = threading.Thread(target=loop.run_forever, daemon=True)
    serving.start()
    threads: list[threading.Thread] = []

    def requeue_due(*args: Any) -> list[tuple[int, int]]:
        threads.append(threading.current_thread())
        return []

    monkeypatch.setattr(continuation, "home_loop", lambda: loop)
    monkeypatch.setattr(deliveries, "requeue_due", requeue_due)
    monkeypatch.setattr(
        recovery, "SWEEPS", [j for j in recovery.SWEEPS if j.name == "notifications"]
    )
    try:
        recovery.Sweeper(interval=60).sweep_once()
    finally:
        loop.call_soon_threadsafe(loop.stop)
        serving.join()
        loop.close()
    assert threads == [threading.current_thread()]
