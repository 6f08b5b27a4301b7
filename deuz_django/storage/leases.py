"""Exactly one resumer: a run's leg runs only under a lease taken by compare-and-set.

A lease is a row update that succeeds only when no live lease exists; it bumps the fencing
generation, so a leg whose lease was taken over (it stalled past expiry) can no longer write.
Renewal and release are conditional on the same generation, and :func:`holds` is the
check a leg makes immediately before every model call and tool execution.

Taking a lease never waits behind another transaction: a run row locked by a stalled leg
(an open transaction in a paused process) is skipped (``SKIP LOCKED``) and reads as busy,
so recovery moves on to the next run instead of blocking — and the stalled transaction
ends within a lease length (:func:`~deuz_django.storage.db.bounded_atomic`), so the run
is recovered then. SQLite locks the whole file, not rows: there a taker waits at most
the database's busy timeout, then reads busy too.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, timedelta
from typing import Any, NoReturn

from asgiref.sync import sync_to_async
from django.db import DatabaseError, OperationalError, connection
from django.utils import timezone

from ..conf import deuz_settings
from ..core import Usage
from ..exceptions import LeaseLost, RunBusy, RunNotFound, RunQueued, RunStopped
from ..models import Run
from ..runs.limits import RunLimits
from .db import bounded_atomic, locked, once_more_if_broken

QUEUED = "queued:"  # the owner of a claim waiting in a task queue, before its prefix


@dataclass(frozen=True, slots=True)
class Lease:
    """The right to run one leg: who holds it and its fencing generation."""

    run_id: str
    owner: str
    generation: int


_HOLDS = (
    f"SELECT stop_requested_at IS NOT NULL, step_index, usage "
    f"FROM {Run._meta.db_table} WHERE run_id = %s AND lease_owner = %s "
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
    try:
        with bounded_atomic():
            found = (
                Run.objects.select_for_update(skip_locked=True)
                .lease_free(now)
                .filter(run_id=run_id)
                .values_list("pk", "lease_generation")
                .first()
            )
            generation = None
            if found is not None:
                pk, current = found
                # The generation read is part of the compare-and-set: the update
                # matches only if nobody took the lease in between, so the new
                # generation is known.
                free = Run.objects.lease_free(now)
                if free.filter(pk=pk, lease_generation=current).update(
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
        holder = Run.objects.filter(run_id=run_id).values_list(
            "lease_owner", "lease_expires_at"
        )
        found_holder = holder.first()
        if found_holder is None:
            raise RunNotFound(f"No run '{run_id}'.")
        held_by, expires_at = found_holder
        if held_by.startswith(QUEUED) and expires_at is not None:
            raise RunQueued(run_id, timezone.localtime(expires_at, UTC))
        raise RunBusy(run_id)
    return Lease(run_id, owner, generation)


def queue(lease: Lease) -> Lease:
    """Mark a claim as waiting in a task queue (its owner ``queued:…``), so that until a
    worker starts its leg (:func:`take_over`) the run reads as queued, not as run by a
    leg (:class:`RunQueued`)."""
    queued = Lease(lease.run_id, QUEUED + lease.owner, lease.generation)
    Run.objects.held_by(lease).update(lease_owner=queued.owner)
    return queued


def take_over(lease: Lease) -> Lease | None:
    """A worker starts the leg of a queued claim: the lease becomes this process's, with a
    fresh expiry (``None`` when the claim lapsed and was taken meanwhile)."""
    mine = Lease(lease.run_id, new_owner(), lease.generation)
    taken = Run.objects.held_by(lease).update(
        lease_owner=mine.owner, lease_expires_at=timezone.now() + lease_duration()
    )
    return mine if taken else None


def renew(lease: Lease) -> bool:
    """Extend the lease; ``False`` means it was taken over and the leg must stop."""
    extended = Run.objects.held_by(lease).update(
        lease_expires_at=timezone.now() + lease_duration()
    )
    return extended == 1


@dataclass(frozen=True, slots=True)
class Held:
    """What the fence reads of a run whose lease it holds: whether a stop was asked
    for, and the counters the run-wide limits bound."""

    stop_requested: bool
    step_index: int
    usage: Usage


def holds(lease: Lease) -> Held | None:
    """The run as the fence sees it while ``lease`` is still this leg's and unexpired
    (``None`` otherwise): the check a leg makes just before it calls the model or runs
    a tool — twice a step, so one plain statement (compiling the ORM's query cost
    several times what the database does)."""
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    with connection.cursor() as cursor:
        cursor.execute(_HOLDS, [lease.run_id, lease.owner, lease.generation, now])
        row = cursor.fetchone()
    if row is None:
        return None
    stop, step_index, usage = row
    if isinstance(usage, str):  # SQLite's text; psycopg decodes jsonb itself
        usage = json.loads(usage)
    return Held(bool(stop), step_index, Usage.from_json(usage or {}))


def lease_fence(
    lease: Lease,
    on_lost: Callable[[BaseException], None] | None = None,
    *,
    limits: RunLimits | None = None,
    price: Callable[[Usage], float | None] | None = None,
) -> Callable[[], Awaitable[None]]:
    """The core's ``Deps.fence`` for a leg under ``lease``: it raises :class:`LeaseLost`
    (after telling ``on_lost``) unless the lease is still held, and :class:`RunStopped`
    (told the same way) once a stop was asked for or the run reached one of its
    run-wide ``limits`` (its cost by ``price``). A dead database connection is
    discarded and the check made once more on a fresh one; a check that cannot be made
    at all counts as lost — a leg never acts on a lease it cannot see. A limit reached
    is named on the error (``RunStopped.limit``): the leg records it as the stop's
    reason."""

    def check() -> None:
        try:
            held = once_more_if_broken(lambda: holds(lease))
        except DatabaseError as error:
            lost(
                LeaseLost,
                f"Lease on run '{lease.run_id}' could not be confirmed ({error})",
            )
        if held is None:
            lost(LeaseLost, f"Lease on run '{lease.run_id}' lapsed or was taken over")
        if held.stop_requested:
            stopping = Run.objects.select_related("stopped_by").named(lease.run_id)
            lost(RunStopped, stopping.get().stop_description)
        if limits is not None:
            cost = (
                None if price is None or limits.cost_usd is None else price(held.usage)
            )
            problem = limits.step_problem(held.step_index, held.usage, cost)
            if problem is not None:
                lost(RunStopped, f"Stopped by the system: {problem}.", problem)

    def lost(kind: type[LeaseLost | RunStopped], why: str, limit: str = "") -> NoReturn:
        error = (
            LeaseLost(f"{why}; this leg stops here.")
            if kind is LeaseLost
            else RunStopped(why, limit=limit)
        )
        if on_lost is not None:
            on_lost(error)
        raise error

    async def fence() -> None:
        await sync_to_async(check)()

    return fence


def release(lease: Lease, **changes: Any) -> None:
    """Give the lease up (with ``changes`` to the run row, in the same update)."""
    Run.objects.held_by(lease).update(lease_owner="", lease_expires_at=None, **changes)
