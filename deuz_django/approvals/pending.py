"""Which approvals a suspended run waits for: the ids its checkpoint is suspended on, its
client tools' calls, and the rows still undecided and young enough to decide."""

from __future__ import annotations

from django.db.models import QuerySet

from ..core.durable.codec import decode_json
from ..models import Approval, ApprovalKind, ApprovalStatus, Run, RunStatus
from .expiry import expiry_cutoff


def pending_ids(run: Run) -> list[str]:
    """The approval ids the run's latest checkpoint is suspended on."""
    if run.status != RunStatus.SUSPENDED or not run.pending_approvals:
        return []
    return [item["approvalId"] for item in decode_json(run.pending_approvals)]


def waiting_ids(run: Run) -> list[str]:
    """The approval ids a suspended run's next leg settles: those its checkpoint is
    suspended on, and its client tool calls (D11: rows of kind ``client_tool`` of the
    current ask)."""
    if run.status != RunStatus.SUSPENDED:
        return []
    client_calls = (
        Approval.objects.asked_at(run)
        .filter(kind=ApprovalKind.CLIENT_TOOL)
        .exclude(approval_id__in=pending_ids(run))
    )
    return [*pending_ids(run), *client_calls.values_list("approval_id", flat=True)]


def current_pending(run: Run) -> QuerySet[Approval]:
    """The approvals the run still waits for: undecided and not yet too old to decide."""
    waiting = waiting_ids(run)
    if not waiting:  # a running or finished run: nothing to build a query for
        return run.approvals.none()
    pending = Approval.objects.asked_at(run).filter(
        approval_id__in=waiting, status=ApprovalStatus.PENDING
    )
    cutoff = expiry_cutoff()
    return pending if cutoff is None else pending.filter(created_at__gt=cutoff)
