"""Background resume through Django's tasks framework (``django.tasks``).

Which process runs a resume is the ``TASKS`` setting's business, never this module's:

- development and tests: ``django.tasks.backends.immediate.ImmediateBackend`` runs the leg
  at once, inside the request that queued it;
- production: a worker backend, e.g. django-tasks-db (``pip install
  deuz-django[tasks-db]``, ``INSTALLED_APPS += ["django_tasks_db"]``, ``TASKS =
  {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}``, ``manage.py migrate``),
  with ``manage.py db_worker`` running (``--batch`` drains the queue and exits).

A queued resume of a run another leg holds, or one that still waits for verdicts,
reports so in its return value instead of failing. ``deuz_django.E005`` reports a backend
that cannot run these tasks.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django.tasks import task

from . import leases
from .exceptions import RunBusy, RunNotResumable
from .services import LegOutcome, aresume_run, arun_claimed_leg
from .store import Lease


@task
def resume_run_task(run_id: str, deny_remaining: bool = False) -> dict[str, Any]:
    """Resume ``run_id`` in whatever process runs the task; a busy run is left to its leg."""
    try:
        outcome = async_to_sync(aresume_run)(run_id, deny_remaining=deny_remaining)
    except RunBusy:
        return {"runId": run_id, "status": "busy"}
    except RunNotResumable as error:
        return {"runId": run_id, "status": "not-resumable", "detail": str(error)}
    return _summary(outcome)


@task
def run_claimed_leg_task(run_id: str, owner: str, generation: int) -> dict[str, Any]:
    """Run the leg a request claimed with ``services.claim_resume`` (the lease is handed
    over); a claim that lapsed and was taken over is left to its new holder."""
    try:
        outcome = async_to_sync(arun_claimed_leg)(Lease(run_id, owner, generation))
    except RunBusy:
        return {"runId": run_id, "status": "busy"}
    return _summary(outcome)


def _summary(outcome: LegOutcome) -> dict[str, Any]:
    return {
        "runId": outcome.run_id,
        "status": outcome.status,
        "finishReason": outcome.finish_reason,
        "pendingApprovals": outcome.pending_approvals,
        "error": outcome.error,
    }


def enqueue_resume(run_id: str, *, deny_remaining: bool = False) -> Any:
    """Queue a resume of ``run_id``; returns the task result handle."""
    return resume_run_task.enqueue(run_id, deny_remaining=deny_remaining)


def enqueue_claimed_leg(lease: Lease) -> Any:
    """Queue the leg of a run claimed with ``services.claim_resume``; the task takes over
    the lease. If queueing fails the claim is released, so the run does not look busy."""
    try:
        return run_claimed_leg_task.enqueue(lease.run_id, lease.owner, lease.generation)
    except BaseException:
        leases.release(lease)
        raise


async def aenqueue_resume(run_id: str, *, deny_remaining: bool = False) -> Any:
    return await resume_run_task.aenqueue(run_id, deny_remaining=deny_remaining)
