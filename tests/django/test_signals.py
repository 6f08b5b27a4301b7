"""The integration signals: sent once what they announce is committed, never breaking the
leg or the verdict that sent them (deuz_django.signals)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.db import transaction
from django.dispatch import Signal
from django.test import override_settings
from django.utils import timezone

from deuz_django import services, signals
from deuz_django.approvals.asking import record_approvals
from deuz_django.core.approvals import ToolApprovalRequest
from deuz_django.models import Approval, Run
from deuz_django.runs import recovery
from tests.django.run_support import PROMPT, approval, in_doubt, suspended

pytestmark = pytest.mark.django_db

Received = list[tuple[str, dict[str, Any]]]


@pytest.fixture
def received() -> Iterator[Received]:
    """Every deuz_django signal sent during the test, by name, with its arguments."""
    log: Received = []
    connected: list[tuple[Signal, Callable[..., None]]] = []
    for name in (
        "approval_requested",
        "question_asked",
        "approval_decided",
        "approval_reminder",
        "approval_escalated",
        "run_suspended",
        "run_completed",
        "run_failed",
    ):
        signal: Signal = getattr(signals, name)

        def receiver(sender: type, _name: str = name, **kwargs: Any) -> None:
            kwargs.pop("signal")
            log.append((_name, kwargs))

        signal.connect(receiver, weak=False)
        connected.append((signal, receiver))
    yield log
    for signal, receiver in connected:
        signal.disconnect(receiver)


def names(log: Received) -> list[str]:
    return [name for name, _ in log]


def test_a_suspended_leg_requests_each_approval_then_announces_the_suspension(
    received: Received, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        run = suspended()
    assert names(received) == [
        "approval_requested",
        "approval_requested",
        "run_suspended",
    ]
    requested = [kwargs["approval"].tool_name for _, kwargs in received[:2]]
    assert sorted(requested) == ["refund", "send_email"]
    announced = received[2][1]
    assert announced["run"].pk == run.pk
    assert announced["run"].status == "suspended"
    assert sorted(a.tool_name for a in announced["approvals"]) == [
        "refund",
        "send_email",
    ]


def test_nothing_is_announced_before_the_suspension_commits(
    received: Received, django_capture_on_commit_callbacks: Any
) -> None:
    run = services.start_run(agent="gated", messages=PROMPT)
    request = ToolApprovalRequest(
        approval_id="x1", tool_call_id="x1", tool_name="refund", input={}
    )
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        record_approvals(run.pk, run.run_id, 1, (request,), None)
    assert received == []  # queued for the commit, not sent
    with transaction.atomic():
        record_approvals(run.pk, run.run_id, 1, (request,), None)
        transaction.set_rollback(True)  # the suspension's transaction rolls back
    for callback in callbacks:
        callback()
    assert names(received) == ["approval_requested"]  # once: the first write's


def test_a_request_already_recorded_is_not_announced_again(
    received: Received, django_capture_on_commit_callbacks: Any
) -> None:
    run = services.start_run(agent="gated", messages=PROMPT)
    request = ToolApprovalRequest(
        approval_id="x1", tool_call_id="x1", tool_name="refund", input={}
    )
    with django_capture_on_commit_callbacks(execute=True):
        record_approvals(run.pk, run.run_id, 1, (request,), None)
        record_approvals(run.pk, run.run_id, 1, (request,), None)
    assert names(received) == ["approval_requested"]
    assert Approval.objects.filter(run=run).count() == 1


def test_a_call_in_doubt_is_requested_with_its_kind(
    received: Received,
    django_capture_on_commit_callbacks: Any,
    make_user: Callable[..., Any],
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        in_doubt(make_user("ann"))
    requested = [
        kwargs["approval"] for name, kwargs in received if name == "approval_requested"
    ]
    assert [(a.tool_name, a.kind) for a in requested] == [("slow", "outcome_unknown")]


def test_each_recorded_verdict_is_announced_and_the_completed_run_too(
    received: Received,
    django_capture_on_commit_callbacks: Any,
    make_user: Callable[..., Any],
) -> None:
    ann = make_user("ann")
    run = suspended(owner=ann)
    received.clear()
    with django_capture_on_commit_callbacks(execute=True):
        services.decide_approval(approval(run, "send_email"), user=ann, approved=True)
    assert names(received) == ["approval_decided"]
    decided = received[0][1]["approval"]
    assert (decided.tool_name, decided.status, decided.decided_by) == (
        "send_email",
        "approved",
        ann,
    )
    received.clear()
    with django_capture_on_commit_callbacks(execute=True):
        services.resume_run(run.run_id, user=ann, deny_remaining=True)
    # The undecided call is denied by the resume, then the leg completes the run.
    assert names(received) == ["approval_decided", "run_completed"]
    assert received[0][1]["approval"].status == "denied"
    assert received[1][1]["run"].status == "completed"


def test_a_failed_leg_is_announced_with_its_error(
    received: Received, django_capture_on_commit_callbacks: Any
) -> None:
    agents = {
        **settings.DEUZ["AGENTS"],
        "broken": "tests.django.test_run_service.broken",
    }
    with override_settings(DEUZ={**settings.DEUZ, "AGENTS": agents}):
        run = services.start_run(agent="broken", messages=PROMPT)
        with django_capture_on_commit_callbacks(execute=True):
            services.resume_run(run.run_id)
    assert names(received) == ["run_failed"]
    assert "model is down" in received[0][1]["error"]
    assert received[0][1]["run"].pk == run.pk


@override_settings(DEUZ={**settings.DEUZ, "RECOVERY_MAX_ATTEMPTS": 0})
def test_a_run_recovery_gives_up_on_is_announced_as_failed(
    received: Received, django_capture_on_commit_callbacks: Any
) -> None:
    run = services.start_run(agent="scripted", messages=PROMPT)
    Run.objects.filter(pk=run.pk).update(updated_at=timezone.now() - timedelta(hours=1))
    with django_capture_on_commit_callbacks(execute=True):
        assert recovery.sweep().failed == [run.run_id]
    assert names(received) == ["run_failed"]
    assert received[0][1]["error"].startswith("Recovery gave up after 0 attempts")


def test_a_failing_receiver_is_logged_and_the_leg_goes_on(
    django_capture_on_commit_callbacks: Any, caplog: pytest.LogCaptureFixture
) -> None:
    def broken_receiver(sender: type, **kwargs: Any) -> None:
        raise RuntimeError("the pager is down")

    signals.approval_requested.connect(broken_receiver, weak=False)
    try:
        with (
            caplog.at_level(logging.ERROR, logger="django.dispatch"),
            django_capture_on_commit_callbacks(execute=True),
        ):
            run = suspended()
    finally:
        signals.approval_requested.disconnect(broken_receiver)
    assert run.status == "suspended"
    assert Approval.objects.filter(run=run).count() == 2
    failures = [r.getMessage() for r in caplog.records]
    assert len(failures) == 2
    assert "the pager is down" in failures[0]
