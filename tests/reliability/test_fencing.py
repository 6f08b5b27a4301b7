"""Fencing: a leg whose lease was taken over (it stalled past expiry and another process
took the run) may finish its tool call, but can no longer write the run (DESIGN §4)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connections
from django.utils import timezone

from deuz_django import services
from deuz_django.core.testing.contracts import make_checkpoint
from deuz_django.exceptions import LeaseLost
from deuz_django.models import Run
from deuz_django.storage import leases
from deuz_django.storage.leases import Lease
from deuz_django.storage.store import DjangoSessionStore
from tests.django import agents
from tests.django.run_support import ready_to_resume, stored_rows

pytestmark = pytest.mark.django_db(transaction=True)


def take_over(run_id: str) -> Lease:
    """What another process does once the lease lapsed: take the run."""
    Run.objects.filter(run_id=run_id).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    return leases.acquire(run_id, owner="new-holder")


def test_a_stale_store_cannot_write_the_run_or_its_sub_agents() -> None:
    DjangoSessionStore().save(make_checkpoint("run-f"))
    DjangoSessionStore().save(make_checkpoint("run-f::child#c1"))
    stale_lease = leases.acquire("run-f")
    lost: list[BaseException] = []
    stale = DjangoSessionStore(lease=stale_lease, on_lease_lost=lost.append)
    stale.load("run-f")
    stale.save(make_checkpoint("run-f", 2))  # still ours
    new_lease = take_over("run-f")
    assert new_lease.generation == stale_lease.generation + 1
    for run_id in ("run-f", "run-f::child#c1"):
        with pytest.raises(LeaseLost, match="was taken over"):
            stale.save(make_checkpoint(run_id, 9))
    assert len(lost) == 2
    assert {r.run_id: r.step_index for r in Run.objects.all()} == {
        "run-f": 2,
        "run-f::child#c1": 1,
    }
    leases.release(stale_lease)  # a stale release leaves the new holder's lease alone
    assert Run.objects.get(run_id="run-f").lease_owner == "new-holder"
    fresh = DjangoSessionStore(lease=new_lease)
    fresh.save(make_checkpoint("run-f", 3))
    assert Run.objects.get(run_id="run-f").step_index == 3


def test_a_stale_store_cannot_append_to_the_runs_it_remembers() -> None:
    # The one-statement append (deuz_django.storage.writes) carries the same fence.
    DjangoSessionStore().save(make_checkpoint("run-f"))
    stale_lease = leases.acquire("run-f")
    stale = DjangoSessionStore(lease=stale_lease)
    for run_id in ("run-f", "run-f::child#c1"):
        stale.save(make_checkpoint(run_id, 2))  # remembered from here on
    take_over("run-f")
    for run_id in ("run-f", "run-f::child#c1"):
        with pytest.raises(LeaseLost, match="was taken over"):
            stale.save(make_checkpoint(run_id, 3))
    assert {r.run_id: r.step_index for r in Run.objects.all()} == {
        "run-f": 2,
        "run-f::child#c1": 2,
    }


def test_a_leg_taken_over_inside_its_tool_writes_nothing_after(
    make_user: Callable[..., Any],
    effects: Callable[[], list[str]],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    run = ready_to_resume(make_user("ann"))
    before = (stored_rows(run), Run.objects.get(pk=run.pk).step_index)
    taken: list[Lease] = []

    def stall_and_lose_the_lease() -> None:  # runs in the tool's worker thread
        try:
            taken.append(take_over(run.run_id))
        finally:
            connections.close_all()

    monkeypatch.setattr(agents, "HOLD_HOOKS", [stall_and_lose_the_lease])
    with caplog.at_level(logging.ERROR, logger="deuz_django"):
        outcome = services.resume_run(run.run_id)
    assert outcome.error is not None
    assert "was taken over" in outcome.error
    # The fence before its next model call stopped the stale leg: it wrote nothing.
    assert effects() == ["hold:once"]
    run.refresh_from_db()
    assert (stored_rows(run), run.step_index) == before
    assert (run.status, run.lease_owner, run.last_error) == (
        "suspended",
        "new-holder",
        "",
    )

    # The new holder drives the run on; the stale leg's step was never checkpointed,
    # but its tool's outcome is in the step journal, so the tool does not run again.
    monkeypatch.setattr(agents, "HOLD_HOOKS", [])
    leases.release(taken[0])
    assert services.resume_run(run.run_id).status == "completed"
    assert effects() == ["hold:once"]
