"""Delegation: a delegate decides what their delegator may decide, while the delegation
is in force, on runs the delegate may see; the decision says "on behalf of"; rights
lent pass no further; separation of duties holds for each person; a revocation is
immediate — also against a verdict being recorded at that moment."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection, connections
from django.utils import timezone

from deuz_django import services
from deuz_django.approvals import delegated
from deuz_django.approvals.delegated import delegate, revoke
from deuz_django.exceptions import ApprovalNotFound, NotPermitted
from deuz_django.models import Approval, ApprovalStatus, Delegation, Run
from deuz_django.permissions import may_decide_some
from tests.django.agents import TOOL_PERMISSION
from tests.django.run_support import approval, suspended

MakeUser = Callable[..., User]
DECIDES = ("deuz_django.view_run", "deuz_django.decide_approval", TOOL_PERMISSION)
SEES = ("deuz_django.view_run",)


@pytest.fixture
def fin(make_user: MakeUser) -> User:
    """Staff who may decide any approval, refunds included."""
    return make_user("fin", *DECIDES, staff=True)


@pytest.fixture
def bob(make_user: MakeUser) -> User:
    """Staff who may see runs, and decide nothing of their own."""
    return make_user("bob", *SEES, staff=True)


@pytest.fixture
def run(make_user: MakeUser) -> Run:
    return suspended(owner=make_user("ann"))


def lend(delegator: User, to: User, **period: Any) -> Delegation:
    return delegate(delegator, to, ends_at=timezone.now() + timedelta(days=7), **period)


def approve(user: User, run: Run, tool: str = "send_email") -> Approval:
    services.decide_approval(approval(run, tool), user=user, approved=True)
    return Approval.objects.get(pk=approval(run, tool).pk)


@pytest.mark.django_db
def test_a_delegate_decides_on_behalf_of_their_delegator(
    fin: User, bob: User, run: Run
) -> None:
    lent = lend(fin, bob)
    decided = approve(bob, run, "refund")  # needs fin's refund permission
    assert decided.status == ApprovalStatus.APPROVED
    assert (decided.decided_by, decided.decided_on_behalf_of) == (bob, fin)
    assert decided.delegation == lent
    assert decided.decider == "bob on behalf of fin"
    assert list(lent.decisions.all()) == [decided]


@pytest.mark.django_db
def test_own_rights_record_no_delegation(fin: User, bob: User, run: Run) -> None:
    lend(bob, fin)
    decided = approve(fin, run)
    assert (decided.decided_by, decided.decided_on_behalf_of) == (fin, None)
    assert decided.decider == "fin"


@pytest.mark.django_db
def test_without_a_delegation_in_force_the_delegate_is_refused(
    fin: User, bob: User, run: Run
) -> None:
    with pytest.raises(NotPermitted):
        approve(bob, run)
    revoked = lend(fin, bob)
    revoke(revoked)
    later = lend(fin, bob, starts_at=timezone.now() + timedelta(days=1))
    assert not later.in_force
    ended = lend(fin, bob)
    Delegation.objects.filter(pk=ended.pk).update(
        starts_at=timezone.now() - timedelta(days=2),
        ends_at=timezone.now() - timedelta(days=1),
    )
    with pytest.raises(NotPermitted):
        approve(bob, run)
    assert approval(run, "send_email").status == ApprovalStatus.PENDING
    assert not may_decide_some(bob)
    lend(fin, bob)
    assert may_decide_some(bob)


@pytest.mark.django_db
def test_a_delegate_sees_no_more_runs_than_their_own_rights_show(
    fin: User, make_user: MakeUser, run: Run
) -> None:
    blind = make_user("blind", staff=True)
    lend(fin, blind)
    with pytest.raises(ApprovalNotFound):
        approve(blind, run)


@pytest.mark.django_db
def test_rights_lent_to_someone_pass_no_further(
    fin: User, bob: User, make_user: MakeUser, run: Run
) -> None:
    carl = make_user("carl", *SEES, staff=True)
    lend(fin, bob)
    lend(bob, carl)  # bob may lend only his own rights: none to decide
    with pytest.raises(NotPermitted):
        approve(carl, run)


@pytest.mark.django_db
def test_separation_of_duties_holds_on_anyones_behalf(
    fin: User, make_user: MakeUser
) -> None:
    owner = make_user("owner", *SEES)
    run = suspended(owner=owner)
    lend(fin, owner)
    with pytest.raises(NotPermitted):
        approve(owner, run, "refund")  # refund keeps owners from approving
    services.decide_approval(approval(run, "refund"), user=owner, approved=False)
    assert approval(run, "refund").status == ApprovalStatus.DENIED


@pytest.mark.django_db
def test_a_delegation_is_lent_to_someone_else_for_a_period_that_is_to_come(
    fin: User, bob: User, make_user: MakeUser
) -> None:
    with pytest.raises(ValueError, match="yourself"):
        lend(fin, fin)
    gone = make_user("gone")
    gone.is_active = False
    with pytest.raises(ValueError, match="not active"):
        lend(fin, gone)
    with pytest.raises(ValueError, match="passed"):
        delegate(fin, bob, ends_at=timezone.now() - timedelta(minutes=1))
    with pytest.raises(ValueError, match="after startsAt"):
        delegate(
            fin,
            bob,
            starts_at=timezone.now() + timedelta(days=2),
            ends_at=timezone.now() + timedelta(days=1),
        )
    assert not Delegation.objects.exists()


@pytest.mark.django_db
def test_a_verdict_after_the_revocation_is_refused_and_writes_nothing(
    fin: User, bob: User, run: Run
) -> None:
    lent = lend(fin, bob)
    row = approval(run, "send_email")
    assert revoke(lent)
    assert not revoke(lent)  # once
    with pytest.raises(NotPermitted):
        services.decide_approval(row, user=bob, approved=True)
    row.refresh_from_db()
    assert (row.status, row.decided_by, row.delegation) == ("pending", None, None)


@pytest.fixture
def paused_in_verdict(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """The delegate's verdict stops right after it locked its delegation, until the
    test sets the returned event; ``held`` is set once it holds the lock."""
    go = threading.Event()
    held = threading.Event()
    hold = delegated.hold_in_force

    def hold_then_wait(lent: Delegation) -> None:
        hold(lent)
        held.set()
        assert go.wait(30)

    monkeypatch.setattr("deuz_django.approvals.verdicts.hold_in_force", hold_then_wait)
    go.held = held  # type: ignore[attr-defined]
    yield go
    go.set()


@pytest.mark.django_db(transaction=True)
def test_a_revocation_racing_a_verdict_in_flight_waits_for_it(
    fin: User, bob: User, run: Run, paused_in_verdict: threading.Event
) -> None:
    """PostgreSQL: the verdict holds the delegation's row; the revocation waits for it
    to be written, then takes effect — for every later verdict."""
    if connection.vendor != "postgresql":
        pytest.skip("row locks are PostgreSQL's (SQLite runs one writer at a time)")
    lent = lend(fin, bob)
    row = approval(run, "send_email")
    errors: list[BaseException] = []

    def verdict() -> None:
        try:
            services.decide_approval(row, user=bob, approved=True)
        except BaseException as error:  # reported by the test
            errors.append(error)
        finally:
            connections.close_all()

    deciding = threading.Thread(target=verdict)
    deciding.start()
    assert paused_in_verdict.held.wait(30)  # type: ignore[attr-defined]
    revoking = threading.Thread(target=lambda: (revoke(lent), connections.close_all()))
    revoking.start()
    revoking.join(1.0)
    assert revoking.is_alive()  # blocked on the verdict's lock
    paused_in_verdict.set()
    deciding.join(30)
    revoking.join(30)
    assert errors == []
    row.refresh_from_db()
    lent.refresh_from_db()
    assert (row.status, row.decided_on_behalf_of, row.delegation) == (
        ApprovalStatus.APPROVED,
        fin,
        lent,
    )
    assert lent.revoked_at is not None
    with pytest.raises(NotPermitted):
        approve(bob, run, "refund")
