"""The deadline sweep: what is due on approval rows (:mod:`deuz_django.deadlines.rows`)
is done by every process's sweeper, beside recovery (:mod:`deuz_django.runs.recovery`).

A sweep takes, oldest first and at most ``PER_SWEEP`` of each:

- a due deadline of a call that escalates: ``escalated_at`` is set, the deadline moves
  ``extend_by`` past now, and ``approval_escalated(approval, to=…)`` goes out;
- any other due deadline: the call is recorded ``expired`` by the system through the
  verdict pipeline (:func:`~deuz_django.approvals.verdicts.record_timeout`) with "Timed out: nobody
  decided within 4 hours." — the reason the next leg's settle gives the model as the
  call's error result. A run that then waits for nothing continues at once through
  :mod:`deuz_django.runs.continuing`: its leg queued through ``django.tasks``, or run on
  this server's event loop;
- a due reminder of a call still pending: ``reminded_at`` is set and
  ``approval_reminder`` goes out.

Each step is an ``UPDATE`` conditional on the row as the step found it, so any number of
processes may sweep at once and each call is reminded, escalated and timed out once; a
verdict racing a deadline either wins or is refused. A step never waits for its row: one
another transaction holds (a verdict being recorded, or a stalled process's) is left to
the next sweep, so the sweeper — recovery's too — is never held up behind it. Signals
go out once their write commits: at most once (a process that dies in between sends
nothing). A process that dies between timing a call out and continuing its run leaves
a suspended run with nothing undecided, which the recovery sweep continues.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from asgiref.sync import sync_to_async
from django.db import OperationalError
from django.db.models import Q
from django.utils import timezone

from ..approvals.verdicts import Decision, record_timeout
from ..exceptions import RunBusy, RunNotResumable
from ..models import Approval, ApprovalStatus
from ..runs import continuing as continuation
from ..runs.claims import claim
from ..runs.tasks import enqueue_claimed_leg
from ..signals import approval_escalated, approval_reminder, send_on_commit
from ..storage.db import bounded_atomic, locked
from ..storage.leases import Lease
from . import timeout_reason

logger = logging.getLogger("deuz_django")

PER_SWEEP = 100


@dataclass
class DeadlineReport:
    """What one sweep did: approvals as ``run_id:approval_id``, continued runs by id."""

    reminded: list[str] = field(default_factory=list)
    escalated: list[str] = field(default_factory=list)
    timed_out: list[str] = field(default_factory=list)
    continued: list[str] = field(default_factory=list)
    # Runs that wait for nothing once their calls timed out (to continue).
    ready: list[str] = field(default_factory=list, repr=False)

    def to_json(self) -> dict[str, list[str]]:
        return {
            "reminded": self.reminded,
            "escalated": self.escalated,
            "timedOut": self.timed_out,
            "continued": self.continued,
        }


def act_on_due(now: datetime | None = None) -> DeadlineReport:
    """Escalate, time out and remind what is due at ``now``; continue nothing (the
    report's ``ready`` says which runs to)."""
    now = now or timezone.now()
    report = DeadlineReport()
    due = (
        Approval.objects.filter(status=ApprovalStatus.PENDING, deadline_at__lte=now)
        .select_related("run")
        .order_by("deadline_at", "pk")[:PER_SWEEP]
    )
    for row in due:
        label = f"{row.run.run_id}:{row.approval_id}"
        if row.escalates:
            if _unless_locked(_escalate, row, now):
                report.escalated.append(label)
            continue
        decision = _unless_locked(_time_out, row, now)
        if decision is not None:
            report.timed_out.append(label)
            if decision.run_ready and row.run.run_id not in report.ready:
                report.ready.append(row.run.run_id)
    reminders = (
        Approval.objects.filter(
            status=ApprovalStatus.PENDING, reminded_at=None, remind_at__lte=now
        )
        .select_related("run")
        .order_by("remind_at", "pk")[:PER_SWEEP]
    )
    for row in reminders:
        if _unless_locked(_remind, row, now):
            report.reminded.append(f"{row.run.run_id}:{row.approval_id}")
    return report


def _unless_locked[T](
    step: Callable[[Approval, datetime], T], row: Approval, now: datetime
) -> T | None:
    """``step`` on ``row`` in a transaction that does not wait for the row; ``None``
    when another transaction holds it."""
    try:
        with bounded_atomic(wait_for_locks=False):
            return step(row, now)
    except OperationalError as error:
        if not locked(error):
            raise
        logger.info("deuz: approval %s is locked; the next sweep sees to it", row.pk)
        return None


def _escalate(row: Approval, now: datetime) -> bool:
    moved = now + (row.extend_by or timedelta(0))
    taken = Approval.objects.filter(
        pk=row.pk,
        status=ApprovalStatus.PENDING,
        escalated_at=None,
        deadline_at__lte=now,
    ).update(escalated_at=now, deadline_at=moved)
    if not taken:
        return False
    row.escalated_at, row.deadline_at = now, moved
    send_on_commit(approval_escalated, Approval, approval=row, to=row.escalate_to)
    return True


def still_due(now: datetime) -> Q:
    """A row whose deadline is due at ``now`` to time out: passed, and escalated
    already if it escalates (an escalation moves the deadline on)."""
    return Q(deadline_at__lte=now) & (Q(escalate_to="") | Q(escalated_at__isnull=False))


def _time_out(row: Approval, now: datetime) -> Decision | None:
    assert row.deadline_at is not None
    reason = timeout_reason(row.deadline_at - row.created_at)
    return record_timeout(row, reason, due=still_due(now))


def _remind(row: Approval, now: datetime) -> bool:
    taken = Approval.objects.filter(
        pk=row.pk, status=ApprovalStatus.PENDING, reminded_at=None
    ).update(reminded_at=now)
    if not taken:
        return False
    row.reminded_at = now
    send_on_commit(approval_reminder, Approval, approval=row)
    return True


def _claim(run_id: str) -> Lease | None:
    try:
        return claim(run_id)
    except (RunBusy, RunNotResumable, LookupError) as error:
        # Another leg has it, it moved on, or it still waits: whoever holds it goes on.
        logger.info("deuz: run %s not continued after a timeout: %s", run_id, error)
        return None


def sweep() -> DeadlineReport:
    """One deadline sweep; the runs it frees continue through ``django.tasks``."""
    report = act_on_due()
    for run_id in report.ready:
        lease = _claim(run_id)
        if lease is not None:
            enqueue_claimed_leg(lease)
            report.continued.append(run_id)
    return report


async def asweep() -> DeadlineReport:
    """One deadline sweep whose freed runs continue on this event loop (a server's,
    beside the readers that follow them)."""
    report = await sync_to_async(act_on_due)()
    for run_id in report.ready:
        lease = await sync_to_async(_claim)(run_id)
        if lease is not None:
            continuation.start_claimed_here(lease)
            report.continued.append(run_id)
    return report
