"""The run service: start, decide, resume — the one path every entry point takes."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.test import override_settings

from deuz_django import services
from deuz_django.core import AbortController, StreamPart
from deuz_django.core.testing import ScriptedModel, reply
from deuz_django.exceptions import (
    ApprovalAlreadyDecided,
    InvalidVerdict,
    RunBusy,
    RunNotFound,
    RunNotResumable,
    UnknownAgent,
)
from deuz_django.models import Run
from deuz_django.registry import AgentSpec
from deuz_django.runs.continuing import claim
from deuz_django.runs.tasks import run_claimed_leg_task
from deuz_django.signals import approval_requested
from deuz_django.storage import leases
from tests.django.run_support import (
    PROMPT,
    age,
    approval,
    history,
    suspended,
    tool_results,
)

pytestmark = pytest.mark.django_db


def deuz(**changes: Any) -> Any:
    return override_settings(DEUZ={**settings.DEUZ, **changes})


# -- starting ---------------------------------------------------------------------------------


def test_start_run_records_the_run_and_its_input_before_any_model_call(
    make_user: Callable[..., Any],
) -> None:
    ann = make_user("ann")
    run = services.start_run(agent="scripted", messages=PROMPT, owner=ann)
    assert (run.agent, run.owner, run.status, run.step_index) == (
        "scripted",
        ann,
        "running",
        0,
    )
    assert run.title == PROMPT[0]["content"]
    assert [m.role for m in history(run)] == ["system", "user"]  # the agent's system
    assert run.lease_owner == ""


def test_start_run_refuses_an_unknown_agent_and_an_empty_or_duplicate_input() -> None:
    with pytest.raises(UnknownAgent, match="Unknown agent 'nobody'"):
        services.start_run(agent="nobody", messages=PROMPT)
    with pytest.raises(ValueError, match="at least one message"):
        services.start_run(agent="scripted", messages=[])
    services.start_run(agent="scripted", messages=PROMPT, run_id="run-1")
    with pytest.raises(ValueError, match="already exists"):
        services.start_run(agent="scripted", messages=PROMPT, run_id="run-1")
    assert Run.objects.count() == 1


def test_a_resumed_run_completes_and_releases_its_lease(effects: Any) -> None:
    run = services.start_run(agent="scripted", messages=PROMPT)
    outcome = services.resume_run(run.run_id)
    assert (outcome.status, outcome.finish_reason, outcome.error) == (
        "completed",
        "stop",
        None,
    )
    assert effects() == ["echo:hi"]
    run.refresh_from_db()
    assert (run.step_index, run.lease_owner, run.lease_expires_at) == (2, "", None)
    assert [m.role for m in history(run)] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert run.usage["totalTokens"] == 41


def test_every_part_of_a_leg_reaches_the_observer() -> None:
    run = services.start_run(agent="scripted", messages=PROMPT)
    seen: list[str] = []

    async def observe(part: StreamPart) -> None:
        seen.append(part.type)

    services.resume_run(run.run_id, observer=observe)
    assert seen[0] == "step-start"
    assert seen.count("finish") == 1
    assert "tool-result" in seen


def test_a_failing_observer_is_dropped_and_the_leg_completes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    run = services.start_run(agent="scripted", messages=PROMPT)

    async def broken(part: StreamPart) -> None:
        raise ConnectionError("socket gone")

    with caplog.at_level(logging.ERROR, logger="deuz_django"):
        outcome = services.resume_run(run.run_id, observer=broken)
    assert outcome.status == "completed"
    assert "observer of run" in caplog.text


# -- suspending and deciding --------------------------------------------------------------------


def test_a_gated_leg_suspends_with_one_pending_row_per_gated_call(effects: Any) -> None:
    run = suspended()
    rows = run.approvals.order_by("tool_name")
    assert [(a.tool_name, a.status, a.approval_id) for a in rows] == [
        ("refund", "pending", "r1"),
        ("send_email", "pending", "e1"),
    ]
    assert all(a.token.startswith("v1.") for a in rows)
    assert rows[0].input == {"order_id": "A-1", "amount": 5}
    assert effects() == []
    assert services.current_pending(run).count() == 2


def test_a_run_resumes_only_once_every_pending_approval_is_decided(
    make_user: Callable[..., Any], effects: Any
) -> None:
    ann = make_user("ann")
    carl = make_user(
        "carl", "deuz_django.view_run", "deuz_django.decide_approval", "auth.view_group"
    )
    run = suspended(owner=ann)
    with pytest.raises(RunNotResumable, match="still waits for a verdict"):
        services.resume_run(run.run_id)
    first = services.decide_approval(
        approval(run, "send_email"), user=ann, approved=True
    )
    assert (first.approval.status, first.approval.decided_by, first.run_ready) == (
        "approved",
        ann,
        False,
    )
    with pytest.raises(RunNotResumable):
        services.resume_run(run.run_id)
    last = services.decide_approval(
        approval(run, "refund"), user=carl, approved=False, reason="Too late."
    )
    assert last.run_ready
    outcome = services.resume_run(run.run_id)
    assert outcome.status == "completed"
    assert effects() == ["send_email:ann@example.com"]
    results = tool_results(run)
    assert results["e1"] == ("sent to ann@example.com", False)
    assert results["r1"] == ("Tool call denied. Reason: Too late.", True)


def test_a_decided_approval_never_changes_again(make_user: Callable[..., Any]) -> None:
    ann = make_user("ann")
    run = suspended(owner=ann)
    row = approval(run, "send_email")
    services.decide_approval(row, user=ann, approved=False, reason="No.")
    stale = approval(run, "send_email")
    stale.status = "pending"  # an out-of-date copy still thinks it is pending
    with pytest.raises(ApprovalAlreadyDecided, match="already denied"):
        services.decide_approval(stale, user=ann, approved=True)
    with pytest.raises(ApprovalAlreadyDecided):
        services.record_operator_verdict(
            approval(run, "send_email"), operator="ops", approved=True
        )
    row.refresh_from_db()
    assert (row.status, row.reason) == ("denied", "No.")


def test_an_approving_verdict_needs_the_token_that_pins_this_call(
    make_user: Callable[..., Any],
) -> None:
    ann = make_user("ann")
    run = suspended(owner=ann)
    email, refund = approval(run, "send_email"), approval(run, "refund")
    for token, problem in (
        ("", "needs the approval's token"),
        ("v1.garbage.mac", "forged, tampered with or garbled"),
        (refund.token, "minted for another call"),
        (email.token[:-2], "forged"),
    ):
        with pytest.raises(InvalidVerdict, match=problem):
            services.decide_approval(email, user=ann, approved=True, token=token)
    email.refresh_from_db()
    assert email.status == "pending"
    decision = services.decide_approval(
        email, user=ann, approved=True, token=email.token
    )
    assert decision.approval.status == "approved"


def test_resume_now_denies_what_is_undecided(
    make_user: Callable[..., Any], effects: Any
) -> None:
    ann = make_user("ann")
    run = suspended(owner=ann)
    services.decide_approval(approval(run, "send_email"), user=ann, approved=True)
    outcome = services.resume_run(run.run_id, user=ann, deny_remaining=True)
    assert outcome.status == "completed"
    refund = approval(run, "refund")
    assert (refund.status, refund.decided_by, refund.reason) == (
        "denied",
        ann,
        services.RESUMED_WITHOUT_VERDICT,
    )
    assert effects() == ["send_email:ann@example.com"]
    assert tool_results(run)["r1"][1] is True


def test_an_expired_approval_is_recorded_as_expired_and_settles_as_a_denial(
    make_user: Callable[..., Any], effects: Any
) -> None:
    ann = make_user("ann")
    run = suspended(owner=ann)
    with deuz(APPROVAL_MAX_AGE=60):
        age(approval(run, "send_email"), 120)
        decision = services.decide_approval(
            approval(run, "send_email"), user=ann, approved=True
        )
        assert decision.expired
        assert (decision.approval.status, decision.approval.reason) == (
            "expired",
            services.EXPIRED_REASON,
        )
        # The other approval is too old as well: nothing is left to wait for.
        age(approval(run, "refund"), 120)
        assert not services.current_pending(run).exists()
        assert services.recoverable_runs(older_than=0) == [run.run_id]
        outcome = services.resume_run(run.run_id)
    assert outcome.status == "completed"
    assert approval(run, "refund").status == "expired"
    assert effects() == []
    results = tool_results(run)
    assert results["e1"] == ("Tool call denied. Reason: Approval expired.", True)
    assert results["r1"] == ("Tool call denied. Reason: Approval expired.", True)


# -- one leg at a time --------------------------------------------------------------------------


def test_a_resume_while_another_leg_holds_the_lease_is_busy(effects: Any) -> None:
    run = services.start_run(agent="scripted", messages=PROMPT)
    held = leases.acquire(run.run_id)
    with pytest.raises(RunBusy, match="is busy"):
        services.resume_run(run.run_id)
    assert effects() == []
    leases.release(held)
    assert services.resume_run(run.run_id).status == "completed"


def test_a_verdict_while_the_suspending_leg_still_holds_the_lease_is_continued_by_it(
    make_user: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    ann = make_user("ann")
    run = services.start_run(agent="held", messages=PROMPT, owner=ann)
    release = leases.release
    busy: list[str] = []

    def decide_then_release(lease: Any, **fields: Any) -> None:
        # The leg journaled its end and found one call undecided; a person decides it
        # before the leg lets the run go, and their resume finds the run busy.
        if not busy:
            services.decide_approval(approval(run, "hold"), user=ann, approved=True)
            with pytest.raises(RunBusy) as refused:
                services.resume_run(run.run_id)
            busy.append(str(refused.value))
        release(lease, **fields)

    monkeypatch.setattr(leases, "release", decide_then_release)
    assert services.resume_run(run.run_id).status == "completed"
    assert busy


def test_a_completed_or_unknown_run_is_not_resumed() -> None:
    run = services.start_run(agent="scripted", messages=PROMPT)
    services.resume_run(run.run_id)
    with pytest.raises(RunNotResumable, match="is completed"):
        services.resume_run(run.run_id)
    with pytest.raises(RunNotFound):
        services.resume_run("no-such-run")
    run.refresh_from_db()
    assert run.lease_owner == ""


def test_a_claimed_resume_runs_later_under_the_handed_over_lease(
    make_user: Callable[..., Any], effects: Any
) -> None:
    ann = make_user("ann")
    run = suspended(owner=ann)
    lease = claim(run.run_id, user=ann, deny_remaining=True)
    # The claim already decided (denied) what was undecided, and holds the run.
    assert not services.current_pending(run).exists()
    with pytest.raises(RunBusy):
        services.resume_run(run.run_id)
    outcome = run_claimed_leg_task.call(lease.run_id, lease.owner, lease.generation)
    assert outcome["status"] == "completed"
    assert effects() == []


def test_a_claim_taken_over_before_its_leg_starts_is_busy() -> None:
    run = services.start_run(agent="scripted", messages=PROMPT)
    lease = claim(run.run_id)
    Run.objects.filter(pk=run.pk).update(lease_expires_at=None, lease_owner="")
    services.resume_run(run.run_id)
    busy = run_claimed_leg_task.call(lease.run_id, lease.owner, lease.generation)
    assert busy == {"runId": run.run_id, "status": "busy"}


# -- sub-agents and failures ---------------------------------------------------------------------


def test_a_sub_agents_approval_is_decided_on_the_root_run(
    make_user: Callable[..., Any], effects: Any
) -> None:
    ann = make_user("ann")
    run = suspended("nested", owner=ann)
    row = approval(run, "send_email")
    assert (row.run.run_id, row.agent_path, row.approval_id) == (
        run.run_id,
        ["researcher"],
        "x1",
    )
    child = Run.objects.get(parent=run)
    assert child.run_id == f"{run.run_id}::researcher#p1"
    services.decide_approval(row, user=ann, approved=True)
    outcome = services.resume_run(run.run_id, user=ann)
    assert outcome.status == "completed"
    assert effects() == ["send_email:bob@example.com"]
    child.refresh_from_db()
    assert child.status == "completed"
    assert tool_results(run)["p1"] == ("Research sent.", False)


def test_each_run_event_is_one_info_line_with_the_run_id_and_no_traceback(
    make_user: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    """A sub-agent's approval suspends the run: a normal event, one line each — started,
    suspended, resumed, completed — and no traceback anywhere, nothing said twice."""
    ann = make_user("ann")
    with caplog.at_level(logging.DEBUG):
        run = suspended("nested", owner=ann)
        services.decide_approval(approval(run, "send_email"), user=ann, approved=True)
        services.resume_run(run.run_id, user=ann)
    ours = [r for r in caplog.records if r.name.startswith("deuz_django")]
    assert [r.getMessage() for r in ours if r.levelno >= logging.INFO] == [
        f"deuz: run {run.run_id} started (leg 1)",
        f"deuz: run {run.run_id} suspended: waits for 1 decision(s)",
        f"deuz: run {run.run_id} resumed (leg 2)",
        f"deuz: run {run.run_id} completed",
    ]
    assert [r for r in caplog.records if r.exc_info] == []


@pytest.mark.django_db(transaction=True)
def test_a_sub_agents_suspension_is_no_exception_to_what_it_sets_off(
    make_user: Callable[..., Any],
) -> None:
    """Saving a sub-agent's suspension sends the signals (notifications queue tasks on
    them) outside any exception handler: Django's task log would print the suspension
    as a traceback if it read one from ``sys.exc_info()``."""
    seen: list[Any] = []

    def receiver(**kwargs: Any) -> None:
        seen.append(sys.exc_info()[0])

    approval_requested.connect(receiver)
    try:
        suspended("nested", owner=make_user("ann"))
    finally:
        approval_requested.disconnect(receiver)
    assert seen == [None]


def test_a_failed_leg_records_its_error_and_recovery_leaves_the_run_alone() -> None:
    agents = {
        **settings.DEUZ["AGENTS"],
        "broken": "tests.django.test_run_service.broken",
    }
    with deuz(AGENTS=agents):
        run = services.start_run(agent="broken", messages=PROMPT)
        outcome = services.resume_run(run.run_id)
        assert outcome.status == "running"
        assert outcome.error is not None
        assert "model is down" in outcome.error
        run.refresh_from_db()
        assert "model is down" in run.last_error
        assert run.lease_owner == ""
        assert services.recoverable_runs(older_than=0) == []


def broken() -> AgentSpec:
    """An agent whose model fails (a callable: each leg gets a fresh script)."""
    return AgentSpec(model=ScriptedModel([reply(error="the model is down")]))


def test_an_aborted_leg_is_left_for_an_explicit_resume() -> None:
    run = services.start_run(agent="scripted", messages=PROMPT)
    controller = AbortController()

    async def abort_at_first_part(part: StreamPart) -> None:
        controller.abort()

    outcome = async_to_sync(services.aresume_run)(
        run.run_id, observer=abort_at_first_part, controller=controller
    )
    assert outcome.finish_reason == "aborted"
    run.refresh_from_db()
    assert (run.status, run.last_error) == ("running", services.ABORTED)
    assert services.recoverable_runs(older_than=0) == []
    assert services.resume_run(run.run_id).status == "completed"
    run.refresh_from_db()
    assert run.last_error == ""


def test_recoverable_runs_are_the_ones_a_dead_process_left_behind(
    make_user: Callable[..., Any],
) -> None:
    ann = make_user("ann")
    fresh = services.start_run(agent="scripted", messages=PROMPT)  # never driven
    leased = services.start_run(agent="scripted", messages=PROMPT)
    leases.acquire(leased.run_id)  # a live leg elsewhere
    waiting = suspended(owner=ann)  # waits for people
    decided = suspended(owner=ann)
    for tool_name in ("send_email", "refund"):
        services.record_operator_verdict(
            approval(decided, tool_name), operator="ops", approved=False
        )
    done = services.start_run(agent="scripted", messages=PROMPT)
    services.resume_run(done.run_id)
    assert services.recoverable_runs(older_than=0) == [fresh.run_id, decided.run_id]
    assert services.recoverable_runs(0, run_id=decided.run_id) == [decided.run_id]
    assert services.recoverable_runs(0, run_id=waiting.run_id) == []
    assert services.recoverable_runs(older_than=3600) == []
    assert waiting.run_id not in services.recoverable_runs(older_than=0)
