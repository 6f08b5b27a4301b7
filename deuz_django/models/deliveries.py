"""The delivery log: one row per notification to one place — a mail to one person, a
webhook request to one URL — and its way to delivered or failed.

A row is written before anything is sent, so nothing a worker crash interrupts is lost.
Every change is an ``UPDATE`` conditional on the attempt it belongs to, so any number of
workers and sweeps may race for a row and each attempt runs once:

- created ``pending`` with ``next_attempt_at`` a little ahead (:data:`QUEUED_GRACE`): its
  first attempt is queued, and the sweep leaves it to that task unless the task is lost;
- :func:`claim` counts an attempt and moves ``next_attempt_at`` past the attempt's
  timeout plus the backoff, so a worker killed mid-attempt leaves a row the sweep retries
  later, never at once;
- :func:`record_success` makes it ``delivered``; :func:`record_failure` keeps it
  ``pending`` for the next attempt, or makes it ``failed`` after ``max_attempts``.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Greatest
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from .runs import Run
from .visibility import Person

# Wait after the first failed attempt; each further one waits twice as long, up to the cap.
RETRY_BASE = timedelta(minutes=1)
RETRY_CAP = timedelta(hours=6)
# How long a queued attempt may take to start before the sweep queues it again.
QUEUED_GRACE = timedelta(minutes=2)
ERROR_LENGTH = 2000


class DeliveryChannel(models.TextChoices):
    EMAIL = "email", _("email")
    WEBHOOK = "webhook", _("webhook")


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", _("pending")
    DELIVERED = "delivered", _("delivered")
    FAILED = "failed", _("failed")


class DeliveryQuerySet(models.QuerySet["Delivery"]):
    def for_user(self, user: Person | None) -> DeliveryQuerySet:
        """The deliveries about runs ``user`` may see (the admin's delivery log)."""
        return self.filter(run__in=Run.objects.for_user(user))

    def due(self, now: datetime) -> DeliveryQuerySet:
        return self.filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=now)


class Delivery(models.Model):
    """One notification to one recipient or URL, with every attempt's outcome."""

    # What receivers dedupe on: the same on every attempt (a webhook's "id").
    delivery_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    channel = models.CharField(max_length=16, choices=DeliveryChannel.choices)
    event = models.CharField(max_length=40, db_index=True)  # "approval.requested", …
    run = models.ForeignKey(
        "deuz_django.Run", on_delete=models.CASCADE, related_name="deliveries"
    )
    target = models.CharField(max_length=2000)  # an e-mail address or a webhook URL
    # What is sent, as sent: the webhook's JSON body; a mail's subject, sender and parts.
    body = models.TextField()
    status = models.CharField(
        max_length=16,
        choices=DeliveryStatus.choices,
        default=DeliveryStatus.PENDING,
        db_index=True,
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    max_attempts = models.PositiveSmallIntegerField()
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    objects = DeliveryQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("notification delivery")
        verbose_name_plural = _("notification deliveries")
        permissions = [("retry_delivery", "Can retry a notification delivery now")]
        indexes = [
            # The sweep's due deliveries.
            models.Index(
                fields=["next_attempt_at"],
                condition=Q(status="pending"),
                name="deuz_delivery_due",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event} → {self.target} ({self.status})"


def retry_delay(attempt: int, timeout: float) -> timedelta:
    """How long after attempt ``attempt`` starts the next one may: its ``timeout``
    (seconds) and then :data:`RETRY_BASE`, doubling with each attempt."""
    doublings: int = 2 ** max(0, attempt - 1)  # int ** int is Any to type checkers
    backoff = min(RETRY_BASE * doublings, RETRY_CAP)
    return timedelta(seconds=timeout) + backoff


def claim(
    pk: int, attempt: int, *, timeout: float, now: datetime | None = None
) -> Delivery | None:
    """Start attempt ``attempt`` of a pending delivery; ``None`` when another worker
    made it already, the row was decided meanwhile, or it is gone."""
    now = now or timezone.now()
    claimed = Delivery.objects.filter(
        pk=pk, status=DeliveryStatus.PENDING, attempts=attempt - 1
    ).update(attempts=attempt, next_attempt_at=now + retry_delay(attempt, timeout))
    return Delivery.objects.filter(pk=pk).first() if claimed else None


def record_success(delivery: Delivery, status_code: int | None = None) -> None:
    """Delivered: also when a later attempt started meanwhile (that one was extra)."""
    Delivery.objects.filter(pk=delivery.pk).exclude(
        status=DeliveryStatus.DELIVERED
    ).update(
        status=DeliveryStatus.DELIVERED,
        delivered_at=timezone.now(),
        next_attempt_at=None,
        last_status_code=status_code,
        last_error="",
    )


def record_failure(
    delivery: Delivery,
    error: str,
    status_code: int | None = None,
    *,
    final: bool = False,
) -> None:
    """Attempt ``delivery.attempts`` failed: the row waits for its next attempt, or is
    ``failed`` when that was the last one (or ``final``: retrying cannot help)."""
    last = final or delivery.attempts >= delivery.max_attempts
    changes: dict[str, Any] = {
        "last_error": error[:ERROR_LENGTH],
        "last_status_code": status_code,
    }
    if last:
        changes.update(status=DeliveryStatus.FAILED, next_attempt_at=None)
    Delivery.objects.filter(
        pk=delivery.pk, status=DeliveryStatus.PENDING, attempts=delivery.attempts
    ).update(**changes)


def record_content(delivery: Delivery, body: str, *, target: str | None = None) -> None:
    """Keep what an attempt settled or has done so far (a mail's recipients, those
    reached), so that the next attempt goes on from there."""
    changes: dict[str, Any] = {"body": body}
    if target is not None:
        changes["target"] = target[: Delivery._meta.get_field("target").max_length]
    Delivery.objects.filter(pk=delivery.pk).update(**changes)
    delivery.body = body


def requeue_due(now: datetime, limit: int) -> list[tuple[int, int]]:
    """The due deliveries this sweep takes, as ``(pk, next attempt)``: each one's
    ``next_attempt_at`` is moved :data:`QUEUED_GRACE` ahead first, so a concurrent sweep
    does not take it too."""
    taken = []
    due = Delivery.objects.due(now).order_by("next_attempt_at")
    for pk, attempts in due.values_list("pk", "attempts")[:limit]:
        if (
            Delivery.objects.due(now)
            .filter(pk=pk, attempts=attempts)
            .update(next_attempt_at=now + QUEUED_GRACE)
        ):
            taken.append((pk, attempts + 1))
    return taken


def reopen(pk: int, now: datetime | None = None) -> int | None:
    """Make a pending or failed delivery due for one more attempt now (the admin's
    "retry now"); the attempt's number, or ``None`` when it was delivered meanwhile."""
    now = now or timezone.now()
    reopened = Delivery.objects.filter(
        pk=pk, status__in=[DeliveryStatus.PENDING, DeliveryStatus.FAILED]
    ).update(
        status=DeliveryStatus.PENDING,
        max_attempts=Greatest(F("max_attempts"), F("attempts") + 1),
        next_attempt_at=now + QUEUED_GRACE,
    )
    if not reopened:
        return None
    attempts = Delivery.objects.filter(pk=pk).values_list("attempts", flat=True)
    return int(attempts.get()) + 1
