"""Exactly one resumer: a run's leg runs only under a lease taken by compare-and-set.

A lease is a row update that succeeds only when no live lease exists; it bumps the fencing
generation, so a leg whose lease was taken over (it stalled past expiry) can no longer write.
Renewal and release are conditional on the same generation, and :func:`holds` is the
check a leg makes immediately before every model call and tool execution.

Taking a lease never waits behind another transaction: a run row locked by a stalled leg
(an open transaction in a paused process) is skipped (``SKIP LOCKED``) and reads as busy,
so recovery moves on to the next run instead of blocking — and the stalled transaction
ends within a lease length (:func:`~deuz_django.connections.bounded_atomic`), so the run
is recovered then. SQLite locks the whole file, not rows: there a taker waits at most
the database's busy timeout, then reads busy too.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.db import DatabaseError, OperationalError, connection
from django.db.models import Q
from django.utils import timezone

from .conf import deuz_settings
from .connections import bounded_atomic, locked, once_more_if_broken
from .exceptions import LeaseLost, RunBusy, RunNotFound
from .models import Run
from .store import Lease

_HOLDS = (
    f"SELECT 1 FROM {Run._meta.db_table} WHERE run_id = %s AND lease_owner = %s "
    "AND lease_generation = %s AND lease_expires_at > %s"
)


def new_owner() -> str:
    """A name for this leg's holder: host, process and a random suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def lease_duration() -> timedelta:
    return timedelta(seconds=float(deuz_settings.LEASE_SECONDS))


def acquire(run_id: str, owner: str | None = None) -> Lease:
    """Take the run's lease or raise :class:`RunBusy` (or :class:`RunNotFound`).

    The conditional ``UPDATE`` is the compare-and-set: it matches only while no live lease
    exists, so of any number of concurrent callers exactly one changes the row. The row
    is first locked with ``SKIP LOCKED`` (where the database has it), so a row another
    transaction holds is busy at once rather than waited for. The lock is ``FOR UPDATE``,
    not ``FOR NO KEY UPDATE``, on purpose: a transaction that inserted rows of the run
    (its journal's, whose foreign key locks the run ``FOR KEY SHARE``) makes the run busy
    too — a leg that took it would wait behind that transaction's rows.
    """
    owner = owner or new_owner()
    now = timezone.now()
    free = Q(lease_owner="") | Q(lease_expires_at__lt=now) | Q(lease_expires_at=None)
    try:
        with bounded_atomic():
            found = (
                Run.objects.select_for_update(skip_locked=True)
                .filter(free, run_id=run_id)
                .values_list("pk", "lease_generation")
                .first()
            )
            generation = None
            if found is not None:
                pk, current = found
                # The generation read is part of the compare-and-set: the update
                # matches only if nobody took the lease in between, so the new
                # generation is known.
                if Run.objects.filter(free, pk=pk, lease_generation=current).update(
                    lease_owner=owner,
                    lease_expires_at=now + lease_duration(),
                    lease_generation=current + 1,
                ):
                    generation = current + 1
    except OperationalError as error:
        if not locked(error):
            raise
        raise RunBusy(run_id) from error
    if generation is None:
        if not Run.objects.filter(run_id=run_id).exists():
            raise RunNotFound(f"No run '{run_id}'.")
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


def holds(lease: Lease) -> bool:
    """Whether ``lease`` is still this leg's and unexpired: the fence a leg checks just
    before it calls the model or runs a tool — twice a step, so one plain statement
    (compiling the ORM's query cost several times what the database does)."""
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    with connection.cursor() as cursor:
        cursor.execute(_HOLDS, [lease.run_id, lease.owner, lease.generation, now])
        return cursor.fetchone() is not None


def lease_fence(
    lease: Lease, on_lost: Callable[[BaseException], None] | None = None
) -> Callable[[], Awaitable[None]]:
    """The core's ``Deps.fence`` for a leg under ``lease``: it raises :class:`LeaseLost`
    (after telling ``on_lost``) unless the lease is still held. A dead database
    connection is discarded and the check made once more on a fresh one; a check that
    cannot be made at all counts as lost — a leg never acts on a lease it cannot see."""

    def check() -> None:
        try:
            held = once_more_if_broken(lambda: holds(lease))
        except DatabaseError as error:
            lost(f"could not be confirmed ({error})")
        if not held:
            lost("lapsed or was taken over")

    def lost(why: str) -> None:
        error = LeaseLost(f"Lease on run '{lease.run_id}' {why}; this leg stops here.")
        if on_lost is not None:
            on_lost(error)
        raise error

    async def fence() -> None:
        await sync_to_async(check)()

    return fence


def release(lease: Lease, **changes: Any) -> None:
    """Give the lease up (with ``changes`` to the run row, in the same update)."""
    Run.objects.filter(
        run_id=lease.run_id, lease_owner=lease.owner, lease_generation=lease.generation
    ).update(lease_owner="", lease_expires_at=None, **changes)
