"""Quorum and ordered stages: a call decided by M approvals from distinct people of a
group, stage after stage; a denial vetoes; the run resumes once, when the last stage's
quorum is met — also when two approvers complete it at the same instant."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, connections
from django.utils import timezone

from deuz_django import services
from deuz_django.approvals.delegated import delegate
from deuz_django.exceptions import NotPermitted
from deuz_django.models import (
    Approval,
    ApprovalStatus,
    ApprovalVote,
    Run,
    StandingRule,
)
from deuz_django.quorum import ApprovalChain, Stage
from deuz_django.quorum.progress import progress_of
from deuz_django.registry import AgentSpec
from tests.django.agents import TOOL_PERMISSION, refund
from tests.django.quorum_agents import FINANCE, LEADS
from tests.django.run_support import PROMPT, approval, suspended

MakeUser = Callable[..., User]
DECIDES = ("deuz_django.view_run", "deuz_django.decide_approval")


def member(make_user: MakeUser, name: str, group: str, *perms: str) -> User:
    user = make_user(name, *DECIDES, *perms, staff=True)
    user.groups.add(Group.objects.get_or_create(name=group)[0])
    return user


def vote(user: User, row: Approval, approved: bool = True) -> Any:
    return services.decide_approval(
        Approval.objects.get(pk=row.pk), user=user, approved=approved, reason="ok"
    )


@pytest.fixture
def pair(make_user: MakeUser) -> Run:
    return suspended("pair", owner=make_user("ann"))


@pytest.mark.django_db
def test_two_of_a_group_approve_and_only_then_the_call_is_approved(
    make_user: MakeUser, pair: Run
) -> None:
    fin, fay = (member(make_user, n, FINANCE) for n in ("fin", "fay"))
    row = approval(pair, "send_email")
    first = vote(fin, row)
    assert (first.approval.status, first.run_ready) == (ApprovalStatus.PENDING, False)
    progress = progress_of(first.approval)
    assert progress is not None
    assert progress.summary == "1 of 2 approvals"
    assert progress.approvals == (("fin", None),)
    assert progress.may_still == ("fay",)
    second = vote(fay, row)
    assert (second.approval.status, second.run_ready) == (ApprovalStatus.APPROVED, True)
    assert second.approval.decided_by == fay
    assert progress_of(second.approval) is None
    assert list(row.votes.values_list("voter__username", flat=True)) == ["fin", "fay"]


@pytest.mark.django_db
def test_one_person_counts_once_and_outsiders_are_refused(
    make_user: MakeUser, pair: Run
) -> None:
    fin = member(make_user, "fin", FINANCE)
    outsider = make_user("out", *DECIDES, staff=True)
    row = approval(pair, "send_email")
    vote(fin, row)
    with pytest.raises(NotPermitted, match="voted on this call already"):
        vote(fin, row)
    with pytest.raises(NotPermitted, match="decided by Finance"):
        vote(outsider, row)
    assert approval(pair, "send_email").status == ApprovalStatus.PENDING
    assert ApprovalVote.objects.count() == 1


@pytest.mark.django_db
def test_a_denial_vetoes_at_once(make_user: MakeUser, pair: Run) -> None:
    fin, fay = (member(make_user, n, FINANCE) for n in ("fin", "fay"))
    row = approval(pair, "send_email")
    vote(fin, row)
    denied = vote(fay, row, approved=False)
    assert (denied.approval.status, denied.run_ready) == (ApprovalStatus.DENIED, True)


@pytest.mark.django_db
def test_the_owner_may_always_deny_their_own_call(
    make_user: MakeUser, pair: Run
) -> None:
    row = approval(pair, "send_email")
    denied = vote(pair.owner, row, approved=False)
    assert denied.approval.status == ApprovalStatus.DENIED


@pytest.mark.django_db
def test_stage_two_is_asked_only_after_stage_one_with_its_own_deadline(
    make_user: MakeUser,
) -> None:
    run = suspended("chain", owner=make_user("ann"))
    lead = member(make_user, "lead", LEADS, TOOL_PERMISSION)  # the tool's rule holds
    fin, fay = (member(make_user, n, FINANCE, TOOL_PERMISSION) for n in ("fin", "fay"))
    row = approval(run, "refund")
    assert row.deadline_at is None  # stage 1 waits for a person
    with pytest.raises(NotPermitted, match="decided by Team leads"):
        vote(fin, row)
    after_lead = vote(lead, row).approval
    assert (after_lead.status, after_lead.stage) == (ApprovalStatus.PENDING, 1)
    assert after_lead.deadline_at is not None
    assert after_lead.deadline_at - timezone.now() > timedelta(minutes=59)
    progress = progress_of(after_lead)
    assert progress is not None
    assert progress.summary == "0 of 2 approvals · stage 2 of 2"
    with pytest.raises(NotPermitted, match="voted on this call already"):
        vote(lead, row)  # a lead who also held the permission would not count twice
    vote(fin, row)
    done = vote(fay, row)
    assert (done.approval.status, done.run_ready) == (ApprovalStatus.APPROVED, True)


@pytest.mark.django_db
def test_a_delegate_votes_with_the_delegators_membership(
    make_user: MakeUser, pair: Run
) -> None:
    fin, fay = (member(make_user, n, FINANCE) for n in ("fin", "fay"))
    bob = make_user("bob", "deuz_django.view_run", staff=True)
    delegate(fin, bob, ends_at=timezone.now() + timedelta(days=1))
    row = approval(pair, "send_email")
    vote(bob, row)
    progress = progress_of(Approval.objects.get(pk=row.pk))
    assert progress is not None
    assert progress.approvals == (("bob", "fin"),)
    assert vote(fay, row).approval.status == ApprovalStatus.APPROVED


@pytest.mark.django_db
def test_standing_rules_never_approve_a_chained_call_but_deny_rules_deny_it(
    make_user: MakeUser,
) -> None:
    root = make_user("root", superuser=True)
    StandingRule.objects.create(
        tool_name="send_email", action="approve", reason="always", created_by=root
    )
    waiting = approval(suspended("pair", owner=make_user("ann")), "send_email")
    assert (waiting.status, waiting.decided_by_rule) == (ApprovalStatus.PENDING, None)
    StandingRule.objects.create(
        tool_name="send_email", action="deny", reason="never", created_by=root
    )
    run = services.start_run(agent="pair", messages=PROMPT, owner=make_user("cy"))
    services.resume_run(run.run_id)  # denied at once: the run goes on and completes
    assert approval(run, "send_email").status == ApprovalStatus.DENIED


def test_a_chain_names_a_tool_that_needs_approval() -> None:
    with pytest.raises(ImproperlyConfigured, match="no such tool"):
        AgentSpec(
            model=object(),  # type: ignore[arg-type]
            tools=[refund],
            approval_chains={"nope": ApprovalChain(Stage("group:x"))},
        )
    with pytest.raises(ImproperlyConfigured, match=r"Stage\.quorum"):
        Stage("group:x", quorum=0)
    with pytest.raises(ImproperlyConfigured, match=r"Stage\.approvers"):
        Stage("finance")


@pytest.mark.django_db(transaction=True)
def test_two_approvers_completing_the_quorum_at_once_decide_it_once(
    make_user: MakeUser,
) -> None:
    """PostgreSQL: both votes are written; the call's row lock lets one of them count
    two, so one verdict approves the call and the run is ready once."""
    if connection.vendor != "postgresql":
        pytest.skip("concurrent transactions are PostgreSQL's here")
    run = suspended("pair", owner=make_user("ann"))
    voters = [member(make_user, n, FINANCE) for n in ("fin", "fay")]
    row = approval(run, "send_email")
    start = threading.Barrier(2)
    ready: list[bool] = []
    errors: list[BaseException] = []

    def approve(user: User) -> None:
        try:
            start.wait(10)
            ready.append(vote(user, row).run_ready)
        except BaseException as error:
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=approve, args=(u,)) for u in voters]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert sorted(ready) == [False, True]
    assert approval(run, "send_email").status == ApprovalStatus.APPROVED
    assert ApprovalVote.objects.filter(approval=row).count() == 2


@pytest.mark.django_db
def test_a_chained_call_is_approved_as_asked_never_edited(
    make_user: MakeUser,
) -> None:
    run = suspended("pair", owner=make_user("ann"))
    fin = member(make_user, "fin", FINANCE, "deuz_django.edit_approval_input")
    with pytest.raises(NotPermitted, match="approved as asked"):
        services.decide_approval(
            approval(run, "send_email"),
            user=fin,
            approved=True,
            edited_input={"to": "bob@example.com"},
        )
    assert not ApprovalVote.objects.exists()
