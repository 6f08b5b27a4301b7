"""The step journal: a resume repeats no recorded model turn and no recorded tool call,
and never silently re-runs a call whose outcome is unknown."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from deuz_django.core import (
    Deps,
    Message,
    Reconciliation,
    ToolContext,
    ToolResultPart,
    generate_text,
    tool,
)
from deuz_django.core.approvals import edited_result
from deuz_django.core.durable import (
    CallRecord,
    DurableSession,
    InMemorySessionStore,
    InMemoryStepJournal,
    resume_from_checkpoint,
)
from deuz_django.core.testing import ScriptedReply, reply
from deuz_django.core.testing.contracts import (
    FixedClock,
    StepJournalContract,
    make_checkpoint,
)

from .reliability._support import Crash, PositionalModel
from .support import RecordingLogger

RUN = "run-1"


class TestInMemoryStepJournal(StepJournalContract):
    @pytest.fixture
    def step_journal(self) -> InMemoryStepJournal:
        return InMemoryStepJournal()

    @pytest.fixture
    def run_id(self) -> str:
        return RUN


class Shop:
    """A ``refund`` tool (not safe to repeat; ``gated``: it needs approval and may be
    edited; it may ``reconcile``), a ``lookup`` tool (idempotent) and a model that
    calls both in step 0, then answers."""

    def __init__(
        self,
        *,
        crash_in: str | None = None,
        gated: bool = False,
        reconcile: Callable[[Any, ToolContext], Any] | None = None,
    ) -> None:
        self.executed: list[str] = []
        self.keys: dict[str, str] = {}  # the idempotency key each call ran under
        self.model_calls = 0
        self.crash_in = crash_in
        self.logger = RecordingLogger()
        self.journal = InMemoryStepJournal()
        self.store = InMemorySessionStore(step_journal=self.journal)

        @tool(needs_approval=gated, editable=gated, reconcile=reconcile)
        def refund(usd: int, ctx: ToolContext) -> str:
            """Refund a customer."""
            return self._run(ctx, f"refunded {usd}")

        @tool(idempotent=True)
        def lookup(order: str, ctx: ToolContext) -> str:
            """Look an order up."""
            return self._run(ctx, f"order {order} is late")

        self.tools = [lookup, refund]
        replies: list[ScriptedReply] = [
            reply(
                text="Let me check.",
                tool_calls=[
                    ("c1", "lookup", {"order": "A7"}),
                    ("c2", "refund", {"usd": 5}),
                ],
            ),
            reply(text="Refunded."),
        ]
        self.model = PositionalModel(replies, on_call=self._count)

    def _count(self) -> None:
        self.model_calls += 1

    def _run(self, ctx: ToolContext, value: str) -> str:
        self.executed.append(ctx.tool_call_id)
        self.keys[ctx.tool_call_id] = ctx.idempotency_key
        if ctx.tool_call_id == self.crash_in:
            self.crash_in = None
            raise Crash(f"killed inside {ctx.tool_name}")
        return value

    def options(self, **extra: Any) -> dict[str, Any]:
        return {
            "model": self.model,
            "tools": self.tools,
            "max_steps": 4,
            "max_tool_concurrency": 1,
            "deps": Deps(clock=FixedClock(), logger=self.logger),
            **extra,
        }

    async def start(self) -> None:
        """A leg from the run's first checkpoint, killed in the tool ``crash_in``."""
        self.store.save(
            make_checkpoint(RUN, 0, messages=[Message("user", "Refund my late order.")])
        )
        with pytest.raises(Crash):
            await self.resume()

    def answer(self, tool_call_id: str) -> ToolResultPart:
        """The stored history's answer to one call."""
        checkpoint = self.store.load(RUN)
        assert checkpoint is not None
        return next(
            part
            for message in checkpoint.messages
            if message.role == "tool"
            for part in message.content
            if isinstance(part, ToolResultPart) and part.tool_use_id == tool_call_id
        )

    async def resume(self, **extra: Any) -> Any:
        return await resume_from_checkpoint(self.store, RUN, **self.options(**extra))


async def test_the_turn_is_recorded_before_any_tool_runs() -> None:
    shop = Shop()
    seen: list[Any] = []

    @tool
    def refund(usd: int) -> str:
        """Refund."""
        seen.append(shop.journal.load_step(RUN, 0))
        return "ok"

    shop.tools = [shop.tools[0], refund]
    await generate_text(
        prompt="Refund.", session=DurableSession(shop.store, RUN), **shop.options()
    )
    step = seen[0]
    assert [p.id for p in step.message.content[1:]] == ["c1", "c2"]
    assert step.calls["c1"].finished
    assert step.calls["c1"].result == "order A7 is late"
    assert not step.calls["c2"].finished  # its start is recorded, its outcome not yet


async def test_a_recorded_turn_is_reused_without_a_second_model_call() -> None:
    shop = Shop(crash_in="c1")
    await shop.start()
    assert shop.model_calls == 1
    result = await shop.resume()
    assert (
        shop.model_calls == 2
    )  # only step 1's call: step 0's turn came from the journal
    assert [c.tool_call_id for c in result.steps[0].tool_calls] == ["c1", "c2"]
    assert result.text == "Refunded."


async def test_a_final_answer_is_journaled_and_reused_when_its_save_failed() -> None:
    """Every step is in the journal (a fork point), the last one too: a leg whose
    completed checkpoint was not saved ends on the recorded answer, no model call."""
    shop = Shop()
    await generate_text(
        prompt="Refund.", session=DurableSession(shop.store, RUN), **shop.options()
    )
    final = shop.journal.load_step(RUN, 1)
    assert final is not None
    assert (final.message.text, dict(final.calls)) == ("Refunded.", {})
    checkpoint = shop.store.load(RUN)
    assert checkpoint is not None
    shop.store.save(
        replace(
            checkpoint,
            step_index=1,
            status="running",
            messages=checkpoint.messages[:-1],
        )
    )
    calls = shop.model_calls
    result = await shop.resume()
    assert (result.text, shop.model_calls) == ("Refunded.", calls)


async def test_a_call_with_a_recorded_outcome_is_never_executed_again() -> None:
    shop = Shop()
    shop.tools.reverse()  # refund first, then the lookup that crashes
    shop.model.replies = (
        reply(
            tool_calls=[("c2", "refund", {"usd": 5}), ("c1", "lookup", {"order": "A7"})]
        ),
        reply(text="Refunded."),
    )
    shop.crash_in = "c1"
    await shop.start()
    result = await shop.resume()
    assert shop.executed == ["c2", "c1", "c1"]  # the refund ran once, the lookup again
    assert [r.result for r in result.steps[0].tool_results] == [
        "refunded 5",
        "order A7 is late",
    ]


async def test_an_in_doubt_idempotent_call_runs_again() -> None:
    shop = Shop(crash_in="c1")
    await shop.start()
    result = await shop.resume()
    assert shop.executed == ["c1", "c1", "c2"]
    assert result.finish_reason == "stop"


async def test_an_in_doubt_call_of_a_tool_not_safe_to_repeat_is_never_re_run() -> None:
    shop = Shop(crash_in="c2")
    await shop.start()
    result = await shop.resume()
    assert shop.executed == ["c1", "c2"]  # the lookup's outcome was recorded; no rerun
    [request] = result.pending_approvals or ()
    assert (request.approval_id, request.tool_name) == ("c2", "refund")
    checkpoint = shop.store.load(RUN)
    assert checkpoint is not None
    assert checkpoint.status == "suspended"
    assert shop.model_calls == 1


async def test_it_happened_uses_the_result_a_person_recorded() -> None:
    shop = Shop(crash_in="c2")
    await shop.start()
    await shop.resume()
    shop.journal.record_outcome(RUN, 0, "c2", "refunded 5 (seen in Stripe)", False)
    result = await shop.resume(
        approval_responses=[{"approvalId": "c2", "approved": True}]
    )
    assert shop.executed == ["c1", "c2"]
    assert shop.answer("c2").result == "refunded 5 (seen in Stripe)"
    assert result.text == "Refunded."


async def test_run_it_again_executes_the_call_once_more() -> None:
    shop = Shop(crash_in="c2")
    await shop.start()
    await shop.resume()
    shop.journal.forget_start(RUN, 0, "c2")
    await shop.resume(approval_responses=[{"approvalId": "c2", "approved": True}])
    assert shop.executed == ["c1", "c2", "c2"]
    assert shop.answer("c2").result == "refunded 5"


async def test_mark_it_failed_answers_the_call_with_an_error() -> None:
    shop = Shop(crash_in="c2")
    await shop.start()
    await shop.resume()
    await shop.resume(
        approval_responses=[{"approvalId": "c2", "approved": False, "reason": "failed"}]
    )
    assert shop.executed == ["c1", "c2"]
    answer = shop.answer("c2")
    assert answer.is_error
    assert "failed" in answer.result


async def test_a_journal_leaves_the_checkpoints_unchanged() -> None:
    saved: dict[bool, list[str]] = {}
    for journaled in (False, True):
        shop = Shop()
        store = shop.store if journaled else InMemorySessionStore()
        snapshots: list[str] = []
        original = store.save

        def save(
            checkpoint: Any, original: Any = original, out: Any = snapshots
        ) -> None:
            out.append(str(checkpoint.to_json()))
            original(checkpoint)

        store.save = save  # type: ignore[method-assign]
        await generate_text(
            prompt="Refund.", session=DurableSession(store, RUN), **shop.options()
        )
        saved[journaled] = snapshots
    assert saved[True] == saved[False]


async def test_a_fence_that_raises_stops_the_leg_before_the_next_model_call() -> None:
    shop = Shop()
    checks: list[int] = []

    async def fence() -> None:
        checks.append(len(shop.executed))
        if len(checks) == 4:  # model, c1, c2, then the second model call
            raise RuntimeError("lease lost")

    with pytest.raises(RuntimeError, match="lease lost"):
        await generate_text(
            prompt="Refund.",
            session=DurableSession(shop.store, RUN),
            **shop.options(deps=Deps(clock=FixedClock(), fence=fence)),
        )
    assert checks == [0, 0, 1, 2]
    assert shop.model_calls == 1


async def test_a_fence_that_raises_stops_the_leg_before_the_next_tool() -> None:
    shop = Shop()
    checks = 0

    async def fence() -> None:
        nonlocal checks
        checks += 1
        if checks == 3:
            raise RuntimeError("lease lost")

    with pytest.raises(RuntimeError, match="lease lost"):
        await generate_text(
            prompt="Refund.",
            session=DurableSession(shop.store, RUN),
            **shop.options(deps=Deps(clock=FixedClock(), fence=fence)),
        )
    assert shop.executed == ["c1"]


# -- a tool that can tell what became of its call --------------------------------------


class Reconciler:
    """A ``reconcile`` that answers ``found`` (sync, or ``asynchronous``) and keeps what
    it was asked: the arguments and the idempotency key of each call."""

    def __init__(self, found: Any, *, asynchronous: bool = False) -> None:
        self.found = found
        self.asked: list[tuple[Any, str]] = []
        self.answer: Callable[[Any, ToolContext], Any] = self._answer
        if asynchronous:

            async def answer(args: Any, ctx: ToolContext) -> Any:
                return self._answer(args, ctx)

            self.answer = answer

    def _answer(self, args: Any, ctx: ToolContext) -> Any:
        self.asked.append((args, ctx.idempotency_key))
        if isinstance(self.found, Exception):
            raise self.found
        return self.found


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_a_call_in_doubt_its_tool_finds_happened_takes_the_found_outcome(
    asynchronous: bool,
) -> None:
    reconciler = Reconciler(
        Reconciliation.happened("refunded 5 (found)"), asynchronous=asynchronous
    )
    shop = Shop(crash_in="c2", reconcile=reconciler.answer)
    await shop.start()
    result = await shop.resume()
    assert shop.executed == ["c1", "c2"]  # the refund never ran again
    assert reconciler.asked == [({"usd": 5}, shop.keys["c2"])]  # validated args
    assert shop.answer("c2").result == "refunded 5 (found)"
    step = shop.journal.load_step(RUN, 0)
    assert step is not None
    assert step.calls["c2"] == CallRecord("c2", True, "refunded 5 (found)", False)
    assert not result.pending_approvals
    assert result.text == "Refunded."


async def test_a_found_error_is_the_calls_error_outcome() -> None:
    found = Reconciliation.happened("card declined", is_error=True)
    shop = Shop(crash_in="c2", reconcile=Reconciler(found).answer)
    await shop.start()
    await shop.resume()
    answer = shop.answer("c2")
    assert (answer.result, answer.is_error) == ("card declined", True)


async def test_a_call_in_doubt_that_did_not_happen_runs_once_more_without_a_person() -> (
    None
):
    reconciler = Reconciler(Reconciliation.did_not_happen())
    shop = Shop(crash_in="c2", reconcile=reconciler.answer)
    await shop.start()
    result = await shop.resume()
    assert shop.executed == ["c1", "c2", "c2"]
    assert shop.answer("c2").result == "refunded 5"
    assert not result.pending_approvals
    assert result.text == "Refunded."


@pytest.mark.parametrize(
    "found",
    [
        Reconciliation.cannot_tell(),
        ConnectionError("the payment API is down"),
        "refunded",  # not a Reconciliation: a bug, treated as a failure
    ],
    ids=["cannot-tell", "raises", "wrong-answer"],
)
async def test_a_call_in_doubt_its_tool_cannot_tell_about_goes_to_a_person(
    found: Any,
) -> None:
    reconciler = Reconciler(found)
    shop = Shop(crash_in="c2", reconcile=reconciler.answer)
    await shop.start()
    result = await shop.resume()
    assert len(reconciler.asked) == 1
    assert shop.executed == ["c1", "c2"]
    [request] = result.pending_approvals or ()
    assert (request.approval_id, request.tool_name) == ("c2", "refund")
    step = shop.journal.load_step(RUN, 0)
    assert step is not None
    assert not step.calls["c2"].finished
    told = isinstance(found, Reconciliation)  # else the failure is logged
    assert len(shop.logger.warnings) == (0 if told else 1)


async def test_a_reconcile_that_runs_past_the_tools_timeout_cannot_tell() -> None:
    shop = Shop(crash_in="c2")
    await shop.start()

    async def hangs(args: Any, ctx: ToolContext) -> Reconciliation:
        await asyncio.Event().wait()  # the payment API never answers
        return Reconciliation.did_not_happen()

    # The next leg's tools: the refund now has a timeout (the fixed clock's timers fire
    # at once) and a reconcile that hangs.
    shop.tools[1] = replace(shop.tools[1], timeout_ms=50, reconcile=hangs)
    result = await shop.resume()
    [request] = result.pending_approvals or ()
    assert request.approval_id == "c2"
    assert shop.executed == ["c1", "c2"]
    [(warning, _)] = shop.logger.warnings
    assert "timeout_ms" in warning


async def test_reconcile_is_asked_only_about_a_call_in_doubt() -> None:
    reconciler = Reconciler(Reconciliation.happened("never used"))
    shop = Shop(crash_in="c1", reconcile=reconciler.answer)  # before the refund starts
    await shop.start()
    await shop.resume()
    assert shop.executed == ["c1", "c1", "c2"]
    assert shop.answer("c2").result == "refunded 5"
    assert reconciler.asked == []


async def test_an_approved_call_left_in_doubt_is_reconciled_when_it_settles_again() -> (
    None
):
    reconciler = Reconciler(Reconciliation.happened("refunded 3 (found)"))
    shop = Shop(gated=True, reconcile=reconciler.answer)
    shop.store.save(make_checkpoint(RUN, 0, messages=[Message("user", "Refund.")]))
    assert (await shop.resume()).pending_approvals  # the refund waits for a person
    approve = [{"approvalId": "c2", "approved": True, "editedInput": {"usd": 3}}]
    shop.crash_in = "c2"
    with pytest.raises(Crash):
        await shop.resume(approval_responses=approve)
    result = await shop.resume(approval_responses=approve)
    assert shop.executed == ["c1", "c2"]
    assert reconciler.asked == [({"usd": 3}, shop.keys["c2"])]  # the edited input
    found = edited_result("refunded 3 (found)", {"usd": 3})
    assert shop.answer("c2").result == found  # as the model is told of an edit
    assert result.text == "Refunded."
