"""prepare_step and active_tools (SPEC §3.3: R3.11, R3.12)."""

from __future__ import annotations

from typing import Any

import pytest

from deuz_django.core import (
    ForcedTool,
    InvalidInputError,
    Message,
    StepOverrides,
    Tool,
    generate_text,
    stream_chat,
)
from deuz_django.core.durable import DurableSession, create_in_memory_session_store
from deuz_django.core.testing import ScriptedModel, reply
from tests.core.support import Probe, RecordingLogger, collect, make_deps


def _weather() -> Tool:
    return Probe({"temp": 22}).tool("get_weather")


def _two_step_model() -> ScriptedModel:
    return ScriptedModel(
        [
            reply(tool_calls=[("c1", "get_weather", {"city": "Oslo"})], usage=(10, 5)),
            reply(text="Sunny.", usage=(20, 6)),
        ]
    )


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


async def test_prepare_step_may_return_a_plain_dict() -> None:
    # SPEC R3.11: like every option that takes data, the overrides may be a dict.
    store = create_in_memory_session_store()
    other = ScriptedModel([reply(tool_calls=[("c1", "get_weather", {})])])
    main = ScriptedModel([reply(text="done")])

    def prepare(info: Any) -> dict[str, Any] | None:
        if info.step_index == 0:
            return {
                "messages": [{"role": "user", "content": "rewritten"}],
                "active_tools": ["get_weather"],
                "tool_choice": ForcedTool("get_weather"),
                "model": other,
            }
        return {}

    await generate_text(
        model=main,
        prompt="x",
        tools=[_weather(), Probe().tool("unused")],
        max_steps=3,
        prepare_step=prepare,
        session=DurableSession(store, "run-1"),
        deps=make_deps(),
    )
    first = other.requests[0]
    assert first.messages == (Message("user", "rewritten"),)
    assert [t.name for t in first.tools] == ["get_weather"]
    assert first.tool_choice == ForcedTool("get_weather")
    assert main.requests[0].messages[0] == Message("user", "rewritten")
    assert [t.name for t in main.requests[0].tools] == ["get_weather", "unused"]
    assert main.requests[0].tool_choice is None


async def test_an_async_prepare_step_may_return_a_dict() -> None:
    # SPEC R3.11
    async def prepare(info: Any) -> dict[str, Any]:
        return {"tool_choice": "none"}

    model = ScriptedModel([reply(text="ok")])
    await generate_text(
        model=model, prompt="x", tools=[_weather()], prepare_step=prepare
    )
    assert model.requests[0].tool_choice == "none"


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        ({"activeTools": ["a"]}, "prepare_step: unknown key 'activeTools'"),
        ({"tool_choice": "none", "temperature": 0}, "unknown key 'temperature'"),
        (["get_weather"], "expected StepOverrides, a dict or None, got list"),
        ({"active_tools": "get_weather"}, "active_tools: expected a list of names"),
    ],
)
async def test_a_bad_prepare_step_result_is_named_in_the_error(
    returned: Any, message: str
) -> None:
    # SPEC R3.11: the error surfaces as a raising hook's does, buffered and streamed.
    with pytest.raises(InvalidInputError, match=message):
        await generate_text(
            model=ScriptedModel([]),
            prompt="x",
            tools=[_weather()],
            prepare_step=lambda info: returned,
        )
    stream = stream_chat(
        model=ScriptedModel([]),
        prompt="x",
        tools=[_weather()],
        prepare_step=lambda info: returned,
    )
    parts = await collect(stream)
    assert [p.type for p in parts] == ["step-start", "error"]


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
