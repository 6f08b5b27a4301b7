"""Standing rules decide the calls a run suspends on: with their maker's rights (so never
past separation of duties), deny before approve, only gated calls (never a call in
doubt), each decision on the audit trail naming the rule — and a run they carry
continues at once, to its end, with no person."""

from __future__ import annotations

import io
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.db import DatabaseError
from django.db.models import RestrictedError
from django.utils import timezone

from deuz_django import services, signals
from deuz_django.deadlines import sweep as deadline_sweep
from deuz_django.exceptions import RunBusy
from deuz_django.models import (
    Approval,
    ApprovalKind,
    ApprovalStatus,
    Run,
    RunStatus,
    StandingRule,
)
from tests.api.support import started
from tests.django.agents import TOOL_PERMISSION
from tests.django.run_support import in_doubt, let_time_pass

pytestmark = pytest.mark.django_db(transaction=True)
MakeUser = Callable[..., User]
FINANCE = ("deuz_django.view_run", "deuz_django.decide_approval", TOOL_PERMISSION)


@pytest.fixture
def fin(make_user: MakeUser) -> User:
    """Finance staff: may see every run and approve refunds (the tool's permission)."""
    return make_user("fin", *FINANCE)


def rule(maker: User | None, tool: str, condition: Any = (), **fields: Any) -> Any:
    fields.setdefault("action", "approve")
    fields.setdefault("reason", f"Standing rule for {tool}.")
    return StandingRule.objects.create(
        tool_name=tool, condition=list(condition), created_by=maker, **fields
    )


def small(amount: float = 10) -> list[dict[str, Any]]:
    return [{"field": "amount", "op": "<=", "value": amount}]


def rows(run: Run) -> dict[str, Approval]:
    return {
        a.approval_id: a
        for a in Approval.objects.filter(run=run).select_related(
            "run", "decided_by_rule__created_by", "decided_by_grant"
        )
    }


def test_rules_decide_every_call_and_the_run_completes_with_no_person(
    ann: User, fin: User, effects: Callable[[], list[str]]
) -> None:
    refunds = rule(fin, "refund", small(), reason="Refunds up to $10 are routine.")
    emails = rule(fin, "send_email", reason="Emails to customers are fine.")

    run = started(ann)

    assert run.status == RunStatus.COMPLETED
    assert sorted(effects()) == ["refund:A-1", "send_email:ann@example.com"]
    decided = rows(run)
    assert decided["r1"].decided_by_rule == refunds
    assert decided["e1"].decided_by_rule == emails
    r1 = decided["r1"]
    assert (r1.status, r1.decided_by, r1.reason) == (
        ApprovalStatus.APPROVED,
        None,
        "Refunds up to $10 are routine.",
    )
    assert r1.decider == (
        f"rule #{refunds.pk}: approve refund, when amount <= 10, made by fin"
    )


def test_the_run_continues_in_the_same_place_and_the_outcome_is_the_last_legs(
    ann: User, fin: User
) -> None:
    rule(fin, "refund")
    rule(fin, "send_email")
    run = services.start_run(
        agent="gated", messages=[{"role": "user", "content": "go"}], owner=ann
    )

    outcome = services.resume_run(run.run_id)

    assert (outcome.status, outcome.pending_approvals) == (RunStatus.COMPLETED, 0)
    run.refresh_from_db()
    assert run.lease_owner == ""


def test_a_call_no_rule_covers_waits_for_a_person_and_the_run_does_not_continue(
    ann: User, fin: User, effects: Callable[[], list[str]]
) -> None:
    rule(fin, "refund", small(4))  # the call asks for 5.0
    rule(fin, "send_email")

    run = started(ann)

    assert run.status == RunStatus.SUSPENDED
    decided = rows(run)
    assert decided["r1"].is_pending
    assert decided["e1"].status == ApprovalStatus.APPROVED
    assert effects() == []  # nothing runs before every call is decided


def test_a_deny_rule_beats_an_approve_rule_and_the_tool_never_runs(
    ann: User, fin: User, effects: Callable[[], list[str]]
) -> None:
    rule(fin, "refund", small(100))
    deny = rule(fin, "refund", action="deny", reason="Refunds are frozen.")
    rule(fin, "send_email")

    run = started(ann)

    assert run.status == RunStatus.COMPLETED
    r1 = rows(run)["r1"]
    assert (r1.status, r1.reason, r1.decided_by_rule) == (
        ApprovalStatus.DENIED,
        "Refunds are frozen.",
        deny,
    )
    assert effects() == ["send_email:ann@example.com"]


def test_a_deny_rule_its_maker_may_not_give_leaves_the_call_to_a_person(
    ann: User, fin: User, make_user: MakeUser
) -> None:
    rule(fin, "refund")
    rule(make_user("intern", "deuz_django.view_run"), "refund", action="deny")

    run = started(ann)

    assert rows(run)["r1"].is_pending  # not approved past a deny rule, not denied


def test_a_rule_the_runs_owner_made_never_approves_what_they_may_not(
    make_user: MakeUser,
) -> None:
    """Separation of duties: the owner holds every permission, but may not approve
    their own refund — nor may a rule they made."""
    boss = make_user("boss", *FINANCE)
    rule(boss, "refund")
    rule(boss, "send_email")

    run = started(boss)

    decided = rows(run)
    assert decided["r1"].is_pending
    assert decided["e1"].status == ApprovalStatus.APPROVED  # the owner may approve it


def test_a_superuser_owners_rule_stops_at_separation_of_duties_too(
    make_user: MakeUser,
) -> None:
    root = make_user("root", superuser=True)
    rule(root, "refund")

    assert rows(started(root))["r1"].is_pending


@pytest.mark.parametrize(
    "change",
    [
        {"active": False},
        {"expires_at": timezone.now() - timedelta(seconds=1)},
        {"agent": "payer"},  # another agent's runs only
        {"created_by": None},  # its maker was deleted
    ],
)
def test_a_rule_out_of_force_or_out_of_scope_decides_nothing(
    ann: User, fin: User, change: dict[str, Any]
) -> None:
    made = rule(fin, "refund")
    StandingRule.objects.filter(pk=made.pk).update(**change)

    assert rows(started(ann))["r1"].is_pending


def test_a_rule_whose_maker_lost_the_right_decides_nothing(
    ann: User, make_user: MakeUser
) -> None:
    former = make_user("former", *FINANCE)
    rule(former, "refund")
    former.is_active = False
    former.save()

    assert rows(started(ann))["r1"].is_pending


def test_a_rule_for_an_agent_applies_to_that_agents_runs(ann: User, fin: User) -> None:
    rule(fin, "refund", agent="gated")

    assert rows(started(ann))["r1"].status == ApprovalStatus.APPROVED


def test_a_value_of_the_wrong_kind_never_matches(ann: User, fin: User) -> None:
    rule(fin, "refund", [{"field": "amount", "op": "<=", "value": "10"}])
    rule(fin, "refund", [{"field": "order_id", "op": ">", "value": 0}])

    assert rows(started(ann))["r1"].is_pending


def test_a_condition_stored_malformed_past_the_admin_is_ignored_not_raised(
    ann: User, fin: User
) -> None:
    made = rule(fin, "refund")
    StandingRule.objects.filter(pk=made.pk).update(condition={"amount": 5})

    run = started(ann)

    assert run.status == RunStatus.SUSPENDED
    assert rows(run)["r1"].is_pending


def test_a_call_whose_stored_token_fails_is_never_approved_by_a_rule(
    ann: User, fin: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deuz_django.rules import automatic

    rule(fin, "send_email")
    refused = automatic.state_refusal

    def tampered(approval: Approval, verdict: Any) -> Any:
        approval.token = approval.token[:-2] + "xx"
        return refused(approval, verdict)

    monkeypatch.setattr(automatic, "state_refusal", tampered)

    assert rows(started(ann))["e1"].is_pending


def test_a_rule_never_answers_a_call_a_crash_left_in_doubt(ann: User) -> None:
    rule(ann, "slow")  # ann may decide calls on her own run

    run = in_doubt(ann)

    [row] = Approval.objects.filter(run=run)
    assert (row.kind, row.status) == (ApprovalKind.OUTCOME_UNKNOWN, "pending")


def test_a_sub_agents_call_is_decided_by_a_rule_for_its_tool(ann: User) -> None:
    rule(ann, "send_email", [{"field": "to", "op": "==", "value": "bob@example.com"}])

    run = started(ann, agent="nested")

    assert run.status == RunStatus.COMPLETED
    [row] = Approval.objects.filter(run=run)
    assert (row.agent_path, row.status) == (["researcher"], ApprovalStatus.APPROVED)


def test_decisions_are_signalled_naming_the_rule_and_nobody_is_asked(
    ann: User, fin: User
) -> None:
    made = rule(fin, "refund")
    decided: list[Approval] = []
    asked: list[Approval] = []

    def on_decided(sender: Any, approval: Approval, **kwargs: Any) -> None:
        decided.append(approval)

    def on_asked(sender: Any, approval: Approval, **kwargs: Any) -> None:
        asked.append(approval)

    signals.approval_decided.connect(on_decided)
    signals.approval_requested.connect(on_asked)
    try:
        started(ann)
    finally:
        signals.approval_decided.disconnect(on_decided)
        signals.approval_requested.disconnect(on_asked)

    assert [(a.approval_id, a.decided_by_rule) for a in decided] == [("r1", made)]
    assert [a.approval_id for a in asked] == ["e1"]  # only the call left for a person


def test_after_so_many_automatic_decisions_in_a_row_a_person_decides(
    ann: User, settings: Any
) -> None:
    """A model that keeps asking cannot loop unattended: the fourth call waits."""
    settings.DEUZ = {**settings.DEUZ, "MAX_AUTOMATIC_DECISIONS": 3}
    rule(ann, "send_email", action="deny", reason="No more emails.")

    run = started(ann, agent="repeater")

    assert run.status == RunStatus.SUSPENDED
    assert list(
        Approval.objects.filter(run=run).values_list("approval_id", "status")
    ) == [
        ("m0", "denied"),
        ("m1", "denied"),
        ("m2", "denied"),
        ("m3", "pending"),
    ]
    # A person's verdict starts the count afresh.
    services.decide_approval(
        Approval.objects.get(run=run, approval_id="m3"), user=ann, approved=False
    )
    services.resume_run(run.run_id)
    statuses = Approval.objects.filter(run=run).values_list("status", flat=True)
    assert list(statuses)[4:] == ["denied", "denied", "denied", "pending"]


def test_a_call_that_timed_out_does_not_start_the_count_afresh(
    ann: User, settings: Any
) -> None:
    """Only a person's verdict does: after a timeout the run goes on with no person, so
    its next call waits for one instead of being decided automatically."""
    settings.DEUZ = {**settings.DEUZ, "MAX_AUTOMATIC_DECISIONS": 3}
    rule(ann, "send_email", action="deny", reason="No more emails.")
    run = started(ann, agent="timed_repeater")
    assert run.status == RunStatus.SUSPENDED  # m0-m2 denied, m3 waits

    let_time_pass(run, timedelta(minutes=11))
    assert deadline_sweep.sweep().continued == [run.run_id]

    run.refresh_from_db()
    assert run.status == RunStatus.SUSPENDED
    statuses = Approval.objects.filter(run=run).values_list("approval_id", "status")
    assert list(statuses)[3:] == [("m3", "expired"), ("m4", "pending")]


def test_a_rule_that_decided_cannot_be_deleted_but_its_runs_can(
    ann: User, fin: User
) -> None:
    made = rule(fin, "refund")
    run = started(ann)

    with pytest.raises(RestrictedError):
        made.delete()
    services.delete_run(run.run_id)
    made.delete()  # nothing refers to it any more


# -- the rule itself ------------------------------------------------------------------------


def test_a_malformed_condition_is_refused_when_saved_naming_the_clause(
    fin: User,
) -> None:
    made = StandingRule(
        tool_name="refund",
        action="approve",
        reason="x",
        created_by=fin,
        condition=[{"field": "amount", "op": "<=", "value": 5}, {"field": "amount"}],
    )
    with pytest.raises(ValidationError) as refused:
        made.full_clean()
    assert refused.value.message_dict == {
        "condition": [
            "Clause 2: a clause is an object with exactly the keys field, op and "
            "value (it has field)."
        ]
    }


@pytest.mark.parametrize(
    ("tool", "agent", "field", "message"),
    [
        ("refnud", "", "tool_name", "No registered agent has a tool 'refnud'"),
        ("refund", "payer", "tool_name", "Agent 'payer' has no tool 'refund'"),
        ("refund", "nobody", "agent", "Unknown agent 'nobody'"),
    ],
)
def test_a_rule_for_a_tool_no_agent_has_is_refused(
    fin: User, tool: str, agent: str, field: str, message: str
) -> None:
    made = StandingRule(
        tool_name=tool, agent=agent, action="approve", reason="x", created_by=fin
    )
    with pytest.raises(ValidationError) as refused:
        made.full_clean()
    assert message in refused.value.message_dict[field][0]


def test_a_sub_agents_tool_is_a_tool_rules_may_name(fin: User) -> None:
    StandingRule(
        tool_name="slow", agent="nested_slow", action="deny", reason="x"
    ).full_clean()


# -- faults ---------------------------------------------------------------------------------


def test_a_decision_that_fails_to_write_fails_the_suspending_save_and_nothing_is_half_written(
    ann: User, fin: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rows and their automatic decisions are one transaction with the checkpoint:
    a failing write leaves the run at its last boundary for recovery, never a run
    suspended on rows nobody decided and nobody was told about."""
    from deuz_django.rules import automatic

    rule(fin, "refund")
    rule(fin, "send_email")
    run = services.start_run(
        agent="gated", messages=[{"role": "user", "content": "go"}], owner=ann
    )

    def lost(*args: Any, **kwargs: Any) -> Any:
        raise DatabaseError("the connection was lost")

    monkeypatch.setattr(automatic, "record_verdict", lost)
    outcome = services.resume_run(run.run_id)

    assert outcome.error is not None
    assert "A checkpoint save failed: the connection was lost" in outcome.error
    run.refresh_from_db()
    assert (run.status, run.step_index, run.pending_approvals) == ("running", 0, "")
    assert run.recover_after is not None  # recovery retries it
    assert not Approval.objects.filter(run=run).exists()

    monkeypatch.undo()
    call_command("deuz", "recover", "--older-than", "0", stdout=io.StringIO())

    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert set(rows(run)) == {"r1", "e1"}


def test_a_run_decided_whose_next_leg_never_started_is_continued_by_recovery(
    ann: User, fin: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process may die between the suspending leg and the next one: the run is
    suspended with every call decided, which recovery continues."""
    from deuz_django.runs import claims

    rule(fin, "refund")
    rule(fin, "send_email")

    def gone(run_id: str, **kwargs: Any) -> Any:
        raise RunBusy(run_id)

    monkeypatch.setattr(claims, "claim", gone)
    run = started(ann)
    assert run.status == RunStatus.SUSPENDED
    assert run.lease_owner == ""
    assert run.run_id in services.recoverable_runs(0)

    monkeypatch.undo()
    call_command("deuz", "recover", "--older-than", "0", stdout=io.StringIO())

    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
