"""User abort, identical in both entry points (SPEC R3.21, D1).

D1: an aborted step is never checkpointed, the result's finish reason is ``aborted``, and
nothing is executed after the abort is seen — for ``generate_text`` exactly as for
``stream_chat``.
"""

from __future__ import annotations

from typing import Any

import pytest

from deuz_django.core import (
    AbortController,
    GenerateTextResult,
    Message,
    Tool,
    ToolUsePart,
    Usage,
    generate_text,
    stream_chat,
)
from deuz_django.core.durable import DurableSession, create_in_memory_session_store
from deuz_django.core.parts import FinishPart, StepFinishPart, TextDeltaPart
from deuz_django.core.testing import ScriptedModel, reply
from tests.core.support import HangingModel, Probe, collect, make_deps, tokens, usage

ENTRY_POINTS = ["generate_text", "stream_chat"]


async def _run(entry: str, **options: Any) -> GenerateTextResult:
    """The leg's buffered result through either entry point."""
    if entry == "generate_text":
        return await generate_text(**options)
    stream = stream_chat(**options)
    await stream.consume()
    return await stream.result()


class _Scripted(HangingModel):
    """Plays ``replies`` first, then hangs (aborting) on the call after them."""

    def __init__(self, replies: list[Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.script = ScriptedModel(replies)

    async def stream(self, request: Any) -> Any:
        if len(self.script.requests) < len(self.script.replies):
            self.requests.append(request)
            async for event in self.script.stream(request):
                yield event
            return
        async for event in super().stream(request):
            yield event


@pytest.mark.parametrize("entry", ENTRY_POINTS)
async def test_abort_mid_model_call_finishes_aborted_without_a_checkpoint(
    entry: str,
) -> None:
    # D1, SPEC R3.21: the aborted step is not recorded and not checkpointed.
    controller = AbortController()
    store = create_in_memory_session_store()
    model = HangingModel(before=[TextDeltaPart("partial")], on_hang=controller.abort)
    result = await _run(
        entry,
        model=model,
        prompt="x",
        tools=[Probe().tool("t")],
        signal=controller.signal,
        session=DurableSession(store, "run-1"),
        deps=make_deps(),
    )
    assert result.finish_reason == "aborted"
    assert result.steps == ()
    assert result.response_messages == ()
    assert result.messages == (Message("user", "x"),)
    assert store.load("run-1") is None
    assert model.closed  # the model's stream was closed, not left hanging


@pytest.mark.parametrize("entry", ENTRY_POINTS)
async def test_abort_after_a_boundary_keeps_the_earlier_checkpoint(entry: str) -> None:
    # D1, SPEC R6.4: earlier boundaries remain; the aborted step adds none.
    controller = AbortController()
    store = create_in_memory_session_store()
    model = _Scripted(
        [reply(tool_calls=[("c1", "t", {})], usage=(10, 5))], on_hang=controller.abort
    )
    result = await _run(
        entry,
        model=model,
        prompt="x",
        tools=[Probe().tool("t")],
        max_steps=5,
        signal=controller.signal,
        session=DurableSession(store, "run-1"),
        deps=make_deps(),
    )
    assert result.finish_reason == "aborted"
    assert len(result.steps) == 1
    assert result.usage == usage(10, 5)
    checkpoint = store.load("run-1")
    assert checkpoint is not None
    assert (checkpoint.step_index, checkpoint.status) == (1, "running")


async def test_both_entry_points_give_the_same_aborted_result() -> None:
    # D1: identical in both entry points.
    outcomes = []
    for entry in ENTRY_POINTS:
        controller = AbortController()
        model = _Scripted(
            [reply(tool_calls=[("c1", "t", {})], usage=(10, 5))],
            on_hang=controller.abort,
        )
        outcomes.append(
            await _run(
                entry,
                model=model,
                prompt="x",
                tools=[Probe("v").tool("t")],
                max_steps=5,
                signal=controller.signal,
            )
        )
    assert outcomes[0] == outcomes[1]


async def test_the_streaming_aborted_step_reports_step_finish_then_finish_aborted() -> (
    None
):
    # SPEC R3.21: step-finish{stop, zero usage} for the cut step, then finish{aborted}.
    controller = AbortController()
    model = _Scripted(
        [reply(tool_calls=[("c1", "t", {})], usage=(10, 5))], on_hang=controller.abort
    )
    parts = await collect(
        stream_chat(
            model=model,
            prompt="x",
            tools=[Probe().tool("t")],
            max_steps=5,
            signal=controller.signal,
        )
    )
    assert tokens(parts)[-3:] == ["step-start", "step-finish", "finish"]
    step_finish, finish = parts[-2], parts[-1]
    assert step_finish == StepFinishPart(1, "stop", Usage())
    assert isinstance(finish, FinishPart)
    assert (finish.finish_reason, finish.usage) == ("aborted", usage(10, 5))


@pytest.mark.parametrize("entry", ENTRY_POINTS)
async def test_no_tool_runs_after_the_abort_is_seen(entry: str) -> None:
    # D1: a tool that aborts stops the batch; later calls never start, no tool message,
    # no checkpoint.
    controller = AbortController()
    later = Probe()

    async def aborting(args: Any, ctx: Any) -> str:
        controller.abort()
        return "aborted it"

    store = create_in_memory_session_store()
    model = ScriptedModel(
        [reply(tool_calls=[("c1", "aborting", {}), ("c2", "later", {})]), reply()]
    )
    result = await _run(
        entry,
        model=model,
        prompt="x",
        tools=[Tool(name="aborting", execute=aborting), later.tool("later")],
        max_steps=5,
        max_tool_concurrency=1,
        signal=controller.signal,
        session=DurableSession(store, "run-1"),
        deps=make_deps(),
    )
    assert later.calls == []
    assert result.finish_reason == "aborted"
    assert len(model.requests) == 1
    assert [m.role for m in result.messages] == ["user", "assistant"]
    assert store.load("run-1") is None


@pytest.mark.parametrize("entry", ENTRY_POINTS)
async def test_an_already_aborted_signal_settles_nothing_and_calls_no_model(
    entry: str,
) -> None:
    # D1: nothing is executed after the abort is seen — not even settle.
    controller = AbortController()
    controller.abort()
    probe = Probe()
    model = ScriptedModel([reply(text="never")])
    result = await _run(
        entry,
        model=model,
        messages=[
            Message("user", "x"),
            Message("assistant", (ToolUsePart("c1", "t", {}),)),
        ],
        tools=[probe.tool("t")],
        approval_responses=[{"approval_id": "c1", "approved": True}],
        signal=controller.signal,
    )
    assert probe.calls == []
    assert model.requests == []
    assert result.finish_reason == "aborted"


@pytest.mark.parametrize("entry", ENTRY_POINTS)
async def test_an_aborted_single_turn_resolves_aborted(entry: str) -> None:
    # SPEC R3.21: a single model call resolves finishReason 'aborted'.
    controller = AbortController()
    model = HangingModel(before=[TextDeltaPart("par")], on_hang=controller.abort)
    result = await _run(entry, model=model, prompt="x", signal=controller.signal)
    assert result.finish_reason == "aborted"


async def test_an_aborted_single_turn_streams_no_finish_and_no_error_part() -> None:
    # SPEC R3.21: a single model call emits NO finish part and NO error part.
    controller = AbortController()
    model = HangingModel(before=[TextDeltaPart("par")], on_hang=controller.abort)
    stream = stream_chat(model=model, prompt="x", signal=controller.signal)
    parts = await collect(stream)
    assert tokens(parts) == ["text-delta"]
    assert await stream.finish_reason == "aborted"
