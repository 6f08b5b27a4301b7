"""Routing, the step loop, results and prepare_step (SPEC §2, §3.1–§3.3, R1.16, R3.22)."""

from __future__ import annotations

from typing import Any

import pytest

from deuz_django.core import (
    ForcedTool,
    Message,
    ModelError,
    StepOverrides,
    Tool,
    Usage,
    generate_text,
    stream_chat,
)
from deuz_django.core.durable import DurableSession, create_in_memory_session_store
from deuz_django.core.parts import ErrorPart, FinishPart, StepStartPart
from deuz_django.core.testing import ScriptedModel, reply
from tests.core.support import Probe, RecordingLogger, collect, make_deps, usage


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


# -- R3.11: prepare_step -------------------------------------------------------------------


async def test_prepare_step_sees_the_step_index_history_and_cumulative_usage() -> None:
    # SPEC R3.11
    seen: list[Any] = []

    def prepare(info: Any) -> None:
        seen.append((info.step_index, len(info.messages), info.usage.total_tokens))

    await generate_text(
        model=_two_step_model(),
        prompt="x",
        tools=[_weather()],
        max_steps=3,
        prepare_step=prepare,
    )
    assert seen == [(0, 1, 0), (1, 3, 15)]


async def test_prepared_messages_become_the_history_for_later_steps_and_checkpoints() -> (
    None
):
    # SPEC R3.11: a returned messages list is assigned; checkpoints store it.
    store = create_in_memory_session_store()
    model = _two_step_model()

    def prepare(info: Any) -> StepOverrides | None:
        if info.step_index == 0:
            return StepOverrides(messages=[{"role": "user", "content": "rewritten"}])
        return None

    result = await generate_text(
        model=model,
        prompt="x",
        tools=[_weather()],
        max_steps=3,
        prepare_step=prepare,
        session=DurableSession(store, "run-1"),
        deps=make_deps(),
    )
    assert model.requests[0].messages == (Message("user", "rewritten"),)
    assert model.requests[1].messages[0] == Message("user", "rewritten")
    checkpoint = store.load("run-1")
    assert checkpoint is not None
    assert checkpoint.messages[0] == Message("user", "rewritten")
    # R3.9: response messages are what this leg appended, unaffected by the rewrite.
    assert [m.role for m in result.response_messages] == [
        "assistant",
        "tool",
        "assistant",
    ]


async def test_prepared_model_and_tool_choice_apply_to_that_step_only() -> None:
    # SPEC R3.11
    other = ScriptedModel([reply(tool_calls=[("c1", "get_weather", {})])])
    main = ScriptedModel([reply(text="done")])

    def prepare(info: Any) -> StepOverrides | None:
        if info.step_index == 0:
            return StepOverrides(model=other, tool_choice=ForcedTool("get_weather"))
        return None

    await generate_text(
        model=main, prompt="x", tools=[_weather()], max_steps=3, prepare_step=prepare
    )
    assert other.requests[0].tool_choice == ForcedTool("get_weather")
    assert len(main.requests) == 1
    assert main.requests[0].tool_choice is None


async def test_an_async_prepare_step_is_awaited() -> None:
    # SPEC R3.11
    async def prepare(info: Any) -> StepOverrides:
        return StepOverrides(tool_choice="none")

    model = ScriptedModel([reply(text="ok")])
    await generate_text(
        model=model, prompt="x", tools=[_weather()], prepare_step=prepare
    )
    assert model.requests[0].tool_choice == "none"


async def test_a_raising_prepare_step_raises_buffered_and_errors_the_stream() -> None:
    # SPEC R3.11, R3.22
    def prepare(info: Any) -> None:
        raise RuntimeError("hook failed")

    with pytest.raises(RuntimeError, match="hook failed"):
        await generate_text(
            model=ScriptedModel([]),
            prompt="x",
            tools=[_weather()],
            prepare_step=prepare,
        )
    stream = stream_chat(
        model=ScriptedModel([]), prompt="x", tools=[_weather()], prepare_step=prepare
    )
    parts = await collect(stream)
    assert [p.type for p in parts] == ["step-start", "error"]
    with pytest.raises(RuntimeError, match="hook failed"):
        await stream.finish_reason


# -- R3.12: per-step active_tools ----------------------------------------------------------


def _three_tools() -> list[Tool]:
    return [Probe().tool(name) for name in ("a", "b", "c")]


async def _sent_tools(active: list[str], logger: RecordingLogger) -> list[str]:
    model = ScriptedModel([reply(text="ok")])
    await generate_text(
        model=model,
        prompt="x",
        tools=_three_tools(),
        prepare_step=lambda info: StepOverrides(active_tools=active),
        deps=make_deps(logger=logger),
    )
    return [t.name for t in model.requests[0].tools]


async def test_active_tools_keeps_only_the_listed_tools() -> None:
    # SPEC R3.12
    assert await _sent_tools(["c", "a"], RecordingLogger()) == ["c", "a"]


async def test_an_unknown_active_tool_is_ignored_with_a_warning() -> None:
    # SPEC R3.12
    logger = RecordingLogger()
    assert await _sent_tools(["a", "zzz"], logger) == ["a"]
    assert len(logger.warnings) == 1
    assert "zzz" in logger.warnings[0][0]


async def test_active_tools_matching_nothing_sends_the_full_list() -> None:
    # SPEC R3.12: fail open.
    assert await _sent_tools(["zzz"], RecordingLogger()) == ["a", "b", "c"]


async def test_active_tools_never_affect_executing_calls_already_issued() -> None:
    # SPEC R3.12
    probe = Probe("ran")
    model = ScriptedModel([reply(tool_calls=[("c1", "hidden", {})]), reply(text="ok")])
    result = await generate_text(
        model=model,
        prompt="x",
        tools=[probe.tool("hidden"), Probe().tool("shown")],
        max_steps=2,
        prepare_step=lambda info: StepOverrides(active_tools=["shown"]),
    )
    assert probe.calls == [{}]
    assert result.steps[0].tool_results[0].result == "ran"


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
