"""Stopping a run: what a person can always do, and what runaways end in.

A stop is first *asked for* (``Run.stop_requested_at``, with why and by whom): by a
person from any surface (:func:`request_stop`: the admin, REST, the WebSocket, ``deuz
stop``), or by the system when a run-wide limit is reached or a leg loops
(:func:`stop_by_system`). It then *takes effect* under the run's lease
(:func:`apply_requested_stop`): the run becomes ``stopped``, the calls it waited on are
``cancelled``, ``run_stopped`` goes out, and nothing continues it — no claim, no
recovery, no automatic decision. Who applies it:

- nobody holds the run (it waits for a person, or its process died and the lease
  lapsed): the asker, at once;
- a leg holds it: that leg, in whichever process, at its next fence — before its next
  model call or tool execution (:func:`deuz_django.storage.leases.lease_fence`) — or at its end.

A stop never interrupts a tool that is executing; the run's last checkpoint stays what
it was, so the transcript shows everything that happened.
"""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from django.utils import timezone

from .. import audit
from ..approvals.announcing import announce_verdict
from ..approvals.verdicts import user_or_none
from ..core import AbortController, ErrorPart
from ..exceptions import RunBusy, RunNotFound, RunNotStoppable, RunStopped
from ..models import Approval, ApprovalStatus, Run, RunStatus
from ..models.audit import AuditAction
from ..models.visibility import Person
from ..signals import run_stopped, send_on_commit
from ..storage import leases
from ..storage.db import bounded_atomic
from ..storage.leases import Lease
from ..streaming.live import LegStream

logger = logging.getLogger("deuz_django")

FINISHED = (RunStatus.COMPLETED, RunStatus.STOPPED)


def request_stop(
    run_id: str, *, user: Person | None = None, operator: str = "", reason: str = ""
) -> Run:
    """Ask ``run_id`` to stop, on behalf of ``user`` (or ``operator``, a name from a
    shell); it stops now when no leg holds it, else at that leg's next fence. Asking
    again while a stop is pending changes nothing. Raises :class:`RunNotStoppable` for
    a run that is completed or stopped already. The caller checks the permission
    (:func:`deuz_django.permissions.can_stop_run`)."""
    with bounded_atomic():
        asked = (
            Run.objects.named(run_id)
            .filter(stop_requested_at=None)
            .exclude(status__in=FINISHED)
            .update(
                stop_requested_at=timezone.now(),
                stop_reason=reason,
                stopped_by=user_or_none(user),
                stop_operator=operator,
            )
        )
        if asked:
            _audit_stop(run_id, reason, user=user, operator=operator)
    run = Run.objects.select_related("stopped_by").named(run_id).first()
    if run is None:
        raise RunNotFound(f"No run '{run_id}'.")
    if not asked and (run.status in FINISHED or run.stop_requested_at is None):
        raise RunNotStoppable(
            f"Run '{run_id}' is {run.status}; there is nothing to stop."
        )
    if asked:
        logger.info("deuz: run %s: stop asked for by %s", run_id, run.stopper)
    apply_if_free(run_id)
    run.refresh_from_db()
    return run


def stop_by_system(run_id: str, reason: str) -> None:
    """Ask ``run_id`` to stop for ``reason`` (a run-wide limit, a loop), unless a stop
    was asked for already; the leg that asks applies it when it ends."""
    with bounded_atomic():
        asked = (
            Run.objects.named(run_id)
            .filter(stop_requested_at=None)
            .update(stop_requested_at=timezone.now(), stop_reason=reason)
        )
        if asked:
            _audit_stop(run_id, reason)
    if asked:
        logger.warning("deuz: run %s is stopping: %s", run_id, reason)


def _audit_stop(
    run_id: str, reason: str, *, user: Person | None = None, operator: str = ""
) -> None:
    """The stop asked for, in the audit trail (by nobody: the system's own stop)."""
    by_system = user is None and not operator
    audit.append(
        AuditAction.STOP,
        user=user,
        operator=operator,
        run_id=run_id,
        details={"reason": reason, "bySystem": by_system},
    )


def apply_if_free(run_id: str) -> bool:
    """Apply a stop asked for on a run no leg holds (``False``: a leg holds it, and
    stops at its next fence). Those following the run hear it as a leg of its own that
    says who stopped it and why — as a stopped leg's last part does."""
    try:
        lease = leases.acquire(run_id)
    except RunBusy:
        return False
    try:
        stopped = apply_requested_stop(lease)
        if stopped:
            run = Run.objects.select_related("stopped_by").named(run_id).get()
            async_to_sync(_announce)(lease, run.stop_description)
        return stopped
    finally:
        leases.release(lease)


async def _announce(lease: Lease, description: str) -> None:
    """The stop in the run's stream journal (a failing journal is logged: the stop
    stands, and a reader that reconnects sees the stopped run)."""
    try:
        stream = await LegStream.open(lease.run_id, AbortController(), fence=lease)
        stream.add(ErrorPart(RunStopped(description)))
        await stream.close()
    except Exception:
        logger.exception("deuz: the stop of run %s was not journaled", lease.run_id)


def apply_requested_stop(lease: Lease) -> bool:
    """Under ``lease``: if a stop was asked for, the run becomes ``stopped`` and the
    calls of its current ask are ``cancelled``, in one transaction (``False``: none
    was asked for, or it took effect already)."""
    now = timezone.now()
    with bounded_atomic():
        run = (
            Run.objects.select_related("stopped_by")
            .named(lease.run_id)
            .held_by(lease)
            .filter(stop_requested_at__isnull=False)
            .exclude(status__in=FINISHED)
            .first()
        )
        if run is None:
            return False
        Run.objects.filter(pk=run.pk).update(status=RunStatus.STOPPED, stopped_at=now)
        run.status, run.stopped_at = RunStatus.STOPPED, now
        _cancel_pending(run, now)
        send_on_commit(run_stopped, Run, run=run)
    logger.info(
        "deuz: run %s stopped (by %s): %s",
        run.run_id,
        run.stopper,
        run.stop_reason or "no reason given",
    )
    return True


def _cancel_pending(run: Run, now: Any) -> None:
    """The calls the run waited on will never be decided: recorded ``cancelled``."""
    pending = list(
        Approval.objects.filter(run=run, status=ApprovalStatus.PENDING).select_related(
            "run"
        )
    )
    if not pending:
        return
    Approval.objects.filter(pk__in=[a.pk for a in pending]).update(
        status=ApprovalStatus.CANCELLED,
        reason=f"The run was stopped. {run.stop_description}",
        decided_at=now,
    )
    for approval in pending:
        approval.refresh_from_db()
        announce_verdict(approval)
