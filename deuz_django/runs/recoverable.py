"""Which runs a dead process left behind: the query the recovery sweep, ``deuz recover``
and a reader that finds its run abandoned all ask."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from ..approvals.expiry import expiry_cutoff
from ..models import Approval, ApprovalStatus, Run, RunStatus


def recoverable_runs(
    older_than: float, *, run_id: str | None = None, due: bool = False
) -> list[str]:
    """Root runs a dead process left behind, oldest first: mid-run with a lapsed lease, or
    suspended on approvals that are all decided (or too old to decide) but never resumed.

    A run whose last leg failed or was aborted is not recovered (it would fail again);
    ``deuz resume`` continues it explicitly — unless the failure is one recovery retries
    (a checkpoint save failed: ``recover_after`` is set). ``due`` keeps only the runs
    whose backoff has passed (the automatic sweep; operators and readers do not wait).
    ``run_id`` asks about that one run (a reader's crash continuation).
    """
    now = timezone.now()
    idle = Q(updated_at__lt=now - timedelta(seconds=older_than))
    candidates = Run.objects.roots().lease_free(now).filter(idle).order_by("updated_at")
    if run_id is not None:
        candidates = candidates.filter(run_id=run_id)
    if due:
        candidates = candidates.filter(
            Q(recover_after=None) | Q(recover_after__lte=now)
        )
    running = candidates.filter(status=RunStatus.RUNNING).filter(
        Q(last_error="") | Q(recover_after__isnull=False)
    )
    undecided = Approval.objects.filter(
        run=OuterRef("pk"), status=ApprovalStatus.PENDING
    )
    cutoff = expiry_cutoff(now)
    if cutoff is not None:
        undecided = undecided.filter(created_at__gt=cutoff)
    decided = (
        candidates.filter(status=RunStatus.SUSPENDED)
        .exclude(pending_approvals="")
        .exclude(Exists(undecided))
    )
    return [
        *running.values_list("run_id", flat=True),
        *decided.values_list("run_id", flat=True),
    ]
