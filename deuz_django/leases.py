"""Exactly one resumer: a run's leg runs only under a lease taken by compare-and-set.

A lease is a row update that succeeds only when no live lease exists; it bumps the fencing
generation, so a leg whose lease was taken over (it stalled past expiry) can no longer write.
Renewal and release are conditional on the same generation.
"""

from __future__ import annotations

import os
import socket
import uuid
from datetime import timedelta
from typing import Any

from django.db.models import F, Q
from django.utils import timezone

from .conf import deuz_settings
from .exceptions import RunBusy, RunNotFound
from .models import Run
from .store import Lease


def new_owner() -> str:
    """A name for this leg's holder: host, process and a random suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def lease_duration() -> timedelta:
    return timedelta(seconds=float(deuz_settings.LEASE_SECONDS))


def acquire(run_id: str, owner: str | None = None) -> Lease:
    """Take the run's lease or raise :class:`RunBusy` (or :class:`RunNotFound`).

    One conditional ``UPDATE`` is the compare-and-set: it matches only while no live lease
    exists, so of any number of concurrent callers exactly one changes the row.
    """
    owner = owner or new_owner()
    now = timezone.now()
    taken = (
        Run.objects.filter(run_id=run_id)
        .filter(
            Q(lease_owner="") | Q(lease_expires_at__lt=now) | Q(lease_expires_at=None)
        )
        .update(
            lease_owner=owner,
            lease_expires_at=now + lease_duration(),
            lease_generation=F("lease_generation") + 1,
        )
    )
    if taken != 1:
        if not Run.objects.filter(run_id=run_id).exists():
            raise RunNotFound(f"No run '{run_id}'.")
        raise RunBusy(run_id)
    # Read back by owner: if the lease lapsed and was taken over in between, it is not ours.
    generation = (
        Run.objects.filter(run_id=run_id, lease_owner=owner)
        .values_list("lease_generation", flat=True)
        .first()
    )
    if generation is None:
        raise RunBusy(run_id)
    return Lease(run_id, owner, generation)


def renew(lease: Lease) -> bool:
    """Extend the lease; ``False`` means it was taken over and the leg must stop."""
    return (
        Run.objects.filter(
            run_id=lease.run_id,
            lease_owner=lease.owner,
            lease_generation=lease.generation,
        ).update(lease_expires_at=timezone.now() + lease_duration())
        == 1
    )


def release(lease: Lease, **changes: Any) -> None:
    """Give the lease up (with ``changes`` to the run row, in the same update)."""
    Run.objects.filter(
        run_id=lease.run_id, lease_owner=lease.owner, lease_generation=lease.generation
    ).update(lease_owner="", lease_expires_at=None, **changes)
