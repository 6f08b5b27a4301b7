"""The run lease: a compare-and-set claim with a fencing generation."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from deuz_django.exceptions import RunBusy, RunNotFound
from deuz_django.models import Run
from deuz_django.storage import leases

pytestmark = pytest.mark.django_db


@pytest.fixture
def run() -> Run:
    return Run.objects.create(run_id="run-l", agent="scripted")


def test_a_lease_is_taken_once_until_released(run: Run) -> None:
    first = leases.acquire(run.run_id, owner="a")
    assert (first.owner, first.generation) == ("a", 1)
    with pytest.raises(RunBusy, match="Run 'run-l' is busy"):
        leases.acquire(run.run_id, owner="b")
    leases.release(first)
    run.refresh_from_db()
    assert (run.lease_owner, run.lease_expires_at) == ("", None)
    assert leases.acquire(run.run_id, owner="b").generation == 2


def test_an_expired_lease_can_be_taken_over_and_the_old_holder_is_fenced(
    run: Run,
) -> None:
    old = leases.acquire(run.run_id, owner="a")
    Run.objects.filter(pk=run.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    new = leases.acquire(run.run_id, owner="b")
    assert new.generation == old.generation + 1
    assert not leases.renew(old)
    leases.release(old)
    run.refresh_from_db()
    assert run.lease_owner == "b"
    assert leases.renew(new)


def test_renewing_pushes_the_expiry_forward(run: Run) -> None:
    lease = leases.acquire(run.run_id)
    Run.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now())
    assert leases.renew(lease)
    run.refresh_from_db()
    assert run.lease_expires_at is not None
    assert run.lease_expires_at > timezone.now() + timedelta(seconds=20)


def test_a_lease_on_an_unknown_run_is_not_found() -> None:
    with pytest.raises(RunNotFound):
        leases.acquire("no-such-run")


def test_owner_names_tell_holders_apart() -> None:
    assert leases.new_owner() != leases.new_owner()
