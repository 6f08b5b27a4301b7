"""Background legs through ``django.tasks``: django-tasks-db and its ``db_worker`` in
production (RECIPES.md); with the immediate backend of development and tests, which would
run the task inside the caller, the leg is handed to this process instead
(``continuation.hand_off``). Every such leg was claimed first
(``enqueue_run(...)``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.tasks import TaskResultStatus
from django.test import override_settings

from deuz_django import services
from deuz_django.exceptions import RunBusy, RunNotResumable, RunQueued
from deuz_django.runs.continuing import join_handed_off
from deuz_django.runs.tasks import enqueue_claimed_leg
from deuz_django.storage import leases
from tests.django.agents import TOOL_PERMISSION
from tests.django.processes import run_manage
from tests.django.run_support import approval, background_leg, suspended

pytestmark = pytest.mark.django_db


@pytest.fixture
def ann(make_user: Callable[..., Any]) -> Any:
    return make_user("ann", TOOL_PERMISSION)  # may deny (not approve) her refunds


def decide_all(run: Any, user: Any) -> services.Decision:
    services.decide_approval(approval(run, "send_email"), user=user, approved=True)
    return services.decide_approval(approval(run, "refund"), user=user, approved=False)


@background_leg
def test_with_the_immediate_backend_the_leg_is_handed_off_not_run_in_the_caller(
    ann: Any, effects: Callable[[], list[str]]
) -> None:
    run = suspended(owner=ann)
    decision = decide_all(run, ann)
    assert decision.run_ready
    continuation = services.enqueue_run(run.run_id)
    assert continuation.task is None  # not queued: the backend would run it right here
    assert continuation.handed_off is not None
    join_handed_off()
    assert continuation.outcome is not None
    assert continuation.outcome.to_json() == {
        "runId": run.run_id,
        "status": "completed",
        "finishReason": "stop",
        "pendingApprovals": 0,
        "error": None,
    }
    assert effects() == ["send_email:ann@example.com"]


@background_leg
def test_a_busy_or_waiting_run_is_refused_when_claimed_and_nothing_is_queued(
    ann: Any,
) -> None:
    run = suspended(owner=ann)
    with pytest.raises(RunNotResumable, match="still waits for a verdict"):
        services.enqueue_run(run.run_id)
    lease = leases.acquire(run.run_id)
    with pytest.raises(RunBusy):
        services.enqueue_run(run.run_id, deny_remaining=True)
    leases.release(lease)
    continuation = services.enqueue_run(run.run_id, deny_remaining=True)
    join_handed_off()
    assert continuation.outcome is not None
    assert continuation.outcome.status == "completed"


def test_a_claimed_leg_runs_in_the_task_under_the_handed_over_lease(ann: Any) -> None:
    from deuz_django.runs.continuing import claim

    run = suspended(owner=ann)
    decide_all(run, ann)
    lease = claim(run.run_id, user=ann)
    result = enqueue_claimed_leg(lease)
    assert result.return_value["status"] == "completed"
    run.refresh_from_db()
    assert run.lease_owner == ""


def test_a_claimed_leg_whose_lease_was_taken_over_is_left_to_the_new_holder(
    ann: Any,
) -> None:
    from deuz_django.runs.continuing import claim

    run = suspended(owner=ann)
    decide_all(run, ann)
    stale = claim(run.run_id)
    run.__class__.objects.filter(pk=run.pk).update(lease_expires_at=None)
    holder = leases.acquire(run.run_id)  # the claim lapsed; recovery took the run
    assert enqueue_claimed_leg(stale).return_value == {
        "runId": run.run_id,
        "status": "busy",
    }
    run.refresh_from_db()
    assert (run.status, run.lease_generation) == ("suspended", holder.generation)


@pytest.mark.django_db(transaction=True)
def test_django_tasks_db_queues_the_resume_for_db_worker(
    ann: Any, effects: Callable[[], list[str]]
) -> None:
    from django_tasks_db.models import DBTaskResult

    run = suspended(owner=ann)
    decide_all(run, ann)
    with override_settings(
        TASKS={"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
    ):
        queued = services.enqueue_run(run.run_id).task
    assert queued.status == TaskResultStatus.READY
    run.refresh_from_db()
    assert run.status == "suspended"  # nothing ran in this process
    worker = run_manage(
        "db_worker", "--batch", "--no-startup-delay", "--no-reload", DEUZ_TASKS="db"
    )
    assert worker.returncode == 0, worker.stderr
    done = DBTaskResult.objects.get(pk=queued.id)
    assert done.status == TaskResultStatus.SUCCESSFUL
    assert done.return_value["status"] == "completed"
    run.refresh_from_db()
    assert run.status == "completed"
    assert effects() == ["send_email:ann@example.com"]


@pytest.mark.django_db(transaction=True)
def test_a_leg_queued_under_the_old_task_path_runs_after_the_move(
    ann: Any, effects: Callable[[], list[str]]
) -> None:
    """A task queued before the deploy that moved the modules names
    ``deuz_django.tasks.run_claimed_leg_task``: a worker after it still runs it."""
    from django_tasks_db.models import DBTaskResult

    run = suspended(owner=ann)
    decide_all(run, ann)
    with override_settings(
        TASKS={"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
    ):
        queued = services.enqueue_run(run.run_id).task
    DBTaskResult.objects.filter(pk=queued.id).update(
        task_path="deuz_django.tasks.run_claimed_leg_task"
    )
    worker = run_manage(
        "db_worker", "--batch", "--no-startup-delay", "--no-reload", DEUZ_TASKS="db"
    )
    assert worker.returncode == 0, worker.stderr
    assert DBTaskResult.objects.get(pk=queued.id).status == TaskResultStatus.SUCCESSFUL
    run.refresh_from_db()
    assert run.status == "completed"
    assert effects() == ["send_email:ann@example.com"]


@background_leg
def test_the_0_1_continue_run_still_works_and_names_the_verb_that_replaces_it(
    ann: Any,
) -> None:
    from deuz_django.runs.continuing import continue_run

    run = suspended(owner=ann)
    decide_all(run, ann)
    with pytest.warns(DeprecationWarning, match=r"use enqueue_run\(\)"):
        continue_run(run.run_id, in_process=False)
    join_handed_off()
    run.refresh_from_db()
    assert run.status == "completed"


@pytest.mark.django_db(transaction=True)
def test_a_run_queued_for_a_worker_that_never_came_is_said_to_be_queued_not_busy(
    ann: Any,
) -> None:
    """With a worker backend and no worker running, nothing claims a leg runs the run:
    the API, the admin and ``deuz resume`` say it is queued, and what happens then."""
    from deuz_django.runs.recovery import who_continues

    run = suspended(owner=ann)
    decide_all(run, ann)
    with override_settings(
        TASKS={"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
    ):
        continued = services.enqueue_run(run.run_id)
        where = who_continues(continued)
    assert where.startswith("it is queued for a worker (DatabaseBackend); if no worker")
    run.refresh_from_db()
    assert run.lease_owner.startswith(leases.QUEUED)
    with pytest.raises(RunQueued, match="queued for a worker that has not started it"):
        leases.acquire(run.run_id)
    resumed = run_manage("deuz", "resume", run.run_id)
    assert resumed.returncode == 1
    assert "is queued for a worker that has not started it yet" in resumed.stderr
    assert "busy" not in resumed.stderr


def test_a_worker_takes_a_queued_claim_over_under_its_own_name(ann: Any) -> None:
    from deuz_django.runs.continuing import claim

    run = suspended(owner=ann)
    decide_all(run, ann)
    queued = leases.queue(claim(run.run_id))
    mine = leases.take_over(queued)
    assert mine is not None
    assert not mine.owner.startswith(leases.QUEUED)
    assert mine.generation == queued.generation
    assert leases.take_over(queued) is None  # one worker takes it
    run.refresh_from_db()
    assert run.lease_owner == mine.owner
    leases.release(mine)
