"""Automatic recovery: runs a dead process left behind continue without an operator.

A process sweeps when it is told to, never because of how it was started: the ASGI
application of :mod:`deuz_django.asgi` starts a :class:`Sweeper` thread in every server
with the first scope it is handed; ``DEUZ["RECOVERY_SWEEPER"] = True`` starts one in a
process as its apps are ready (a tasks worker's); ``manage.py deuz sweep`` is a process
that only sweeps. A sweeper sweeps once when it starts and then every
``RECOVERY_INTERVAL`` seconds. A sweep

- continues each run whose lease lapsed (idle for a lease length, so a run about to be
  claimed by its starter is left alone), counting attempts since the run last reached a
  step boundary (a saved checkpoint is progress and starts the count afresh): the n-th
  waits ``RECOVERY_BACKOFF * 2**(n-1)`` seconds after the one before, and after
  ``RECOVERY_MAX_ATTEMPTS`` the run is marked failed with its error, for the admin;
- closes the stream journal of a run that ended while its process died before journaling
  the leg's end, so its readers receive ``done`` (``[DONE]`` over SSE).

The legs go through ``django.tasks`` (a worker runs them), or, in a server that runs legs
itself, onto its event loop beside the readers that follow them. Any number of processes
may sweep at once: each run is taken by its lease's compare-and-set. ``deuz recover`` stays
for operators; :data:`recover_runs_task` is the same sweep for a scheduler of your own.

The sweeper runs every job in :data:`SWEEPS` in turn — recovery, then the deadlines of
pending approvals (:mod:`deuz_django.deadlines.sweep`), then the retries of notification
deliveries (:func:`deuz_django.notifications.sweep`) — each failure logged on its own,
so one failing job neither stops the others nor the next round.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from asgiref.sync import async_to_sync, sync_to_async
from django.apps import apps
from django.db import close_old_connections
from django.db.models import F
from django.tasks import task
from django.utils import timezone

from .. import audit, notifications
from ..conf import deuz_settings
from ..core import AbortController
from ..deadlines import sweep as deadline_sweep
from ..exceptions import RunBusy, RunNotResumable
from ..models import Run, RunStatus
from ..models.audit import AuditAction
from ..signals import run_failed, send_on_commit
from ..storage import leases
from ..storage.db import bounded_atomic
from ..storage.leases import Lease
from ..streaming.live import LegStream
from . import continuing as continuation
from . import draining
from .claims import claim
from .recoverable import recoverable_runs
from .tasks import enqueue_claimed_leg, run_claimed_leg_task

logger = logging.getLogger("deuz_django")

JOURNALS_PER_SWEEP = 100
# What a sweep did that has a log line of its own per run, as it happened.
LOGGED_PER_RUN = frozenset({"continued", "failed"})
BACKOFF_CAP = timedelta(hours=1)


@dataclass
class SweepReport:
    """What one sweep did, by run id."""

    continued: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    journals_closed: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, list[str]]:
        return {
            "continued": self.continued,
            "failed": self.failed,
            "journalsClosed": self.journals_closed,
        }


def backoff(attempt: int) -> timedelta:
    """How long after the ``attempt``-th recovery the next may start."""
    seconds = float(deuz_settings.RECOVERY_BACKOFF) * 2 ** max(0, attempt - 1)
    return min(timedelta(seconds=seconds), BACKOFF_CAP)


class RecoveryExhausted(Exception):
    """Recovery gave up on a run: it is marked failed (``last_error`` says why)."""


def claim_for_recovery(run_id: str, now: datetime | None = None) -> Lease | None:
    """Take a due run's lease and count the attempt; ``None`` when another process has
    it or it moved on. Past ``RECOVERY_MAX_ATTEMPTS`` the run is marked failed instead
    (:class:`RecoveryExhausted`)."""
    queued = (
        Run.objects.filter(run_id=run_id, lease_owner__startswith=leases.QUEUED)
        .values_list("lease_expires_at", flat=True)
        .first()
    )
    try:
        lease = claim(run_id)
    except (RunBusy, RunNotResumable, LookupError) as error:
        logger.info("deuz: run %s not recovered: %s", run_id, error)
        return None
    if queued is not None:
        logger.warning(
            "deuz: run %s was queued for a worker, and no worker started it before "
            "its claim lapsed at %s; the recovery sweep continues it. Is a worker "
            "running (db_worker, rqworker, celery worker)?",
            run_id,
            queued,
        )
    now = now or timezone.now()
    run = Run.objects.filter(run_id=run_id).values("recovery_attempts", "last_error")
    found = run.first() or {"recovery_attempts": 0, "last_error": ""}
    attempt = found["recovery_attempts"] + 1
    limit = int(deuz_settings.RECOVERY_MAX_ATTEMPTS)
    if attempt > limit:
        cause = found["last_error"] or "its process stopped mid-leg each time"
        with bounded_atomic():
            leases.release(
                lease,
                recover_after=None,
                last_error=f"Recovery gave up after {limit} attempts: {cause}"[:2000],
            )
            _audit_recovery(run_id, attempt, gave_up=True)
        logger.error(
            "deuz: recovery of run %s gave up after %d attempts", run_id, limit
        )
        failed = Run.objects.get(run_id=run_id)
        send_on_commit(run_failed, Run, run=failed, error=failed.last_error)
        raise RecoveryExhausted(run_id)
    with bounded_atomic():
        Run.objects.held_by(lease).update(
            recovery_attempts=F("recovery_attempts") + 1,
            recover_after=now + backoff(attempt),
        )
        _audit_recovery(run_id, attempt, gave_up=False)
    logger.info("deuz: run %s recovered by the sweep (attempt %d)", run_id, attempt)
    return lease


def _audit_recovery(run_id: str, attempt: int, *, gave_up: bool) -> None:
    audit.append(
        AuditAction.RECOVERY,
        run_id=run_id,
        details={"attempt": attempt, "gaveUp": gave_up, "by": "sweep"},
    )


def due_runs() -> list[str]:
    return recoverable_runs(float(deuz_settings.LEASE_SECONDS), due=True)


def sweep() -> SweepReport:
    """One sweep (see the module docstring), its legs queued through ``django.tasks``."""
    report = SweepReport()
    for run_id in due_runs():
        try:
            lease = claim_for_recovery(run_id)
        except RecoveryExhausted:
            report.failed.append(run_id)
            continue
        if lease is not None:
            enqueue_claimed_leg(lease)
            report.continued.append(run_id)
    report.journals_closed = close_open_journals()
    return report


async def asweep() -> SweepReport:
    """One sweep whose legs run on this event loop (a server's, beside its readers)."""
    report = SweepReport()
    for run_id in await sync_to_async(due_runs)():
        try:
            lease = await sync_to_async(claim_for_recovery)(run_id)
        except RecoveryExhausted:
            report.failed.append(run_id)
            continue
        if lease is not None:
            continuation.start_claimed_here(lease)
            report.continued.append(run_id)
    report.journals_closed = await aclose_open_journals()
    return report


def close_open_journals() -> list[str]:
    """Journal the missing ``done`` of runs that ended (completed or suspended) while the
    process that ran their last leg died before closing the journal."""
    return async_to_sync(aclose_open_journals)()


async def aclose_open_journals() -> list[str]:
    """:func:`close_open_journals` on this event loop (never a sync call waiting for the
    loop from inside one of its sync threads: the loop's other legs would wait too)."""
    closed = []
    for run_id in await sync_to_async(_open_journals)():
        try:
            lease = await sync_to_async(leases.acquire)(run_id)
        except (RunBusy, LookupError):
            continue
        try:
            await _close_journal(lease)
        except Exception:
            logger.exception("deuz: closing the journal of run %s failed", run_id)
            await sync_to_async(leases.release)(lease)
            continue
        await sync_to_async(leases.release)(lease, journal_open=False)
        closed.append(run_id)
    return closed


def _open_journals() -> list[str]:
    now = timezone.now()
    stale = now - timedelta(seconds=float(deuz_settings.LEASE_SECONDS))
    candidates = (
        Run.objects.filter(journal_open=True, updated_at__lt=stale)
        .exclude(status=RunStatus.RUNNING)
        .lease_free(now)
        .order_by("updated_at")
        .values_list("run_id", flat=True)[:JOURNALS_PER_SWEEP]
    )
    return list(candidates)


async def _close_journal(lease: Lease) -> None:
    stream = await LegStream.open(lease.run_id, AbortController(), fence=lease)
    await stream.close()


# -- the sweeper ---------------------------------------------------------------------------


class Report(Protocol):
    def to_json(self) -> dict[str, list[str]]: ...


@dataclass(frozen=True, slots=True)
class Sweep:
    """A job of the sweeper: ``run`` continues what it frees through ``django.tasks``,
    ``arun`` on the event loop of a server that runs legs itself. A job that frees no
    run has no ``arun``: it runs in the sweeper's own thread even in a server, so what
    it does (sending mail with the immediate backend) never holds up the loop."""

    name: str
    run: Callable[[], Report]
    arun: Callable[[], Coroutine[Any, Any, Report]] | None


SWEEPS = (
    Sweep("recovery", sweep, asweep),
    Sweep("deadlines", deadline_sweep.sweep, deadline_sweep.asweep),
    Sweep("notifications", notifications.sweep, None),
)


@task
def recover_runs_task() -> dict[str, dict[str, list[str]]]:
    """One round of every sweep as a task (for a scheduler of your own: cron, Celery
    beat): ``{"recovery": {...}, "deadlines": {...}, "notifications": {...}}``."""
    return {job.name: job.run().to_json() for job in SWEEPS}


class Sweeper(threading.Thread):
    """Sweeps at start and then every ``interval`` seconds, until :meth:`stop`."""

    def __init__(self, interval: float) -> None:
        super().__init__(name="deuz-recovery", daemon=True)
        self.interval = interval
        self._stopped = threading.Event()

    def run(self) -> None:
        # Started from AppConfig.ready(), before the app registry is ready: the first
        # sweep waits for it (a query sooner is Django's RuntimeWarning).
        while not apps.ready:
            if self._stopped.wait(0.01):
                return
        while True:
            self.sweep_once()
            if self._stopped.wait(self.interval):
                return

    def stop(self) -> None:
        self._stopped.set()

    def sweep_once(self) -> None:
        for job in SWEEPS:
            if draining.stopping():
                return
            try:
                loop = continuation.home_loop()
                if loop is not None and job.arun is not None:
                    report = asyncio.run_coroutine_threadsafe(job.arun(), loop).result()
                else:
                    report = job.run()
                done = {
                    key: ids
                    for key, ids in report.to_json().items()
                    if ids and key not in LOGGED_PER_RUN
                }
                if done:
                    logger.info("deuz: the %s sweep: %s", job.name, done)
            except Exception:
                logger.exception(
                    "deuz: the %s sweep failed; it runs again later", job.name
                )
            finally:
                close_old_connections()


_sweeper: Sweeper | None = None


def sweeping() -> bool:
    """Whether this process runs a recovery sweep now."""
    return _sweeper is not None and _sweeper.is_alive()


def who_continues(continued: continuation.Continuation) -> str:
    """Where a continued run's leg runs, said as it is — what the admin, the API and the
    command tell a person: never "in the background" when nothing there will run it."""
    if continued.task is None:
        return "it continues on this server"
    lapse = int(float(deuz_settings.LEASE_SECONDS))
    backend = type(run_claimed_leg_task.get_backend()).__name__
    fallback = (
        "this server's recovery sweep continues it"
        if sweeping()
        else "the recovery sweep of a server or worker continues it (none runs in "
        "this process)"
    )
    return (
        f"it is queued for a worker ({backend}); if no worker starts it within "
        f"{lapse} s, {fallback}"
    )


def start_sweeper() -> Sweeper | None:
    """Start this process's sweeper (once); ``None`` when ``RECOVERY_INTERVAL`` is None."""
    global _sweeper
    interval = deuz_settings.RECOVERY_INTERVAL
    if interval is None:
        return None
    if _sweeper is None or not _sweeper.is_alive():
        _sweeper = Sweeper(float(interval))
        _sweeper.start()
    return _sweeper
