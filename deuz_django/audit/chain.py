"""Appending to the audit chain, and the digest that links it.

A record's digest is the SHA-256 (hex) of the canonical JSON — sorted keys, no
whitespace — of its fields, the previous record's digest among them::

    {"action":"decision","actorId":"7","actorName":"ada","approvalId":"toolu_1",
     "createdAt":"2026-12-06T05:00:00.123456+00:00","details":{"status":"approved"},
     "operator":"","previousDigest":"00…00","runId":"run-42","sequence":1,"tenant":""}

so a record can be re-verified from an export alone. :func:`append` writes one record
in the caller's transaction: a decision rolled back takes its record with it, and one
committed never exists without it. It first bumps the tenant's chain head
(:class:`~deuz_django.models.AuditChainHead`), which locks that row until the
transaction ends — on PostgreSQL a row lock, on SQLite the database's one writer — so
appends made at the same instant queue up into one line, never a fork.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from ..models.audit import AuditChainHead, AuditRecord
from ..models.visibility import Person
from ..storage.db import bounded_atomic

_held = threading.local()  # appends held by held_to_the_end(), per thread


def canonical_json(value: Any) -> str:
    """The one JSON text of ``value`` that digests are taken over."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def timestamp(moment: datetime) -> str:
    """A record's time as its digest and exports spell it: UTC, to the microsecond."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def linked_fields(record: AuditRecord) -> dict[str, Any]:
    """What a record's digest covers, in the JSON form exports write."""
    return {
        "tenant": record.tenant,
        "sequence": record.sequence,
        "createdAt": timestamp(record.created_at),
        "action": record.action,
        "actorId": record.actor_id,
        "actorName": record.actor_name,
        "operator": record.operator,
        "runId": record.run_id,
        "approvalId": record.approval_id,
        "details": record.details,
        "previousDigest": record.previous_digest,
    }


def digest_of(fields: dict[str, Any]) -> str:
    """The digest of a record given as :func:`linked_fields` (any ``digest`` key in
    ``fields`` is left out: a record never covers itself)."""
    covered = {key: value for key, value in fields.items() if key != "digest"}
    return hashlib.sha256(canonical_json(covered).encode()).hexdigest()


@contextmanager
def held_to_the_end() -> Iterator[None]:
    """Hold the appends made inside the block and write them, in order, as it ends
    (none if it raises), inside the transaction the block is in. A transaction that
    does several acts — a batch of verdicts — so locks its chain head after every other
    row it writes, and never waits for a row while it holds the head: an act that holds
    that row and waits for the head would be a deadlock. (A single act appends last.)"""
    if getattr(_held, "appends", None) is not None:
        yield  # an outer block writes them
        return
    _held.appends = []
    try:
        yield
        appends = _held.appends
    finally:
        _held.appends = None
    for held in appends:
        _write(*held)


def append(
    action: str,
    *,
    user: Person | None = None,
    operator: str = "",
    run_id: str = "",
    approval_id: str = "",
    details: dict[str, Any] | None = None,
    tenant: str = "",
) -> AuditRecord | None:
    """Append one record of ``action`` (an :class:`~deuz_django.models.AuditAction`) by
    ``user`` or ``operator`` (neither: the system) to ``tenant``'s chain, in the
    caller's transaction (or one of its own), as the last thing the act writes; the
    record (``None`` inside :func:`held_to_the_end`, which writes it as it ends).
    ``details`` must be JSON."""
    # As the database gives it back, so the digest verifies after a round trip.
    fields = (action, *_actor(user), operator, run_id, approval_id, tenant)
    held = (*fields, json.loads(canonical_json(details or {})))
    appends = getattr(_held, "appends", None)
    if appends is not None:
        appends.append(held)
        return None
    return _write(*held)


def _write(
    action: str,
    actor_id: str,
    actor_name: str,
    operator: str,
    run_id: str,
    approval_id: str,
    tenant: str,
    details: Any,
) -> AuditRecord:
    with bounded_atomic():
        sequence, previous = _next_link(tenant)
        record = AuditRecord(
            tenant=tenant,
            sequence=sequence,
            created_at=timezone.now(),
            action=action,
            actor_id=actor_id,
            actor_name=actor_name,
            operator=operator,
            run_id=run_id,
            approval_id=approval_id,
            details=details,
            previous_digest=previous,
        )
        record.digest = digest_of(linked_fields(record))
        record.save()
        AuditChainHead.objects.filter(tenant=tenant).update(digest=record.digest)
    return record


def _next_link(tenant: str) -> tuple[int, str]:
    """Take the next sequence of ``tenant``'s chain, locking its head until the
    transaction ends; the sequence and the digest the new record follows."""
    heads = AuditChainHead.objects.filter(tenant=tenant)
    if not heads.update(sequence=F("sequence") + 1):
        try:
            with transaction.atomic():
                AuditChainHead.objects.create(tenant=tenant, sequence=1)
        except IntegrityError:  # another append made the head first
            heads.update(sequence=F("sequence") + 1)
    sequence, digest = heads.values_list("sequence", "digest").get()
    return sequence, digest


def _actor(user: Person | None) -> tuple[str, str]:
    """A signed-in user's id (any primary key, as text) and name, kept as values: they
    outlive the user."""
    if user is None or not getattr(user, "is_authenticated", False):
        return "", ""
    return str(user.pk), str(user.get_username())
