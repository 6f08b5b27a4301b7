"""Background resume through Django's tasks framework (``django.tasks``)."""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django.tasks import task

from .exceptions import RunBusy, RunNotResumable
from .services import aresume_run


@task
def resume_run_task(run_id: str, deny_remaining: bool = False) -> dict[str, Any]:
    """Resume ``run_id`` in whatever process runs the task; a busy run is left to its leg."""
    try:
        outcome = async_to_sync(aresume_run)(run_id, deny_remaining=deny_remaining)
    except RunBusy:
        return {"runId": run_id, "status": "busy"}
    except RunNotResumable as error:
        return {"runId": run_id, "status": "not-resumable", "detail": str(error)}
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


async def aenqueue_resume(run_id: str, *, deny_remaining: bool = False) -> Any:
    return await resume_run_task.aenqueue(run_id, deny_remaining=deny_remaining)
