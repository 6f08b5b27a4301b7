"""Routing, the step loop and results (SPEC §2, §3.1–§3.2, R1.16, R3.22)."""

from __future__ import annotations

from typing import Any

import pytest

from deuz_django.core import (
    Message,
    ModelError,
    Tool,
    Usage,
    generate_text,
    stream_chat,
)
from deuz_django.core.durable import DurableSession, create_in_memory_session_store
from deuz_django.core.parts import ErrorPart, FinishPart, StepStartPart
from deuz_django.core.testing import ScriptedModel, reply
from tests.core.support import Probe, collect, make_deps, usage


def _weather() -> Tool:
    return Probe({"temp": 22}).tool("get_weather")


def _two_step_model() -> ScriptedModel:
    return ScriptedModel(
        [
            reply(tool_calls=[("c1", "get_weather", {"city": "Oslo"})], usage=(10, 5)),
            reply(text="Sunny.", usage=(20, 6)),
        ]
    )


# -- R2.1: routing ----------------------------------------------------------------------


async def test_a_call_without_tools_is_a_single_turn_without_run_id_or_checkpoint() -> (
    None
):
    # SPEC R2.1: never checkpoints, never has run_id, even with a session.
    store = create_in_memory_session_store()
    result = await generate_text(
        model=ScriptedModel([reply(text="hi")]),
        prompt="hello",
        session=DurableSession(store, "run-1"),
    )
    assert result.text == "hi"
    assert result.run_id is None
    assert store.list() == []


async def test_a_streaming_single_turn_has_no_step_parts_and_no_run_id() -> None:
    # SPEC R2.1, R6.9
    store = create_in_memory_session_store()
    stream = stream_chat(
        model=ScriptedModel([reply(text="hi", usage=(1, 2))]),
        prompt="hello",
        session=DurableSession(store, "run-1"),
    )
    assert stream.run_id is None
    parts = await collect(stream)
    assert [p.type for p in parts] == ["text-delta", "finish"]
    assert store.list() == []


async def test_a_call_with_tools_goes_through_the_loop() -> None:
    # SPEC R2.1
    stream = stream_chat(
        model=ScriptedModel([reply(text="hi")]), prompt="x", tools=[_weather()]
    )
    parts = await collect(stream)
    assert isinstance(parts[0], StepStartPart)


# -- R2.2, R2.3 ------------------------------------------------------------------------


async def test_max_steps_defaults_to_one_model_turn() -> None:
    # SPEC R2.2: the tool step runs, then the loop stops without a second model call.
    model = _two_step_model()
    result = await generate_text(model=model, prompt="x", tools=[_weather()])
    assert len(model.requests) == 1
    assert len(result.steps) == 1
    assert result.steps[0].tool_results[0].result == {"temp": 22}


@pytest.mark.parametrize(
    ("cap", "parallel"), [(None, True), (5, True), (1, False), (0, True)]
)
async def test_the_model_is_told_whether_parallel_tool_calls_are_allowed(
    cap: int | None, parallel: bool
) -> None:
    # SPEC R2.3: parallel = (max_tool_concurrency or 5) > 1.
    model = ScriptedModel([reply(text="hi")])
    options: dict[str, Any] = {} if cap is None else {"max_tool_concurrency": cap}
    await generate_text(model=model, prompt="x", tools=[_weather()], **options)
    assert model.requests[0].parallel_tool_calls is parallel


# -- R3.6–R3.8: one step -----------------------------------------------------------------


async def test_a_tool_call_under_finish_stop_still_executes_and_loops() -> None:
    # SPEC R3.6: the Gemini guard — presence of tool_use parts decides, not finishReason.
    model = ScriptedModel(
        [
            reply(tool_calls=[("c1", "get_weather", {})], finish_reason="stop"),
            reply(text="done"),
        ]
    )
    result = await generate_text(
        model=model, prompt="x", tools=[_weather()], max_steps=3
    )
    assert len(model.requests) == 2
    assert result.text == "done"


async def test_a_turn_without_tool_calls_completes_whatever_its_finish_reason() -> None:
    # SPEC R3.6, R3.7
    model = ScriptedModel([reply(text="cut", finish_reason="length"), reply(text="x")])
    result = await generate_text(
        model=model, prompt="x", tools=[_weather()], max_steps=3
    )
    assert len(model.requests) == 1
    assert result.finish_reason == "length"


async def test_a_tool_step_appends_one_tool_message_after_the_assistant_turn() -> None:
    # SPEC R3.8.6: OpenAI ordering, one tool message for the whole batch.
    model = ScriptedModel(
        [
            reply(tool_calls=[("c1", "get_weather", {}), ("c2", "get_weather", {})]),
            reply(text="done"),
        ]
    )
    result = await generate_text(
        model=model, prompt="x", tools=[_weather()], max_steps=2
    )
    roles = [m.role for m in result.messages]
    assert roles == ["user", "assistant", "tool", "assistant"]
    tool_message = result.messages[2]
    assert [p.tool_use_id for p in tool_message.content] == ["c1", "c2"]  # type: ignore[union-attr]


# -- R3.9, R1.16: the buffered result ----------------------------------------------------


async def test_buffered_result_fields() -> None:
    # SPEC R3.9
    result = await generate_text(
        model=_two_step_model(), prompt="x", tools=[_weather()], max_steps=3
    )
    assert result.text == "Sunny."
    assert result.usage == usage(30, 11)
    assert result.finish_reason == "stop"
    assert [m.role for m in result.response_messages] == [
        "assistant",
        "tool",
        "assistant",
    ]
    assert result.messages == (Message("user", "x"), *result.response_messages)
    assert [c.tool_call_id for c in result.tool_calls or ()] == ["c1"]
    assert [r.result for r in result.tool_results or ()] == [{"temp": 22}]
    assert result.pending_approvals is None
    assert result.provider_metadata is None
    assert result.run_id is None


async def test_tool_calls_are_omitted_when_no_step_called_a_tool() -> None:
    # SPEC R3.9
    result = await generate_text(
        model=ScriptedModel([reply(text="hi")]), prompt="x", tools=[_weather()]
    )
    assert result.tool_calls is None
    assert result.tool_results is None
    assert len(result.steps) == 1


async def test_step_results_record_type_text_reasoning_usage_and_messages() -> None:
    # SPEC R1.16
    model = ScriptedModel(
        [
            reply(
                tool_calls=[("c1", "get_weather", {})],
                reasoning="let me check",
                usage=(10, 5),
            ),
            reply(text="Sunny.", usage=(20, 6)),
        ]
    )
    result = await generate_text(
        model=model, prompt="x", tools=[_weather()], max_steps=3
    )
    first, second = result.steps
    assert (first.step_type, second.step_type) == ("initial", "tool-result")
    assert first.reasoning_text == "let me check"
    assert second.reasoning_text is None
    assert first.finish_reason == "tool_calls"
    assert first.usage == usage(10, 5)
    assert [m.role for m in first.response_messages] == ["assistant", "tool"]
    assert [m.role for m in second.response_messages] == ["assistant"]
    assert second.text == "Sunny."


# -- R3.10: the streaming result -----------------------------------------------------------


async def test_stream_chat_does_no_work_until_something_pulls() -> None:
    # SPEC R3.10: lazy start; nothing runs and nothing checkpoints if nobody pulls.
    store = create_in_memory_session_store()
    model = _two_step_model()
    stream = stream_chat(
        model=model,
        prompt="x",
        tools=[_weather()],
        session=DurableSession(store),
        deps=make_deps(),
    )
    assert stream.run_id == "id-1"  # R6.2: generated synchronously at call time
    assert model.requests == []
    assert store.list() == []
    assert await stream.usage == usage(10, 5)
    assert store.list() == ["id-1"]


async def test_stream_awaitables_resolve_to_the_leg_outcome() -> None:
    # SPEC R3.10
    stream = stream_chat(
        model=_two_step_model(), prompt="x", tools=[_weather()], max_steps=3
    )
    assert await stream.finish_reason == "stop"
    assert await stream.usage == usage(30, 11)
    assert await stream.text == "Sunny."
    assert [t async for t in stream.text_stream] == ["Sunny."]


async def test_stream_parts_replay_for_every_reader() -> None:
    # SPEC R3.10: several readers each see every part from the start.
    stream = stream_chat(model=_two_step_model(), prompt="x", tools=[_weather()])
    first = await collect(stream)
    second = await collect(stream)
    assert first == second
    assert isinstance(first[-1], FinishPart)


async def test_a_failing_stream_rejects_its_awaitables_and_consume_does_not_raise() -> (
    None
):
    # SPEC R3.10, R3.22: error part, rejected awaitables, consume() never raises.
    model = ScriptedModel([reply(text="par", error="provider exploded")])
    stream = stream_chat(model=model, prompt="x", tools=[_weather()])
    await stream.consume()
    parts = await collect(stream)
    assert isinstance(parts[-1], ErrorPart)
    assert str(parts[-1].error) == "provider exploded"
    with pytest.raises(ModelError, match="provider exploded"):
        await stream.usage
    with pytest.raises(ModelError, match="provider exploded"):
        await stream.finish_reason


async def test_text_stream_raises_when_it_meets_an_error_part() -> None:
    # SPEC R3.10
    model = ScriptedModel([reply(text="par", error="provider exploded")])
    stream = stream_chat(model=model, prompt="x", tools=[_weather()])
    texts = stream.text_stream
    assert await anext(texts) == "par"
    with pytest.raises(ModelError, match="provider exploded"):
        await anext(texts)


async def test_stream_chat_never_raises_on_invalid_options() -> None:
    # SPEC R3.10: streamChat itself never raises; the error arrives as a part.
    stream = stream_chat(model=ScriptedModel([]), prompt="x", max_steps=0)
    parts = await collect(stream)
    assert [p.type for p in parts] == ["error"]
    with pytest.raises(ValueError, match="max_steps"):
        await stream.usage


# -- R3.22: errors -------------------------------------------------------------------------


async def test_a_model_error_raises_from_generate_text_and_saves_no_checkpoint() -> (
    None
):
    # SPEC R3.22, R6.4: no checkpoint for the failing step; earlier boundaries remain.
    store = create_in_memory_session_store()
    model = ScriptedModel(
        [reply(tool_calls=[("c1", "get_weather", {})]), reply(error="boom")]
    )
    with pytest.raises(ModelError, match="boom"):
        await generate_text(
            model=model,
            prompt="x",
            tools=[_weather()],
            max_steps=3,
            session=DurableSession(store, "run-1"),
            deps=make_deps(),
        )
    checkpoint = store.load("run-1")
    assert checkpoint is not None
    assert (checkpoint.step_index, checkpoint.status) == (1, "running")


# -- option validation ---------------------------------------------------------------------


async def test_unknown_options_are_rejected_by_name() -> None:
    # DESIGN §3: options are snake_case keywords; a typo is an error, not ignored.
    with pytest.raises(TypeError, match="maxSteps"):
        await generate_text(model=ScriptedModel([]), prompt="x", maxSteps=2)  # type: ignore[call-arg]


async def test_usage_of_a_reply_is_the_step_usage() -> None:
    # SPEC R3.5.6: each step's usage is added to the leg total.
    model = ScriptedModel(
        [reply(text="x", usage=Usage(input_tokens=3, total_tokens=3))]
    )
    result = await generate_text(model=model, prompt="x", tools=[_weather()])
    assert result.usage.total_tokens == 3
