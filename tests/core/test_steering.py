"""Steering: input queued for a run is delivered at its next step boundary, as a user
message, once and in order — never between a tool call and its result, never by
cancelling a tool; an interrupt discards the model turn in progress."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest

from deuz_django.core import (
    DataPart,
    Message,
    ModelEvent,
    ModelRequest,
    StepFinishPart,
    StepStartPart,
    TextDeltaPart,
    TurnInterrupter,
    tool,
)
from deuz_django.core._loop.options import LoopOptions
from deuz_django.core._loop.session import start_leg
from deuz_django.core.deps import Deps
from deuz_django.core.durable import (
    DurableSession,
    InMemoryInputQueue,
    InMemorySessionStore,
    InMemoryStepJournal,
    resume_from_checkpoint,
    resume_stream_from_checkpoint,
)
from deuz_django.core.testing import FunctionModel, ScriptedModel, reply
from deuz_django.core.testing.contracts import make_checkpoint
from deuz_django.core.wire import to_ui_part

from .reliability._support import Crash
from .support import RecordingLogger, make_deps

RUN = "run-1"


class Shop:
    """A run waiting at its first boundary, with a queue and a step journal."""

    def __init__(self) -> None:
        self.queue = InMemoryInputQueue()
        self.journal = InMemoryStepJournal()
        self.store = InMemorySessionStore(
            input_queue=self.queue, step_journal=self.journal
        )
        self.store.save(
            make_checkpoint(RUN, 0, messages=(Message("user", "Check stock."),))
        )

    def history(self) -> list[tuple[str, str]]:
        checkpoint = self.store.load(RUN)
        assert checkpoint is not None
        return [(m.role, m.text) for m in checkpoint.messages]


def texts(request: ModelRequest) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in request.messages]


async def test_input_during_a_tool_comes_after_its_result_and_the_tool_runs_on() -> (
    None
):
    shop = Shop()
    interrupter = TurnInterrupter()
    ran: list[str] = []

    @tool
    async def check_stock(sku: str) -> str:
        """How many are left."""
        shop.queue.put(RUN, "Also check Oslo.")
        interrupter.interrupt()  # a tool is never interrupted
        await asyncio.sleep(0.01)
        ran.append(sku)
        return "12 left"

    model = ScriptedModel(
        [reply(tool_calls=[("c1", "check_stock", {"sku": "A"})]), reply(text="Done.")]
    )
    await resume_from_checkpoint(
        shop.store,
        RUN,
        model=model,
        tools=[check_stock],
        max_steps=5,
        interrupt=interrupter,
    )
    assert ran == ["A"]
    assert texts(model.requests[1]) == [
        ("user", "Check stock."),
        ("assistant", ""),
        ("tool", ""),
        ("user", "Also check Oslo."),
    ]
    assert shop.queue.pending(RUN) == ()
    assert shop.queue.inputs(RUN)[0].delivered_at_step == 1


async def test_the_delivery_is_a_data_part_before_the_model_call() -> None:
    shop = Shop()
    queued = shop.queue.put(RUN, "Short answers, please.")
    stream = resume_stream_from_checkpoint(
        shop.store, RUN, model=ScriptedModel([reply(text="OK.")])
    )
    parts = [part async for part in stream.full_stream]
    assert parts[0] == StepStartPart(0)
    assert parts[1] == DataPart("input-delivered", {**queued.to_json(), "stepIndex": 0})
    assert to_ui_part(parts[1]) == {
        "type": "data-input-delivered",
        "payload": {**queued.to_json(), "stepIndex": 0},
    }
    assert to_ui_part(parts[1], "v1") is None
    assert isinstance(parts[2], TextDeltaPart)


async def test_inputs_are_delivered_in_order_each_once() -> None:
    shop = Shop()
    for text in ("One.", "Two.", "Three."):
        shop.queue.put(RUN, text)
    model = ScriptedModel([reply(text="Noted.")])
    await resume_from_checkpoint(shop.store, RUN, model=model)
    assert shop.history() == [
        ("user", "Check stock."),
        ("user", "One."),
        ("user", "Two."),
        ("user", "Three."),
        ("assistant", "Noted."),
    ]


async def test_an_interrupt_discards_the_model_turn_and_answers_the_input() -> None:
    shop = Shop()
    interrupter = TurnInterrupter()
    paid: list[Any] = []

    @tool
    def pay(usd: int) -> str:
        """Pay."""
        paid.append(usd)
        return "paid"

    def respond(request: ModelRequest) -> Any:
        if request.messages[-1].text == "Stop, use EUR.":
            return reply(text="Using EUR.")
        return reply(
            text=["Paying", " in", " USD", "…"],
            tool_calls=[("c1", "pay", {"usd": 5})],
            chunk_delay=0.05,
        )

    model = FunctionModel(respond)
    stream = resume_stream_from_checkpoint(
        shop.store, RUN, model=model, tools=[pay], max_steps=5, interrupt=interrupter
    )
    parts = []
    async for part in stream.full_stream:
        parts.append(part)
        if part == TextDeltaPart("Paying"):
            shop.queue.put(RUN, "Stop, use EUR.")
            interrupter.interrupt()
    assert paid == []
    starts = [p for p in parts if isinstance(p, StepStartPart)]
    assert starts == [StepStartPart(0), StepStartPart(0)]  # the step starts over
    assert StepFinishPart in {type(p) for p in parts}
    discarded = next(p for p in parts if isinstance(p, StepFinishPart))
    assert discarded.finish_reason == "aborted"
    assert shop.history() == [
        ("user", "Check stock."),
        ("user", "Stop, use EUR."),
        ("assistant", "Using EUR."),
    ]
    recorded = shop.journal.load_step(RUN, 0)
    assert recorded is None or recorded.message.text == "Using EUR."


async def test_an_interrupt_between_the_boundary_and_the_model_call_is_not_lost() -> (
    None
):
    interrupter = TurnInterrupter()
    interrupter.begin_boundary()
    interrupter.interrupt()  # came in after the queue was read
    assert interrupter.begin_turn().aborted
    interrupter.end_turn()
    interrupter.begin_boundary()
    assert not interrupter.begin_turn().aborted


async def test_an_interrupt_from_another_thread_reaches_the_turn() -> None:
    interrupter = TurnInterrupter()
    interrupter.begin_boundary()
    signal = interrupter.begin_turn()
    thread = threading.Thread(target=interrupter.interrupt)
    thread.start()
    thread.join()
    await asyncio.wait_for(signal.wait(), 5)
    assert signal.aborted


async def test_input_arriving_as_the_answer_ends_is_answered_before_completing() -> (
    None
):
    shop = Shop()

    class LateInput:
        model_id = "late"
        calls = 0

        async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
            self.calls += 1
            answer = "Stock: 12." if self.calls == 1 else "Oslo: 3."
            async for event in reply(text=answer).play():
                yield event
            if self.calls == 1:  # after the boundary read the queue
                shop.queue.put(RUN, "And Oslo?")

    model = LateInput()
    result = await resume_from_checkpoint(shop.store, RUN, model=model, max_steps=1)
    assert model.calls == 2
    assert shop.history() == [
        ("user", "Check stock."),
        ("assistant", "Stock: 12."),
        ("user", "And Oslo?"),
        ("assistant", "Oslo: 3."),
    ]
    checkpoint = shop.store.load(RUN)
    assert checkpoint is not None
    assert checkpoint.status == "completed"
    assert checkpoint.step_index == 2
    assert result.text == "Oslo: 3."


async def test_a_crash_before_the_checkpoint_delivers_the_input_once_on_resume() -> (
    None
):
    shop = Shop()
    crash = [True]

    @tool(idempotent=True)
    def check_stock(sku: str) -> str:
        """How many are left."""
        if crash.pop() if crash else False:
            raise Crash
        return "12 left"

    model = ScriptedModel(
        [
            reply(tool_calls=[("c1", "check_stock", {"sku": "A"})]),
            reply(text="12 left, and Oslo has 3."),
        ]
    )
    shop.queue.put(RUN, "Which warehouse?")
    with pytest.raises(Crash):
        await resume_from_checkpoint(
            shop.store, RUN, model=model, tools=[check_stock], max_steps=5
        )
    assert len(shop.queue.pending(RUN)) == 1  # taken, never saved: still pending
    shop.queue.put(RUN, "And Oslo?")  # arrives while the run is down
    await resume_from_checkpoint(
        shop.store, RUN, model=model, tools=[check_stock], max_steps=5
    )
    assert len(model.requests) == 2  # the recorded turn was reused, not re-asked
    assert shop.history() == [
        ("user", "Check stock."),
        ("user", "Which warehouse?"),
        ("assistant", ""),
        ("tool", ""),
        ("user", "And Oslo?"),
        ("assistant", "12 left, and Oslo has 3."),
    ]
    assert shop.queue.pending(RUN) == ()


async def test_input_queued_while_suspended_comes_after_the_settled_results() -> None:
    shop = Shop()

    @tool(needs_approval=True)
    def reserve(sku: str) -> str:
        """Reserve stock."""
        return "reserved"

    model = ScriptedModel(
        [reply(tool_calls=[("c1", "reserve", {"sku": "A"})]), reply(text="Reserved.")]
    )
    first = await resume_from_checkpoint(
        shop.store, RUN, model=model, tools=[reserve], max_steps=5
    )
    assert first.pending_approvals
    shop.queue.put(RUN, "Reserve two, not one.")
    assert len(shop.queue.pending(RUN)) == 1  # waits for a verdict, no resume
    await resume_from_checkpoint(
        shop.store,
        RUN,
        model=model,
        tools=[reserve],
        max_steps=5,
        approval_responses=[{"approval_id": "c1", "approved": True}],
    )
    assert texts(model.requests[1])[-3:] == [
        ("assistant", ""),
        ("tool", ""),
        ("user", "Reserve two, not one."),
    ]
    assert shop.queue.pending(RUN) == ()


async def test_a_sub_agent_never_reads_the_queue() -> None:
    shop = Shop()
    options = LoopOptions(
        model=ScriptedModel([]),
        messages=(),
        session=DurableSession(shop.store, "run-1::helper#c1"),
        agent_path=("helper",),
    )
    started = await start_leg(options, "run-1::helper#c1", Deps())
    assert started.inputs is None


async def test_a_queue_that_cannot_be_read_is_logged_and_its_input_waits_a_step() -> (
    None
):
    """A lost database, say: the boundary goes on without the input (the run is not
    failed for it), and the next boundary delivers it, once."""
    shop = Shop()
    failures = iter([ConnectionError("the database went away")])
    read = shop.queue.pending

    def pending(run_id: str) -> Any:
        failure = next(failures, None)
        if failure is not None:
            raise failure
        return read(run_id)

    shop.queue.pending = pending  # type: ignore[method-assign]
    shop.queue.put(RUN, "Also check Oslo.")
    logger = RecordingLogger()
    model = ScriptedModel(
        [reply(tool_calls=[("c1", "noop", {})]), reply(text="Oslo: 3.")]
    )

    @tool
    async def noop() -> str:
        """Nothing."""
        return "ok"

    await resume_from_checkpoint(
        shop.store, RUN, model=model, tools=[noop], deps=make_deps(logger=logger)
    )
    assert [message for message, _ in logger.errors] == [
        f"durable: reading the input queue of '{RUN}' failed — the database went away"
    ]
    assert texts(model.requests[0]) == [("user", "Check stock.")]
    assert texts(model.requests[1])[-1] == ("user", "Also check Oslo.")
    assert [m.text for m in model.requests[1].messages].count("Also check Oslo.") == 1
