"""DjangoStepJournal: the shared step-journal contract, the round trips a step costs, the
lease that fences a turn, and a Django run that resumes without repeating a tool."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from deuz_django import services
from deuz_django.approvals.verdicts import RecordedResult, Verdict, state_refusal
from deuz_django.core import Deps, Message, TextPart, ToolContext, ToolUsePart
from deuz_django.core.approvals import input_digest
from deuz_django.core.durable import Authorization
from deuz_django.core.durable.codec import decode_json
from deuz_django.core.testing.contracts import StepJournalContract
from deuz_django.core.testing.contracts.step_journal import PAY_INPUT
from deuz_django.exceptions import InvalidVerdict, LeaseLost
from deuz_django.models import Approval, ApprovalStatus, Run, RunCall
from deuz_django.storage.leases import Lease
from deuz_django.storage.step_journal import DjangoStepJournal
from tests.api.support import client, verdicts_url
from tests.django.agents import record_effect
from tests.django.run_support import (
    approval,
    died_in,
    in_doubt,
    suspended,
    tool_results,
)


@pytest.mark.django_db(transaction=True)
class TestDjangoStepJournal(StepJournalContract):
    @pytest.fixture
    async def step_journal(self) -> Any:
        yield DjangoStepJournal()
        await sync_to_async(connections.close_all)()

    @pytest.fixture
    async def run_id(self) -> str:
        await Run.objects.acreate(run_id="run-1", agent="demo")
        return "run-1"

    async def make_decision(self, run_id: str, tool_call_id: str) -> str:
        run = await Run.objects.aget(run_id=run_id)
        row = await Approval.objects.acreate(
            run=run,
            approval_id=tool_call_id,
            step_index=await Approval.objects.filter(run=run).acount(),
            tool_call_id=tool_call_id,
            tool_name="pay",
            input=PAY_INPUT,
            input_digest=input_digest(PAY_INPUT),
            status=ApprovalStatus.APPROVED,
            decided_at=timezone.now(),
        )
        return str(row.pk)


def _turn(*ids: str) -> Message:
    return Message(
        "assistant",
        (TextPart("On it."), *(ToolUsePart(i, "pay", {"usd": 5}) for i in ids)),
    )


@pytest.mark.django_db
def test_a_step_writes_one_row_per_turn_and_one_statement_per_start_and_outcome() -> (
    None
):
    """The turn is one statement on PostgreSQL (an INSERT and the replaced turn's calls'
    DELETE in a transaction on SQLite; the run's pk is looked up once per run), each
    start one INSERT and each outcome one UPDATE: no reads while the run goes on."""
    Run.objects.create(run_id="run-1", agent="demo")
    journal = DjangoStepJournal()
    journal.record_turn("run-1", 0, 1, _turn("a"))  # the run's pk is remembered after
    with CaptureQueriesContext(connection) as queries:
        journal.record_turn("run-1", 1, 3, _turn("b", "c"))
        for call in ("b", "c"):
            journal.record_start("run-1", 1, call)
        for call in ("b", "c"):
            journal.record_outcome("run-1", 1, call, "ok", False)
    # A statement bound on the server (PostgreSQL's turn) is logged "QUERY = '…' …".
    statements = [
        q["sql"].removeprefix("QUERY = '").split()[0].upper()
        for q in queries.captured_queries
    ]
    work = [
        s for s in statements if s in {"WITH", "INSERT", "UPDATE", "DELETE", "SELECT"}
    ]
    turn = ["WITH"] if connection.vendor == "postgresql" else ["INSERT", "DELETE"]
    assert work == [*turn, "INSERT", "INSERT", "UPDATE", "UPDATE"]


@pytest.mark.django_db
def test_a_fenced_journal_refuses_a_turn_once_the_lease_was_taken_over() -> None:
    Run.objects.create(
        run_id="run-1", agent="demo", lease_owner="new", lease_generation=2
    )
    stale = DjangoStepJournal(lease=Lease("run-1", "old", 1))
    with pytest.raises(LeaseLost):
        stale.record_turn("run-1", 0, 1, _turn("a"))
    assert stale.load_step("run-1", 0) is None
    held = DjangoStepJournal(lease=Lease("run-1", "new", 2))
    held.record_turn("run-1", 0, 1, _turn("a"))
    assert held.load_step("run-1", 0) is not None


@pytest.mark.django_db
def test_a_stale_leg_never_starts_a_call_once_its_lease_was_taken_over() -> None:
    """A leg frozen between its fence and a call's start, woken after a takeover: the
    start is refused (and so the call does not run), with or without a decision."""
    run = Run.objects.create(
        run_id="run-1", agent="demo", lease_owner="new", lease_generation=2
    )
    held = DjangoStepJournal(lease=Lease("run-1", "new", 2))
    held.record_turn("run-1", 0, 1, _turn("a", "b"))
    decision = Approval.objects.create(
        run=run,
        approval_id="b",
        step_index=1,
        tool_call_id="b",
        tool_name="pay",
        input={"usd": 5},
        input_digest=input_digest({"usd": 5}),
        status=ApprovalStatus.APPROVED,
        decided_at=timezone.now(),
    )
    stale = DjangoStepJournal(lease=Lease("run-1", "old", 1))
    with pytest.raises(LeaseLost):
        stale.record_start("run-1", 0, "a", tool_name="pay")
    with pytest.raises(LeaseLost):
        stale.record_start(
            "run-1",
            0,
            "b",
            tool_name="pay",
            authorization=Authorization(str(decision.pk), input_digest({"usd": 5})),
        )
    assert not RunCall.objects.exists()
    held.record_start("run-1", 0, "a", tool_name="pay")
    held.record_start("run-1", 0, "a", tool_name="pay")  # kept: the same execution
    assert RunCall.objects.count() == 1


# -- a call a crash left in doubt ------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_an_in_doubt_call_is_surfaced_as_an_outcome_unknown_approval(
    make_user: Callable[..., Any], effects: Callable[[], list[str]]
) -> None:
    run = in_doubt(make_user("ann"))
    asked = approval(run, "slow")
    assert (asked.kind, asked.status, asked.tool_call_id) == (
        "outcome_unknown",
        "pending",
        "s1",
    )
    assert effects() == []  # never re-run silently


@pytest.mark.django_db(transaction=True)
def test_it_happened_over_rest_records_the_result_and_the_call_never_runs(
    make_user: Callable[..., Any], effects: Callable[[], list[str]]
) -> None:
    ann = make_user("ann")
    run = in_doubt(ann)
    asked = approval(run, "slow")
    response = client(ann).post(
        verdicts_url(run),
        {
            "verdicts": [
                {
                    "approvalId": "s1",
                    "approved": True,
                    "token": asked.token,
                    "result": "slow 1 done (checked by hand)",
                }
            ],
            "resume": False,
        },
        format="json",
    )
    assert response.status_code == 200, response.json()
    assert services.resume_run(run.run_id).status == "completed"
    assert "slow:1:start" not in effects()
    assert tool_results(run)["s1"] == ("slow 1 done (checked by hand)", False)
    asked.refresh_from_db()
    assert (asked.status, asked.decided_by) == ("approved", ann)


@pytest.mark.django_db(transaction=True)
def test_run_it_again_runs_the_in_doubt_call_once_more(
    make_user: Callable[..., Any], effects: Callable[[], list[str]]
) -> None:
    ann = make_user("ann")
    run = in_doubt(ann)
    services.decide_approval(approval(run, "slow"), user=ann, approved=True)
    assert services.resume_run(run.run_id).status == "completed"
    assert effects().count("slow:1:start") == 1
    assert tool_results(run)["s1"] == ("slow 1 done", False)


@pytest.mark.django_db(transaction=True)
def test_mark_it_failed_answers_the_in_doubt_call_with_an_error(
    make_user: Callable[..., Any], effects: Callable[[], list[str]]
) -> None:
    ann = make_user("ann")
    run = in_doubt(ann)
    services.decide_approval(
        approval(run, "slow"), user=ann, approved=False, reason="Marked failed."
    )
    assert services.resume_run(run.run_id).status == "completed"
    assert "slow:1:start" not in effects()
    result, is_error = tool_results(run)["s1"]
    assert is_error
    assert "Marked failed." in result


@pytest.mark.django_db
def test_a_result_is_refused_on_a_gated_call_approval(
    make_user: Callable[..., Any],
) -> None:
    ann = make_user("ann")
    run = suspended(owner=ann)
    gated = run.approvals.first()
    assert gated is not None
    refusal = state_refusal(gated, Verdict(True, result=RecordedResult("done")))
    assert refusal is not None
    assert isinstance(refusal.error, InvalidVerdict)
    assert refusal.field == "result"


# -- a call in doubt that its tool can settle ------------------------------------------

TRANSFER = ToolUsePart("t1", "transfer", {"amount": 7})


def _key(run: Run) -> str:
    """The idempotency key the ``transfer`` call ``t1`` of ``run`` runs under."""
    return ToolContext(
        tool_call_id="t1",
        tool_name="transfer",
        messages=(),
        signal=None,
        deps=Deps(),
        idempotency_scope=run.run_id,
    ).idempotency_key


def _call(run: Run) -> RunCall:
    return RunCall.objects.get(step__run=run, tool_call_id="t1")


@pytest.mark.django_db(transaction=True)
def test_a_call_in_doubt_its_tool_finds_happened_completes_without_a_person(
    effects: Callable[[], list[str]],
) -> None:
    run = died_in("reconciling", TRANSFER)
    record_effect(f"transfer:{_key(run)}")  # the transfer went out before the crash
    assert services.resume_run(run.run_id).status == "completed"
    assert effects() == [f"transfer:{_key(run)}"]  # it did not run again
    assert tool_results(run)["t1"] == ("transferred 7", False)
    call = _call(run)
    assert (call.finished, decode_json(call.result), call.is_error) == (
        True,
        "transferred 7",
        False,
    )
    assert not run.approvals.exists()


@pytest.mark.django_db(transaction=True)
def test_a_call_in_doubt_that_did_not_happen_runs_once_under_its_start_row(
    effects: Callable[[], list[str]],
) -> None:
    run = died_in("reconciling", TRANSFER)
    started = _call(run).pk
    assert services.resume_run(run.run_id).status == "completed"
    assert effects() == [f"transfer:{_key(run)}"]
    assert tool_results(run)["t1"] == ("transferred 7", False)
    call = _call(run)
    assert (call.pk, call.finished) == (started, True)  # no second start record
    assert not run.approvals.exists()


@pytest.mark.django_db(transaction=True)
def test_a_call_in_doubt_its_tool_cannot_tell_about_waits_for_a_person(
    effects: Callable[[], list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEUZ_TEST_CANNOT_TELL", "1")
    run = died_in("reconciling", TRANSFER)
    assert services.resume_run(run.run_id).status == "suspended"
    asked = approval(run, "transfer")
    assert (asked.kind, asked.status) == ("outcome_unknown", "pending")
    assert effects() == []
    assert not _call(run).finished
