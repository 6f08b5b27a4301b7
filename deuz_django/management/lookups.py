"""What the ``deuz`` command's arguments name: a run, one of its approvals."""

from __future__ import annotations

from django.core.management.base import CommandError

from ..exceptions import RunNotFound
from ..models import Approval, Run
from .output import BAD_ARGUMENTS


def run_named(run_id: str) -> Run:
    """The run an argument names, or :class:`RunNotFound` (exit 1)."""
    run = Run.objects.select_related("owner").named(run_id).first()
    if run is None:
        raise RunNotFound(f"No run '{run_id}'.")
    return run


def approval_of(run: Run, approval_id: str) -> Approval:
    """The newest approval ``approval_id`` of ``run``, or bad arguments (exit 2)."""
    approval = run.approvals.select_related("run").filter(approval_id=approval_id)
    found = approval.newest_first().first()
    if found is None:
        raise CommandError(
            f"Run '{run.run_id}' has no approval '{approval_id}'.",
            returncode=BAD_ARGUMENTS,
        )
    return found
