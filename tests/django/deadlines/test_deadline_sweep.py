"""Deadlines on approval rows: set when a suspended run's calls are recorded; reminded,
escalated and timed out by the sweep, each once; a timed-out call is recorded expired
through the verdict pipeline and the run continues with the model told it timed out
(deuz_django.deadlines.rows, deuz_django.deadlines.sweep).

Time is frozen by moving the rows' times back, never by sleeping."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.dispatch import Signal
from django.utils import timezone

from deuz_django import services, signals
from deuz_django.approvals.verdicts import record_timeout
from deuz_django.deadlines import sweep as deadline_sweep
from deuz_django.deadlines.rows import schedule_deadlines
from deuz_django.exceptions import ApprovalAlreadyDecided
from deuz_django.models import Approval, ApprovalKind, Run, StandingRule
from deuz_django.runs import recovery
from tests.django.run_support import (
    approval,
    held_elsewhere,
    let_time_pass,
    short_lock_timeout,
    suspended,
    tool_results,
)

pytestmark = pytest.mark.django_db

HOUR = timedelta(hours=1)
Received = list[tuple[str, dict[str, Any]]]


@pytest.fixture
def received() -> Iterator[Received]:
    """The deadline signals (and verdicts) sent during the test, in order — once their
    transaction commits (wrap what sends them in ``sweeping``)."""
    log: Received = []
    connected: list[tuple[Signal, Callable[..., None]]] = []
    for name in ("approval_reminder", "approval_escalated", "approval_decided"):
        signal: Signal = getattr(signals, name)

        def receiver(sender: type, _name: str = name, **kwargs: Any) -> None:
            kwargs.pop("signal")
            log.append((_name, kwargs))

        signal.connect(receiver, weak=False)
        connected.append((signal, receiver))
    yield log
    for signal, receiver in connected:
        signal.disconnect(receiver)


@pytest.fixture
def sweeping(django_capture_on_commit_callbacks: Any) -> Callable[[], Any]:
    """Sweep with the signals sent as their writes commit (the test's transaction never
    does)."""

    def sweep() -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            return deadline_sweep.sweep()

    return sweep


def labels(run: Run, *approval_ids: str) -> list[str]:
    return [f"{run.run_id}:{approval_id}" for approval_id in approval_ids]


# -- set when recorded ------------------------------------------------------------------------


def test_each_gated_call_is_recorded_with_the_deadline_its_agent_sets() -> None:
    run = suspended("timed")
    refund, email = approval(run, "refund"), approval(run, "send_email")
    assert refund.remind_at == refund.created_at + timedelta(minutes=30)
    assert refund.deadline_at == refund.created_at + 4 * HOUR
    assert (refund.escalate_to, refund.extend_by) == ("group:Finance leads", 4 * HOUR)
    assert refund.escalates
    # send_email has no deadline of its own: the agent's default applies.
    assert email.deadline_at == email.created_at + HOUR
    assert (email.remind_at, email.escalate_to, email.extend_by) == (None, "", None)
    assert not email.escalates


def test_a_sub_agents_call_gets_the_deadline_of_its_sub_agent() -> None:
    run = suspended("timed_nested")
    row = Approval.objects.get(run=run)
    assert row.agent_path == ["researcher"]
    assert row.deadline_at == row.created_at + timedelta(minutes=10)


def test_an_agent_without_deadlines_records_calls_that_wait_for_a_person() -> None:
    run = suspended("gated")
    assert [(a.remind_at, a.deadline_at) for a in run.approvals.all()] == [
        (None, None),
        (None, None),
    ]


def test_a_call_a_crash_left_in_doubt_never_gets_a_deadline() -> None:
    """Only a person may say whether it happened: it never times out."""
    run = suspended("timed")
    row = approval(run, "send_email")
    Approval.objects.filter(pk=row.pk).update(
        kind=ApprovalKind.OUTCOME_UNKNOWN, deadline_at=None
    )
    schedule_deadlines(run.pk, run.step_index, ["e1"])
    row.refresh_from_db()
    assert row.deadline_at is None


def test_deadlines_that_cannot_be_read_leave_the_calls_waiting_for_a_person(
    caplog: pytest.LogCaptureFixture,
) -> None:
    run = suspended("timed")
    Approval.objects.filter(run=run).update(deadline_at=None, remind_at=None)
    Run.objects.filter(pk=run.pk).update(agent="retired")
    with caplog.at_level(logging.ERROR, logger="deuz_django"):
        schedule_deadlines(run.pk, run.step_index, ["r1", "e1"])
    assert "the deadlines of run" in caplog.text
    assert not Approval.objects.filter(run=run, deadline_at__isnull=False).exists()


# -- the sweep ------------------------------------------------------------------------------


def test_nothing_is_done_before_anything_is_due(received: Received) -> None:
    run = suspended("timed")
    let_time_pass(run, timedelta(minutes=29))
    report = deadline_sweep.sweep()
    assert report.to_json() == {
        "reminded": [],
        "escalated": [],
        "timedOut": [],
        "continued": [],
    }
    assert received == []


def test_a_due_reminder_is_sent_once(
    received: Received, sweeping: Callable[[], Any]
) -> None:
    run = suspended("timed")
    let_time_pass(run, timedelta(minutes=31))
    assert sweeping().reminded == labels(run, "r1")
    assert sweeping().reminded == []
    assert [name for name, _ in received] == ["approval_reminder"]
    reminded = received[0][1]["approval"]
    assert reminded.approval_id == "r1"
    assert reminded.reminded_at is not None
    assert reminded.remind_at is not None
    assert reminded.reminded_at > reminded.remind_at
    row = approval(run, "refund")
    assert row.reminded_at is not None
    assert row.is_pending


def test_a_call_decided_before_its_reminder_is_not_reminded(
    make_user: Callable[..., Any], received: Received, sweeping: Callable[[], Any]
) -> None:
    run = suspended("timed")
    staff = make_user(
        "fin", "deuz_django.view_run", "deuz_django.decide_approval", "auth.view_group"
    )
    services.decide_approval(approval(run, "refund"), user=staff, approved=False)
    let_time_pass(run, timedelta(minutes=31))
    assert sweeping().reminded == []
    assert "approval_reminder" not in [name for name, _ in received]


def test_a_call_a_standing_rule_decided_is_never_reminded_escalated_or_timed_out(
    make_user: Callable[..., Any], received: Received, sweeping: Callable[[], Any]
) -> None:
    fin = make_user(
        "fin", "deuz_django.view_run", "deuz_django.decide_approval", "auth.view_group"
    )
    rule = StandingRule.objects.create(
        tool_name="refund",
        condition=[{"field": "amount", "op": "<=", "value": 10}],
        action="approve",
        reason="Small refunds are routine.",
        created_by=fin,
    )
    run = suspended("timed")  # the rule approves the refund; the email waits
    refund = approval(run, "refund")
    assert (refund.status, refund.decided_by_rule_id) == ("approved", rule.pk)
    assert refund.deadline_at is not None  # scheduled before the rule decided
    let_time_pass(run, 9 * HOUR)
    report = sweeping()
    assert (report.reminded, report.escalated) == ([], [])
    assert report.timed_out == labels(run, "e1")
    refund.refresh_from_db()
    assert (refund.status, refund.reminded_at, refund.escalated_at) == (
        "approved",
        None,
        None,
    )
    assert [(name, kw["approval"].approval_id) for name, kw in received] == [
        ("approval_decided", "e1")
    ]


def test_a_due_escalation_goes_out_once_and_moves_the_deadline_on(
    received: Received, sweeping: Callable[[], Any]
) -> None:
    run = suspended("timed")
    let_time_pass(run, 4 * HOUR + timedelta(minutes=1))
    before = timezone.now()
    report = sweeping()
    assert report.escalated == labels(run, "r1")
    assert report.timed_out == labels(run, "e1")  # send_email's hour passed too
    assert report.continued == []  # the refund still waits
    row = approval(run, "refund")
    assert row.is_pending
    assert not row.escalates
    assert row.escalated_at is not None
    assert row.escalated_at >= before
    assert row.deadline_at is not None
    assert row.deadline_at >= before + 4 * HOUR  # the people it reached get 4 hours
    assert sweeping().escalated == []
    escalations = [kw for name, kw in received if name == "approval_escalated"]
    assert [(kw["approval"].approval_id, kw["to"]) for kw in escalations] == [
        ("r1", "group:Finance leads")
    ]


def test_a_timed_out_call_is_recorded_expired_by_the_system_and_the_run_goes_on(
    effects: Callable[[], list[str]], received: Received, sweeping: Callable[[], Any]
) -> None:
    run = suspended("timed")
    let_time_pass(run, 4 * HOUR + timedelta(seconds=1))
    sweeping()  # send_email times out, the refund escalates
    email = approval(run, "send_email")
    assert (email.status, email.reason) == (
        "expired",
        "Timed out: nobody decided within 1 hour.",
    )
    assert (email.decided_by, email.operator, email.decider) == (None, "", "the system")
    let_time_pass(run, 4 * HOUR + timedelta(seconds=1))
    report = sweeping()
    assert report.timed_out == labels(run, "r1")
    assert report.continued == [run.run_id]
    refund = approval(run, "refund")
    assert refund.status == "expired"
    assert refund.reason == "Timed out: nobody decided within 8 hours."
    run.refresh_from_db()
    assert run.status == "completed"
    # The model was told, as each call's error result; neither call ran.
    assert tool_results(run) == {
        "r1": (
            "Tool call denied. Reason: Timed out: nobody decided within 8 hours.",
            True,
        ),
        "e1": (
            "Tool call denied. Reason: Timed out: nobody decided within 1 hour.",
            True,
        ),
    }
    assert effects() == []
    decided = [
        kw["approval"].approval_id
        for name, kw in received
        if name == "approval_decided"
    ]
    assert decided == ["e1", "r1"]


def test_a_sub_agents_timed_out_call_is_told_to_the_sub_agent() -> None:
    run = suspended("timed_nested")
    let_time_pass(run, timedelta(minutes=11))
    assert deadline_sweep.sweep().continued == [run.run_id]
    run.refresh_from_db()
    assert run.status == "completed"
    child = Run.objects.get(parent=run)
    assert tool_results(child)["x1"] == (
        "Tool call denied. Reason: Timed out: nobody decided within 10 minutes.",
        True,
    )


def test_a_verdict_before_the_deadline_wins_and_the_sweep_leaves_the_call_alone(
    ann: Any,
) -> None:
    run = suspended("timed", owner=ann)
    services.decide_approval(approval(run, "send_email"), user=ann, approved=False)
    let_time_pass(run, 2 * HOUR)
    assert deadline_sweep.sweep().timed_out == []
    assert approval(run, "send_email").status == "denied"


def test_a_verdict_after_the_timeout_is_refused_as_already_decided(ann: Any) -> None:
    run = suspended("timed", owner=ann)
    let_time_pass(run, 2 * HOUR)
    deadline_sweep.sweep()
    with pytest.raises(ApprovalAlreadyDecided, match="was already expired"):
        services.decide_approval(approval(run, "send_email"), user=ann, approved=True)


def test_a_verdict_landing_between_the_sweeps_read_and_its_write_wins(ann: Any) -> None:
    """The sweep found the call due, a person approved it, then the sweep wrote: only
    one write lands, and it is the person's."""
    run = suspended("timed", owner=ann)
    let_time_pass(run, 2 * HOUR)
    seen_due = approval(run, "send_email")
    services.decide_approval(seen_due.pk, user=ann, approved=True)
    assert (
        record_timeout(
            seen_due, "Timed out.", due=deadline_sweep.still_due(timezone.now())
        )
        is None
    )
    assert approval(run, "send_email").status == "approved"


@pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="row locks: SQLite locks the whole file, and every writer waits for it",
)
@pytest.mark.django_db(transaction=True)
def test_a_call_another_transaction_holds_is_left_to_the_next_sweep() -> None:
    """A verdict being recorded (or a stalled process's transaction) holds a due call's
    row: the sweep goes on without waiting for it — the sweeper runs recovery too — and
    a later sweep times the call out. One that waited would hit this test's short lock
    timeout and fail with a database error instead."""
    run = suspended("timed")
    let_time_pass(run, 2 * HOUR)  # send_email is due to time out
    verdict_in_flight = Approval.objects.filter(run=run, approval_id="e1")
    with held_elsewhere(verdict_in_flight), short_lock_timeout():
        assert deadline_sweep.sweep().timed_out == []
    assert deadline_sweep.sweep().timed_out == labels(run, "e1")


def test_a_timeout_after_an_escalation_moved_the_deadline_is_not_written() -> None:
    """Two sweeps read the refund due; one escalated it: the other's timeout must not
    land on the moved deadline."""
    run = suspended("timed")
    let_time_pass(run, 4 * HOUR + timedelta(minutes=1))
    seen_due = approval(run, "refund")
    assert deadline_sweep.sweep().escalated == labels(run, "r1")
    assert (
        record_timeout(
            seen_due, "Timed out.", due=deadline_sweep.still_due(timezone.now())
        )
        is None
    )
    assert approval(run, "refund").is_pending


def test_a_run_left_after_its_calls_timed_out_is_continued_by_recovery() -> None:
    """The process died after timing the calls out and before continuing the run: the
    run waits for nothing, and the recovery sweep continues it."""
    run = suspended("timed_nested")
    let_time_pass(run, timedelta(minutes=11))
    report = deadline_sweep.act_on_due()  # the calls time out; nothing continues
    assert report.timed_out == labels(run, "x1")
    assert report.ready == [run.run_id]
    assert deadline_sweep.sweep().continued == []  # nothing is due any more
    assert recovery.sweep().continued == [run.run_id]
    run.refresh_from_db()
    assert run.status == "completed"


def test_the_sweep_as_a_task_runs_every_sweep() -> None:
    run = suspended("timed_nested")
    let_time_pass(run, timedelta(minutes=11))
    result = recovery.recover_runs_task.enqueue()
    assert result.return_value == {
        "recovery": {"continued": [], "failed": [], "journalsClosed": []},
        "deadlines": {
            "reminded": [],
            "escalated": [],
            "timedOut": labels(run, "x1"),
            "continued": [run.run_id],
        },
        "notifications": {"queued": []},
    }


def test_an_approved_call_is_never_timed_out_while_its_run_waits_on_another(
    ann: Any,
) -> None:
    run = suspended("timed", owner=ann)
    services.decide_approval(approval(run, "send_email"), user=ann, approved=True)
    let_time_pass(run, 2 * HOUR)
    assert deadline_sweep.sweep().timed_out == []
    assert approval(run, "send_email").status == "approved"
