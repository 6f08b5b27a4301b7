"""Legs in the background, through Django's tasks framework (``django.tasks``).

Which process runs a queued leg is the ``TASKS`` setting's business, never this module's:

- production: a worker backend — django-tasks-db (``manage.py db_worker``),
  django-tasks-rq (``manage.py rqworker``) or django-tasks-celery (``celery worker``);
  docs/production.md, "Task workers", says how to set each up and which to choose;
- development and tests: ``django.tasks.backends.immediate.ImmediateBackend``, which runs
  a task inside the call that queues it. No request may wait for a leg, so a
  continuation does not queue one there (:func:`runs_in_caller`) but hands it to this
  process's event loop or a thread (:func:`deuz_django.runs.continuing.hand_off`);
  ``deuz_django.W007`` (a deploy check) says that legs then run in the web server's
  processes. A sweep that finds no event loop still queues its legs, so runs them in the
  sweeper's own thread.

Every queued leg was claimed first (:mod:`deuz_django.runs.continuing`), the claim marked
queued (:func:`deuz_django.storage.leases.queue`) so that nobody is told a leg runs it
while it waits for a worker: the task takes the claim's lease over. A claim that lapsed
and was taken over meanwhile is left to its new holder. ``deuz_django.E005`` reports a
backend that cannot run these tasks.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.tasks import task
from django.tasks.backends.immediate import ImmediateBackend

from ..storage import leases
from ..storage.leases import Lease
from . import draining
from .claims import run_legs
from .outcomes import LegOutcome


@task
def run_claimed_leg_task(run_id: str, owner: str, generation: int) -> dict[str, Any]:
    """Run the leg of a claimed run under the lease handed over, and the next ones while
    standing rules or grants decide what it suspends on (the last leg's JSON outcome)."""
    draining.install()  # a worker's SIGTERM lets this leg reach a boundary first
    return async_to_sync(_run_claimed_leg)(Lease(run_id, owner, generation))


async def _run_claimed_leg(lease: Lease) -> dict[str, Any]:
    if draining.stopping():  # this worker is shutting down: leave the run to another
        await sync_to_async(leases.release)(lease)
        return {"runId": lease.run_id, "status": "stopping"}
    mine = await sync_to_async(leases.take_over)(lease)
    if mine is None:
        return {"runId": lease.run_id, "status": "busy"}
    outcome: LegOutcome = await run_legs(mine)
    return outcome.to_json()


def enqueue_claimed_leg(lease: Lease) -> Any:
    """Queue the leg of a claimed run, the claim marked queued; the task takes the lease
    over. If queueing fails the claim is released, so the run does not look busy."""
    try:
        queued = leases.queue(lease)
    except BaseException:
        leases.release(lease)
        raise
    try:
        return run_claimed_leg_task.enqueue(
            queued.run_id, queued.owner, queued.generation
        )
    except BaseException:
        leases.release(queued)
        raise


def runs_in_caller() -> bool:
    """Whether the resume task's backend runs a task inside the call that queues it (the
    immediate backend: ``enqueue`` returns once the task ended) instead of in a worker."""
    return isinstance(run_claimed_leg_task.get_backend(), ImmediateBackend)
