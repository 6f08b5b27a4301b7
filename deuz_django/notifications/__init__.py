"""Notifications: what the integration signals become — mails and webhook requests,
delivered at least once, never in the way of a run.

When a signal of :mod:`deuz_django.signals` is sent (after its transaction committed),
:func:`notify` asks each configured notifier (:mod:`deuz_django.notifications.notifiers`) which
deliveries the event makes and writes them to the delivery log, then queues one
:data:`deliver_task` per delivery through ``django.tasks``. With a worker backend the
sending happens there, never in the request or the leg; the immediate backend sends at
once, after the commit. A failed attempt is retried with backoff by the periodic sweep
(:func:`sweep`, a job of every process's recovery sweeper), until the delivery's
``max_attempts``; a worker killed mid-attempt leaves its delivery pending, and the sweep
retries it. Nothing here raises into the leg, the verdict or the request that sent the
signal: a notifier that fails is logged and the others still run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.dispatch import Signal
from django.tasks import task
from django.utils import timezone

from .. import signals
from ..conf import deuz_settings
from ..models import deliveries
from ..models.deliveries import Delivery, DeliveryStatus
from ..storage.db import bounded_atomic
from .notifiers import DeliveryFailed, Event, Notifier, entries, load_notifier

logger = logging.getLogger("deuz_django")

# Which event each signal is.
SIGNAL_EVENTS: dict[Signal, str] = {
    signals.approval_requested: "approval.requested",
    signals.question_asked: "question.asked",
    signals.approval_decided: "approval.decided",
    signals.approval_reminder: "approval.reminder",
    signals.approval_escalated: "approval.escalated",
    signals.run_suspended: "run.suspended",
    signals.run_completed: "run.completed",
    signals.run_failed: "run.failed",
    signals.run_stopped: "run.stopped",
}
SWEEP_BATCH = 200  # deliveries a sweep queues at most (the next sweep takes the rest)


def connect_receivers() -> None:
    """Turn every integration signal into notifications (``AppConfig.ready``)."""
    for signal, event_type in SIGNAL_EVENTS.items():
        signal.connect(
            _receiver(event_type),
            weak=False,
            dispatch_uid=f"deuz_django.notifications:{event_type}",
        )


def _receiver(event_type: str) -> Callable[..., None]:
    def receive(sender: type, **kwargs: Any) -> None:
        if not deuz_settings.NOTIFIERS:  # nothing to do: not even a query
            return
        approval = kwargs.get("approval")
        notify(
            Event(
                type=event_type,
                run=kwargs["run"] if approval is None else approval.run,
                approval=approval,
                approvals=tuple(kwargs.get("approvals", ())),
                error=kwargs.get("error", ""),
                to=kwargs.get("to", ""),
            )
        )

    return receive


def notify(event: Event) -> list[Delivery]:
    """Write the deliveries ``event`` makes and queue their first attempts."""
    created: list[Delivery] = []
    for notifier in configured_notifiers():
        if not notifier.wants(event):
            continue
        try:
            with bounded_atomic():
                created += Delivery.objects.bulk_create(notifier.deliveries(event))
        except Exception:
            logger.exception(
                "deuz: %s could not prepare %s of run %s",
                type(notifier).__name__,
                event.type,
                event.run.run_id,
            )
    for delivery in created:
        queue(delivery.pk, 1)
    return created


def configured_notifiers() -> list[Notifier]:
    """The notifiers of ``DEUZ["NOTIFIERS"]``; an entry that cannot be built is logged
    and left out (``manage.py check`` reports it)."""
    built = []
    try:
        configured = entries()
    except Exception:
        logger.exception("deuz: DEUZ['NOTIFIERS'] cannot be read")
        return []
    for index, entry in enumerate(configured):
        try:
            built.append(load_notifier(index, entry))
        except Exception:
            logger.exception("deuz: a notifier is left out")
    return built


def queue(pk: int, attempt: int) -> None:
    """Queue attempt ``attempt`` of a delivery. If queueing fails the delivery stays
    pending, and the sweep queues it again."""
    try:
        deliver_task.enqueue(pk, attempt)
    except Exception:
        logger.exception("deuz: queueing delivery %s failed; the sweep retries it", pk)


@task
def deliver_task(delivery_id: int, attempt: int) -> str:
    """Make attempt ``attempt`` of one delivery (its status afterwards)."""
    return attempt_delivery(delivery_id, attempt)


def attempt_delivery(pk: int, attempt: int) -> str:
    """Claim attempt ``attempt`` of delivery ``pk``, send it once and record how it
    went: ``delivered``, ``pending`` (to be retried), ``failed``, or ``skipped`` when
    the attempt was another worker's or is not due."""
    found = Delivery.objects.filter(pk=pk, status=DeliveryStatus.PENDING).first()
    if found is None:
        return "skipped"
    notifier = next((n for n in configured_notifiers() if n.sends(found)), None)
    timeout = 0.0 if notifier is None else notifier.timeout
    delivery = deliveries.claim(pk, attempt, timeout=timeout)
    if delivery is None:
        return "skipped"
    if notifier is None:
        deliveries.record_failure(
            delivery,
            f"No {delivery.channel} notifier in DEUZ['NOTIFIERS'] sends to "
            f"{delivery.target} any more.",
            final=True,
        )
    else:
        try:
            status_code = notifier.send(delivery)
        except DeliveryFailed as failure:
            deliveries.record_failure(delivery, str(failure), failure.status_code)
        except Exception as error:
            logger.exception("deuz: delivery %s failed unexpectedly", pk)
            deliveries.record_failure(delivery, f"{type(error).__name__}: {error}")
        else:
            deliveries.record_success(delivery, status_code)
    return str(Delivery.objects.values_list("status", flat=True).get(pk=pk))


@dataclass(frozen=True, slots=True)
class RetryReport:
    """What one delivery sweep did: the deliveries it queued again, by id."""

    queued: tuple[int, ...]

    def to_json(self) -> dict[str, list[str]]:
        return {"queued": [str(pk) for pk in self.queued]}


def sweep(now: datetime | None = None) -> RetryReport:
    """Queue the next attempt of every delivery that is due: failed attempts whose
    backoff passed, attempts a dead worker left, queueings that were lost. A job of
    every recovery sweeper (``recovery.SWEEPS``); safe to run anywhere, any number at
    once."""
    taken = deliveries.requeue_due(now or timezone.now(), SWEEP_BATCH)
    for pk, attempt in taken:
        queue(pk, attempt)
    return RetryReport(queued=tuple(pk for pk, _ in taken))


def retry_now(pks: list[int]) -> list[int]:
    """One more attempt now for each pending or failed delivery of ``pks`` (a failed one
    gets exactly one more); the ids queued."""
    queued = []
    for pk in pks:
        attempt = deliveries.reopen(pk)
        if attempt is not None:
            queue(pk, attempt)
            queued.append(pk)
    return queued
