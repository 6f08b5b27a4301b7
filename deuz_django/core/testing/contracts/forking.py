"""The contract every forking store passes (STYLE rule 3).

Subclass :class:`ForkingStoreContract` and provide a ``store`` fixture: a fresh, empty
store that saves checkpoints, forks runs (:class:`~deuz_django.core.durable.ForkingStore`)
and has a ``step_journal``. A journal that checks decisions against records of its own
overrides :meth:`ForkingStoreContract.make_decision` to record one.

The parent forked here is the run ``run-p``: a user asks for a refund; step 0 looks the
order up; step 1 refunds it (on a decision) and emails the customer (a call left in
doubt: started, no outcome); step 2 answers. Its checkpoint is completed at boundary 3.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from ... import Message, TextPart, ToolResultPart, ToolUsePart, Usage
from ..._awaitable import resolve
from ...approvals import input_digest
from ...durable import (
    AgentCheckpoint,
    Authorization,
    CheckpointNotFoundError,
    ForkEdit,
    ForkingStore,
    InvalidForkError,
    JournalStep,
    RunExistsError,
    fork_from_checkpoint,
)
from .forked_runs import ForkedRunsContract
from .samples import make_checkpoint

PARENT = "run-p"
REFUND = {"usd": 5}
_decisions = itertools.count(1)

HISTORY = (
    Message("system", "Be brief."),
    Message("user", "Refund order A-7."),
    Message(
        "assistant",
        (TextPart("Looking."), ToolUsePart("c1", "lookup", {"order": "A-7"})),
    ),
    Message("tool", (ToolResultPart("c1", "late"),)),
    Message(
        "assistant",
        (
            ToolUsePart("c2", "refund", REFUND),
            ToolUsePart("c3", "email", {"to": "ann"}),
        ),
    ),
    Message(
        "tool",
        (ToolResultPart("c2", "refunded 5"), ToolResultPart("c3", "sent")),
    ),
    Message("assistant", "Refunded."),
)
BASES = {0: 2, 1: 4, 2: 6}  # how much history each step's model call answered


class ForkingStoreContract(ForkedRunsContract):
    """Behaviour every forking store shares. Subclasses provide ``store``."""

    @staticmethod
    async def call(target: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        method = getattr(target, "a" + name, None) or getattr(target, name)
        return await resolve(method(*args, **kwargs))

    async def make_decision(self, run_id: str, tool_call_id: str) -> str:
        """A recorded decision approving call ``tool_call_id`` of ``refund`` on
        ``REFUND``; its id."""
        return f"decision-{next(_decisions)}"

    async def parent(self, store: Any) -> AgentCheckpoint:
        """Write ``run-p`` (module docstring) and return its checkpoint."""
        journal = store.step_journal
        checkpoint = make_checkpoint(
            PARENT,
            3,
            status="completed",
            messages=HISTORY,
            usage=Usage(input_tokens=30, output_tokens=9, total_tokens=39),
        )
        await self.call(store, "save", checkpoint)
        for index, basis in BASES.items():
            await self.call(
                journal, "record_turn", PARENT, index, basis, HISTORY[basis]
            )
        await self.call(journal, "record_outcome", PARENT, 0, "c1", "late", False)
        decision = await self.make_decision(PARENT, "c2")
        authorization = Authorization(decision, input_digest(REFUND))
        await self.call(
            journal,
            "record_start",
            PARENT,
            1,
            "c2",
            tool_name="refund",
            authorization=authorization,
        )
        await self.call(journal, "record_outcome", PARENT, 1, "c2", "refunded 5", False)
        await self.call(journal, "record_start", PARENT, 1, "c3", tool_name="email")
        return checkpoint

    async def fork(self, store: Any, run_id: str, step: int, **options: Any) -> Any:
        return await fork_from_checkpoint(
            store, PARENT, step_index=step, run_id=run_id, **options
        )

    async def step(self, store: Any, run_id: str, index: int) -> JournalStep | None:
        found = await self.call(store.step_journal, "load_step", run_id, index)
        assert found is None or isinstance(found, JournalStep)
        return found

    # -- the fork points --------------------------------------------------------------------

    def test_store_satisfies_the_forking_store_protocol(self, store: Any) -> None:
        assert isinstance(store, ForkingStore)

    async def test_a_fork_before_the_turn_starts_from_what_the_step_answered(
        self, store: Any
    ) -> None:
        await self.parent(store)
        forked = await self.fork(store, "run-f", 1)
        assert (forked.run_id, forked.step_id) == ("run-f", "run-f#1")
        assert (forked.step_index, forked.status) == (1, "running")
        assert forked.messages == HISTORY[:4]
        assert forked.usage.total_tokens == 0  # the fork counts its own spending
        assert forked.pending_approvals is None
        loaded = await self.call(store, "load", "run-f")
        assert loaded is not None
        assert loaded.to_json() == forked.to_json()
        assert await self.step(store, "run-f", 1) is None  # the model answers anew

    async def test_a_fork_inherits_the_journal_before_its_step(
        self, store: Any
    ) -> None:
        await self.parent(store)
        await self.fork(store, "run-f", 2)
        looked_up = await self.step(store, "run-f", 0)
        refunded = await self.step(store, "run-f", 1)
        assert looked_up is not None
        assert refunded is not None
        assert (looked_up.basis, looked_up.message) == (2, HISTORY[2])
        assert looked_up.calls["c1"].result == "late"
        # Outcomes come along; the parent's decisions do not.
        assert refunded.calls["c2"].finished
        assert refunded.calls["c2"].decision_id is None
        assert not refunded.calls["c3"].finished
        assert await self.step(store, "run-f", 2) is None

    async def test_a_fork_with_the_turn_starts_its_journal_with_it(
        self, store: Any
    ) -> None:
        await self.parent(store)
        forked = await self.fork(store, "run-f", 1, with_turn=True)
        assert forked.messages == HISTORY[:4]
        kept = await self.step(store, "run-f", 1)
        assert kept is not None
        assert (kept.step_index, kept.basis, kept.message) == (1, 4, HISTORY[4])
        assert (kept.calls["c2"].finished, kept.calls["c2"].result) == (
            True,
            "refunded 5",
        )
        assert kept.calls["c2"].decision_id is None
        assert not kept.calls["c3"].finished  # in doubt here, in doubt in the fork

    async def test_an_edited_message_replaces_the_one_that_started_the_step(
        self, store: Any
    ) -> None:
        await self.parent(store)
        forked = await self.fork(
            store, "run-f", 0, edit=ForkEdit(message="Refund order B-2.")
        )
        assert [m.text for m in forked.messages] == ["Be brief.", "Refund order B-2."]

    async def test_an_edited_input_replaces_the_call_and_forgets_its_outcome(
        self, store: Any
    ) -> None:
        await self.parent(store)
        await self.fork(
            store,
            "run-f",
            1,
            with_turn=True,
            edit=ForkEdit(tool_call_id="c2", input={"usd": 3}),
        )
        kept = await self.step(store, "run-f", 1)
        assert kept is not None
        calls = [p for p in kept.message.parts if isinstance(p, ToolUsePart)]
        assert [(c.id, c.input) for c in calls] == [
            ("c2", {"usd": 3}),
            ("c3", {"to": "ann"}),
        ]
        assert set(kept.calls) == {"c3"}

    async def test_the_parent_is_left_as_it_was(self, store: Any) -> None:
        parent = await self.parent(store)
        before = await self.step(store, PARENT, 1)
        await self.fork(
            store,
            "run-f",
            1,
            with_turn=True,
            edit=ForkEdit(tool_call_id="c2", input={"usd": 3}),
        )
        loaded = await self.call(store, "load", PARENT)
        assert loaded is not None
        assert loaded.to_json() == parent.to_json()
        assert await self.step(store, PARENT, 1) == before

    async def test_two_forks_of_one_step_are_two_runs(self, store: Any) -> None:
        await self.parent(store)
        first = await self.fork(store, "run-f1", 1)
        second = await self.fork(store, "run-f2", 1)
        assert first.messages == second.messages
        assert (first.run_id, second.run_id) == ("run-f1", "run-f2")

    async def test_a_fork_at_the_latest_boundary_takes_the_whole_history(
        self, store: Any
    ) -> None:
        running = make_checkpoint("run-p", 2, messages=HISTORY[:4])
        await self.call(store, "save", running)
        await self.call(store.step_journal, "record_turn", PARENT, 0, 2, HISTORY[2])
        forked = await self.fork(store, "run-f", 2)
        assert (forked.step_index, forked.messages) == (2, HISTORY[:4])

    # -- refused forks ----------------------------------------------------------------------

    @pytest.mark.parametrize(
        ("step", "options", "field"),
        [
            (4, {}, "step"),
            (-1, {}, "step"),
            (3, {}, "step"),  # completed: nothing follows its last step
            (3, {"with_turn": True}, "withTurn"),
            (1, {"edit": ForkEdit(message="x", tool_call_id="c2")}, "edit"),
            (1, {"edit": ForkEdit()}, "edit"),
            (1, {"edit": ForkEdit(message="x"), "with_turn": True}, "edit.message"),
            (1, {"edit": ForkEdit(message="  ")}, "edit.message"),
            (1, {"edit": ForkEdit(tool_call_id="c2", input={})}, "withTurn"),
            (
                1,
                {"edit": ForkEdit(tool_call_id="c2"), "with_turn": True},
                "edit.input",
            ),
            (
                1,
                {"edit": ForkEdit(tool_call_id="c9", input={}), "with_turn": True},
                "edit.toolCallId",
            ),
        ],
    )
    async def test_a_fork_that_does_not_fit_the_run_is_refused_writing_nothing(
        self, store: Any, step: int, options: dict[str, Any], field: str
    ) -> None:
        await self.parent(store)
        with pytest.raises(InvalidForkError) as refused:
            await self.fork(store, "run-f", step, **options)
        assert refused.value.problem.field == field
        assert await self.call(store, "load", "run-f") is None
        assert await self.step(store, "run-f", 0) is None

    async def test_a_new_message_needs_a_user_message_before_the_step(
        self, store: Any
    ) -> None:
        opening = make_checkpoint(PARENT, 0, messages=[Message("system", "Hi.")])
        await self.call(store, "save", opening)
        await self.call(
            store.step_journal, "record_turn", PARENT, 0, 1, Message("assistant", "?")
        )
        with pytest.raises(InvalidForkError) as refused:
            await self.fork(store, "run-f", 0, edit=ForkEdit(message="Hello."))
        assert refused.value.problem.field == "edit.message"

    async def test_an_unknown_run_is_not_found(self, store: Any) -> None:
        with pytest.raises(CheckpointNotFoundError):
            await self.fork(store, "run-f", 0)

    async def test_a_taken_run_id_is_refused_and_the_run_holding_it_kept(
        self, store: Any
    ) -> None:
        parent = await self.parent(store)
        first = await self.fork(store, "run-f", 1)
        for taken in ("run-f", PARENT):
            with pytest.raises(RunExistsError):
                await self.fork(store, taken, 2)
        kept = await self.call(store, "load", "run-f")
        assert kept is not None
        assert kept.to_json() == first.to_json()
        parent_now = await self.call(store, "load", PARENT)
        assert parent_now is not None
        assert parent_now.to_json() == parent.to_json()
