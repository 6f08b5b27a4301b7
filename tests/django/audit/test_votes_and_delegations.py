"""The audit trail of organization-scale approvals: a vote that leaves a call waiting is
a *vote* record, the vote that decides it the *decision* record; a delegate's decision
names on whose behalf; delegations made and revoked are *delegation* records."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone

from deuz_django import audit, services
from deuz_django.approvals.delegated import delegate, revoke
from deuz_django.models import AuditRecord
from tests.django.agents import TOOL_PERMISSION
from tests.django.quorum_agents import FINANCE
from tests.django.run_support import approval, suspended

pytestmark = pytest.mark.django_db
MakeUser = Callable[..., User]


def test_a_vote_then_the_deciding_vote(make_user: MakeUser) -> None:
    finance = Group.objects.create(name=FINANCE)
    fin, fay = (
        make_user(n, "deuz_django.view_run", "deuz_django.decide_approval")
        for n in ("fin", "fay")
    )
    fin.groups.add(finance)
    fay.groups.add(finance)
    run = suspended("pair", owner=make_user("ann"))
    row = approval(run, "send_email")
    services.decide_approval(row, user=fin, approved=True)
    services.decide_approval(approval(run, "send_email"), user=fay, approved=True)
    records = list(
        AuditRecord.objects.filter(run_id=run.run_id).values_list(
            "action", "actor_name", "details__stage"
        )
    )
    assert records == [("vote", "fin", 1), ("decision", "fay", None)]
    assert audit.verify_chain().breaks == []


def test_a_delegates_decision_and_the_delegations_life(make_user: MakeUser) -> None:
    fin = make_user(
        "fin", "deuz_django.view_run", "deuz_django.decide_approval", TOOL_PERMISSION
    )
    bob = make_user("bob", "deuz_django.view_run")
    lent = delegate(fin, bob, ends_at=timezone.now() + timedelta(days=1))
    run = suspended(owner=make_user("ann"))
    services.decide_approval(approval(run, "send_email"), user=bob, approved=True)
    revoke(lent, by=fin)
    decision = AuditRecord.objects.get(action="decision")
    assert (decision.actor, decision.details["onBehalfOf"]) == ("bob", "fin")
    assert decision.details["delegation"] == lent.pk
    changes = list(
        AuditRecord.objects.filter(action="delegation").values_list(
            "actor_name", "details__change", "details__delegate"
        )
    )
    assert changes == [("fin", "made", "bob"), ("fin", "revoked", "bob")]
    assert audit.verify_chain().breaks == []
