"""The contract every input queue passes, with the store it belongs to (STYLE rule 3).

Subclass :class:`InputQueueContract` and provide a ``store`` fixture: a fresh store whose
``input_queue`` is the queue under test (delivery is marked by the store's save, so the
two are tested together). The contract saves the checkpoints it needs itself.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ... import Message, ToolUsePart
from ..._awaitable import resolve
from ...durable import (
    AgentCheckpoint,
    CheckpointNotFoundError,
    CheckpointStatus,
    InputArrived,
    QueuedInput,
    RunCompletedError,
    resume_from_checkpoint,
)
from ...exceptions import InvalidInputError
from ..models import ScriptedModel, reply
from .samples import make_checkpoint

RUN = "steered-run"
HELLO = Message("user", "Hello.")


class InputQueueContract:
    """Behaviour every input queue shares. Subclasses provide ``store``."""

    # -- helpers: call a sync or an async store alike -----------------------------------

    @staticmethod
    async def put(store: Any, run_id: str, text: str, **kwargs: Any) -> QueuedInput:
        queue = store.input_queue
        method = getattr(queue, "aput", None) or queue.put
        queued = await resolve(method(run_id, text, **kwargs))
        assert isinstance(queued, QueuedInput)
        return queued

    @staticmethod
    async def pending(store: Any, run_id: str = RUN) -> list[QueuedInput]:
        queue = store.input_queue
        method = getattr(queue, "apending", None) or queue.pending
        return list(await resolve(method(run_id)))

    @staticmethod
    async def save(store: Any, checkpoint: AgentCheckpoint) -> None:
        await resolve((getattr(store, "asave", None) or store.save)(checkpoint))

    @staticmethod
    async def load(store: Any, run_id: str = RUN) -> AgentCheckpoint | None:
        loaded: AgentCheckpoint | None = await resolve(
            (getattr(store, "aload", None) or store.load)(run_id)
        )
        return loaded

    async def started(
        self,
        store: Any,
        status: CheckpointStatus = "running",
        messages: tuple[Message, ...] = (HELLO,),
    ) -> AgentCheckpoint:
        checkpoint = make_checkpoint(RUN, 1, status=status, messages=messages)
        await self.save(store, checkpoint)
        return checkpoint

    async def save_holding(
        self,
        store: Any,
        inputs: list[QueuedInput],
        status: CheckpointStatus = "running",
        step_index: int = 2,
    ) -> AgentCheckpoint:
        """A checkpoint whose history holds ``inputs`` after the first message, then
        an answer."""
        history = (HELLO, *(i.message() for i in inputs), Message("assistant", "OK."))
        checkpoint = make_checkpoint(RUN, step_index, status=status, messages=history)
        await self.save(store, checkpoint)
        return checkpoint

    # -- accepting ----------------------------------------------------------------------

    async def test_inputs_are_pending_in_the_order_they_were_accepted(
        self, store: Any
    ) -> None:
        await self.started(store)
        first = await self.put(store, RUN, "Use the EU warehouse.")
        second = await self.put(store, RUN, "And ship by air — ✈️ ünïcode.")
        assert (first.seq, second.seq) == (1, 2)
        assert first.input_id != second.input_id
        assert await self.pending(store) == [first, second]
        assert second.text == "And ship by air — ✈️ ünïcode."
        assert not second.delivered

    async def test_the_same_input_id_put_again_returns_the_first_input(
        self, store: Any
    ) -> None:
        await self.started(store)
        first = await self.put(store, RUN, "Once.", input_id="client-1")
        again = await self.put(store, RUN, "Once (retried).", input_id="client-1")
        assert again == first
        assert [i.input_id for i in await self.pending(store)] == ["client-1"]

    async def test_concurrent_puts_take_distinct_consecutive_seqs(
        self, store: Any
    ) -> None:
        await self.started(store)
        queued = await asyncio.gather(
            *(self.put(store, RUN, f"input {n}") for n in range(6))
        )
        assert sorted(i.seq for i in queued) == [1, 2, 3, 4, 5, 6]
        assert [i.seq for i in await self.pending(store)] == [1, 2, 3, 4, 5, 6]

    async def test_a_suspended_run_accepts_input(self, store: Any) -> None:
        await self.started(store, "suspended")
        await self.put(store, RUN, "While you wait: the order is A-7.")
        assert len(await self.pending(store)) == 1

    async def test_a_completed_run_refuses_input(self, store: Any) -> None:
        await self.started(store, "completed")
        with pytest.raises(RunCompletedError):
            await self.put(store, RUN, "Too late.")

    async def test_an_unknown_run_refuses_input(self, store: Any) -> None:
        with pytest.raises(CheckpointNotFoundError):
            await self.put(store, "no-such-run", "Hello?")

    async def test_empty_text_is_refused(self, store: Any) -> None:
        await self.started(store)
        with pytest.raises(InvalidInputError):
            await self.put(store, RUN, "  ")
        assert await self.pending(store) == []

    # -- delivering ---------------------------------------------------------------------

    async def test_the_checkpoint_that_holds_an_input_marks_it_delivered(
        self, store: Any
    ) -> None:
        await self.started(store)
        first = await self.put(store, RUN, "First.")
        second = await self.put(store, RUN, "Second.")
        await self.save_holding(store, [first])
        assert await self.pending(store) == [second]

    async def test_a_checkpoint_without_the_input_leaves_it_pending(
        self, store: Any
    ) -> None:
        # A leg took the input and died before its checkpoint: the next leg gets it.
        await self.started(store)
        queued = await self.put(store, RUN, "Still there?")
        await self.save(store, make_checkpoint(RUN, 2, messages=(HELLO,)))
        assert await self.pending(store) == [queued]

    async def test_a_marker_of_another_input_delivers_nothing(self, store: Any) -> None:
        await self.started(store)
        queued = await self.put(store, RUN, "Mine.", input_id="mine")
        forged = QueuedInput(seq=1, input_id="other", text="x", accepted_at=0)
        await self.save_holding(store, [forged])
        assert await self.pending(store) == [queued]

    async def test_a_suspended_checkpoint_keeps_input_it_does_not_hold_pending(
        self, store: Any
    ) -> None:
        await self.started(store)
        queued = await self.put(store, RUN, "After the approval, please.")
        asks = Message("assistant", (ToolUsePart("toolu_1", "pay", {"usd": 5}),))
        await self.save(
            store,
            make_checkpoint(RUN, 2, status="suspended", messages=(HELLO, asks)),
        )
        assert await self.pending(store) == [queued]

    async def test_a_completed_checkpoint_is_refused_while_input_is_pending(
        self, store: Any
    ) -> None:
        await self.started(store)
        await self.put(store, RUN, "Wait, one more thing.")
        done = make_checkpoint(
            RUN, 2, status="completed", messages=(HELLO, Message("assistant", "Bye."))
        )
        with pytest.raises(InputArrived):
            await self.save(store, done)
        loaded = await self.load(store)
        assert loaded is not None
        assert loaded.status == "running"
        assert loaded.step_index == 1

    async def test_a_completed_checkpoint_holding_every_input_is_saved(
        self, store: Any
    ) -> None:
        await self.started(store)
        queued = await self.put(store, RUN, "One more thing.")
        await self.save_holding(store, [queued], status="completed")
        loaded = await self.load(store)
        assert loaded is not None
        assert loaded.status == "completed"
        assert await self.pending(store) == []

    # -- through the loop ---------------------------------------------------------------

    async def test_a_resumed_run_answers_its_queued_input_once(
        self, store: Any
    ) -> None:
        await self.started(store)
        queued = await self.put(store, RUN, "Make it short.")
        model = ScriptedModel([reply(text="Short.")])
        result = await resume_from_checkpoint(store, RUN, model=model)
        sent = model.requests[0].messages
        assert sent[-1] == queued.message()
        assert sent[-1].content == "Make it short."
        assert await self.pending(store) == []
        loaded = await self.load(store)
        assert loaded is not None
        assert loaded.status == "completed"
        assert [m.text for m in loaded.messages] == [
            "Hello.",
            "Make it short.",
            "Short.",
        ]
        assert result.text == "Short."

    async def test_a_delivered_input_reads_back_as_the_message_carrying_it(
        self, store: Any
    ) -> None:
        await self.started(store)
        queued = await self.put(store, RUN, "Thanks.")
        await self.save_holding(store, [queued])
        loaded = await self.load(store)
        assert loaded is not None
        assert loaded.messages[1] == queued.message()
        assert loaded.messages[1].to_json()["providerMetadata"] == {
            "deuz": {"inputId": queued.input_id, "inputSeq": 1}
        }
