"""The contract every step journal passes (STYLE rule 3).

Subclass :class:`StepJournalContract` and provide a ``step_journal`` fixture (a fresh
journal) and a ``run_id`` fixture naming a run the journal may write (a database journal
may need the run's row to exist). A journal that checks decisions against records of its
own overrides :meth:`StepJournalContract.make_decision` to record one.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from ... import Message, TextPart, ToolUsePart
from ..._awaitable import resolve
from ...approvals import input_digest
from ...durable.step_journal import Authorization, JournalStep
from ...exceptions import UnauthorizedExecution

_decisions = itertools.count(1)


PAY_INPUT = {"usd": 5, "note": "é"}


def _turn(*ids: str, text: str = "On it.") -> Message:
    return Message(
        "assistant",
        (TextPart(text), *(ToolUsePart(i, "pay", PAY_INPUT) for i in ids)),
    )


class StepJournalContract:
    """Behaviour every step journal shares. Subclasses provide ``step_journal`` and
    ``run_id``."""

    @staticmethod
    async def call(journal: Any, name: str, *args: Any) -> Any:
        method = getattr(journal, "a" + name, None) or getattr(journal, name)
        return await resolve(method(*args))

    async def make_decision(self, run_id: str, tool_call_id: str) -> str:
        """A recorded decision approving call ``tool_call_id`` of ``pay`` on the input
        :func:`_turn` gives it; its id."""
        return f"decision-{next(_decisions)}"

    async def start_on(
        self, journal: Any, run_id: str, step: int, call: str, decision: str
    ) -> None:
        method = getattr(journal, "arecord_start", None) or journal.record_start
        await resolve(
            method(
                run_id,
                step,
                call,
                tool_name="pay",
                authorization=Authorization(decision, input_digest(PAY_INPUT)),
            )
        )

    async def load(self, journal: Any, run_id: str, step: int) -> JournalStep | None:
        loaded = await self.call(journal, "load_step", run_id, step)
        assert loaded is None or isinstance(loaded, JournalStep)
        return loaded

    async def test_an_unknown_step_loads_as_none(
        self, step_journal: Any, run_id: str
    ) -> None:
        assert await self.load(step_journal, run_id, 0) is None
        assert await self.call(step_journal, "latest_step", run_id) is None

    async def test_a_recorded_turn_comes_back_equal_with_its_basis(
        self, step_journal: Any, run_id: str
    ) -> None:
        turn = _turn("c1", "c2")
        await self.call(step_journal, "record_turn", run_id, 3, 7, turn)
        step = await self.load(step_journal, run_id, 3)
        assert step is not None
        assert (step.step_index, step.basis, step.message) == (3, 7, turn)
        assert dict(step.calls) == {}

    async def test_a_start_then_an_outcome_are_kept_per_call(
        self, step_journal: Any, run_id: str
    ) -> None:
        await self.call(step_journal, "record_turn", run_id, 0, 1, _turn("c1", "c2"))
        await self.call(step_journal, "record_start", run_id, 0, "c1")
        await self.call(step_journal, "record_start", run_id, 0, "c2")
        await self.call(
            step_journal, "record_outcome", run_id, 0, "c1", {"ok": [1, "é"]}, False
        )
        step = await self.load(step_journal, run_id, 0)
        assert step is not None
        first, second = step.calls["c1"], step.calls["c2"]
        assert (first.finished, first.result, first.is_error) == (
            True,
            {"ok": [1, "é"]},
            False,
        )
        assert (second.finished, second.result) == (False, None)

    async def test_an_error_outcome_is_kept_as_an_error(
        self, step_journal: Any, run_id: str
    ) -> None:
        await self.call(step_journal, "record_turn", run_id, 0, 1, _turn("c1"))
        await self.call(step_journal, "record_start", run_id, 0, "c1")
        await self.call(
            step_journal, "record_outcome", run_id, 0, "c1", "card declined", True
        )
        step = await self.load(step_journal, run_id, 0)
        assert step is not None
        assert step.calls["c1"].is_error is True
        assert step.calls["c1"].result == "card declined"

    async def test_an_outcome_without_a_start_is_recorded(
        self, step_journal: Any, run_id: str
    ) -> None:
        await self.call(step_journal, "record_turn", run_id, 0, 1, _turn("c1"))
        await self.call(step_journal, "record_outcome", run_id, 0, "c1", "done", False)
        step = await self.load(step_journal, run_id, 0)
        assert step is not None
        assert step.calls["c1"].finished

    async def test_recording_a_turn_again_replaces_the_step_and_its_calls(
        self, step_journal: Any, run_id: str
    ) -> None:
        await self.call(step_journal, "record_turn", run_id, 0, 1, _turn("c1"))
        await self.call(step_journal, "record_start", run_id, 0, "c1")
        await self.call(
            step_journal, "record_turn", run_id, 0, 1, _turn("c9", text="Again.")
        )
        step = await self.load(step_journal, run_id, 0)
        assert step is not None
        assert step.message == _turn("c9", text="Again.")
        assert dict(step.calls) == {}

    async def test_the_latest_step_is_the_highest_index(
        self, step_journal: Any, run_id: str
    ) -> None:
        for index in (0, 2, 1):
            await self.call(
                step_journal, "record_turn", run_id, index, index, _turn(f"c{index}")
            )
        latest = await self.call(step_journal, "latest_step", run_id)
        assert latest is not None
        assert latest.step_index == 2

    async def test_forget_start_lets_the_call_run_as_if_it_never_started(
        self, step_journal: Any, run_id: str
    ) -> None:
        await self.call(step_journal, "record_turn", run_id, 0, 1, _turn("c1", "c2"))
        await self.call(step_journal, "record_start", run_id, 0, "c1")
        await self.call(step_journal, "record_start", run_id, 0, "c2")
        await self.call(step_journal, "forget_start", run_id, 0, "c1")
        step = await self.load(step_journal, run_id, 0)
        assert step is not None
        assert set(step.calls) == {"c2"}

    async def test_a_call_started_on_a_decision_keeps_it_with_its_outcome(
        self, step_journal: Any, run_id: str
    ) -> None:
        await self.call(step_journal, "record_turn", run_id, 0, 1, _turn("c1"))
        decision = await self.make_decision(run_id, "c1")
        await self.start_on(step_journal, run_id, 0, "c1", decision)
        await self.call(step_journal, "record_outcome", run_id, 0, "c1", "ok", False)
        step = await self.load(step_journal, run_id, 0)
        assert step is not None
        assert (step.calls["c1"].finished, step.calls["c1"].decision_id) == (
            True,
            decision,
        )

    async def test_a_decision_authorizes_one_execution_only(
        self, step_journal: Any, run_id: str
    ) -> None:
        """A second call — of the same step, or of a later step re-using the call id —
        never runs on a decision that authorized an execution already."""
        await self.call(step_journal, "record_turn", run_id, 0, 1, _turn("c1", "c2"))
        await self.call(step_journal, "record_turn", run_id, 1, 3, _turn("c1"))
        decision = await self.make_decision(run_id, "c1")
        await self.start_on(step_journal, run_id, 0, "c1", decision)
        with pytest.raises(UnauthorizedExecution):
            await self.start_on(step_journal, run_id, 1, "c1", decision)
        later = await self.load(step_journal, run_id, 1)
        assert later is not None
        assert dict(later.calls) == {}  # the refused start recorded nothing

    async def test_the_same_execution_starting_again_keeps_its_decision(
        self, step_journal: Any, run_id: str
    ) -> None:
        """An idempotent call in doubt that runs again is the execution it was."""
        await self.call(step_journal, "record_turn", run_id, 0, 1, _turn("c1"))
        decision = await self.make_decision(run_id, "c1")
        await self.start_on(step_journal, run_id, 0, "c1", decision)
        await self.start_on(step_journal, run_id, 0, "c1", decision)
        step = await self.load(step_journal, run_id, 0)
        assert step is not None
        assert step.calls["c1"].decision_id == decision
