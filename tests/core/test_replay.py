"""Replay: the recorded tool outcomes fed back, no tool executed, divergence ends the leg
(deuz_django.core.replay)."""

from __future__ import annotations

from typing import Any

import pytest

from deuz_django.core import (
    ErrorPart,
    GenerateTextResult,
    Message,
    RecordedOutcomes,
    ReplayDiverged,
    TextPart,
    ToolResultPart,
    ToolUsePart,
    agent_tool,
    generate_text,
    replay_input,
    replay_tools,
    stream_chat,
    tool,
)
from deuz_django.core.testing import ScriptedModel, reply
from tests.core.support import collect

executed: list[str] = []


@tool
def lookup(city: str) -> str:
    """Look a city up."""
    executed.append(f"lookup:{city}")
    return f"{city}: {len(executed)}"


@tool(needs_approval=True)
def send_email(to: str, body: str) -> str:
    """Send an email (a person approves)."""
    executed.append(f"send_email:{to}")
    return f"sent to {to}"


@tool
def explode(reason: str) -> str:
    """Fail with ``reason``."""
    executed.append("explode")
    raise RuntimeError(reason)


TOOLS = [lookup, send_email, explode]


@pytest.fixture(autouse=True)
def no_executions_yet() -> None:
    executed.clear()


async def _original() -> GenerateTextResult:
    """A finished run: two lookups of Oslo, a failing call, an approved email."""
    model = ScriptedModel(
        [
            reply(tool_calls=[("c1", "lookup", {"city": "Oslo"})]),
            reply(
                tool_calls=[
                    ("c2", "lookup", {"city": "Oslo"}),
                    ("c3", "explode", {"reason": "no fuel"}),
                ]
            ),
            reply(tool_calls=[("c4", "send_email", {"to": "ann", "body": "Hi"})]),
            reply(text="Done."),
        ]
    )
    result = await generate_text(
        model=model,
        system="Be thorough.",
        prompt="Weather?",
        tools=TOOLS,
        approve_tool_call=lambda call, messages: True,
        max_steps=10,
    )
    executed.clear()
    return result


def _results(model: ScriptedModel, request: int) -> list[ToolResultPart]:
    """The tool results the model was shown in its ``request``-th request."""
    last = model.requests[request].messages[-1]
    return [p for p in last.parts if isinstance(p, ToolResultPart)]


async def test_a_replay_executes_no_tool_and_feeds_the_recorded_outcomes_back() -> None:
    original = await _original()
    model = ScriptedModel(
        [
            reply(
                tool_calls=[
                    ("r1", "lookup", {"city": "Oslo"}),
                    ("r2", "lookup", {"city": "Oslo"}),
                ]
            ),
            reply(tool_calls=[("r3", "explode", {"reason": "no fuel"})]),
            reply(tool_calls=[("r4", "send_email", {"body": "Hi", "to": "ann"})]),
            reply(text="Done differently."),
        ]
    )
    result = await generate_text(
        model=model,
        messages=replay_input(original.messages),
        tools=replay_tools(TOOLS, RecordedOutcomes.from_messages(original.messages)),
        max_steps=10,
    )
    assert executed == []
    assert result.text == "Done differently."
    assert result.pending_approvals is None  # the gated call asked nobody
    # The two lookups got the original's two outcomes, in order.
    assert [p.result for p in _results(model, 1)] == ["Oslo: 1", "Oslo: 2"]
    failure = _results(model, 2)[0]
    assert (failure.result, failure.is_error) == ("no fuel", True)
    assert _results(model, 3)[0].result == "sent to ann"


async def test_the_replayed_model_sees_the_same_tools() -> None:
    replayed = replay_tools(TOOLS, RecordedOutcomes())
    for original in TOOLS:
        twin = replayed[original.name]
        assert (twin.description, twin.parameters) == (
            original.description,
            original.parameters,
        )
        assert twin.needs_approval is False
        assert twin.idempotent


async def test_a_call_the_original_never_made_is_not_executed_and_ends_the_leg() -> (
    None
):
    original = await _original()
    model = ScriptedModel(
        [
            reply(tool_calls=[("r1", "lookup", {"city": "Oslo"})]),
            reply(tool_calls=[("r2", "send_email", {"to": "bob", "body": "Hi"})]),
            reply(text="never reached"),
        ]
    )
    with pytest.raises(ReplayDiverged) as diverged:
        await generate_text(
            model=model,
            messages=replay_input(original.messages),
            tools=replay_tools(
                TOOLS, RecordedOutcomes.from_messages(original.messages)
            ),
            max_steps=10,
        )
    assert executed == []
    assert len(model.requests) == 2  # nothing after the diverging call
    assert str(diverged.value) == (
        'The replayed model asked for send_email({"body": "Hi", "to": "bob"}), which '
        "the original run never made; it was not executed, and the replay stops here."
    )
    assert (diverged.value.tool_name, diverged.value.recorded) == ("send_email", 0)


async def test_a_streamed_replay_ends_with_the_divergence_as_its_error_part() -> None:
    original = await _original()
    stream = stream_chat(
        model=ScriptedModel([reply(tool_calls=[("r1", "lookup", {"city": "Rome"})])]),
        messages=replay_input(original.messages),
        tools=replay_tools(TOOLS, RecordedOutcomes.from_messages(original.messages)),
    )
    parts = await collect(stream)
    assert isinstance(parts[-1], ErrorPart)
    assert isinstance(parts[-1].error, ReplayDiverged)
    assert executed == []


async def test_a_call_made_more_often_than_in_the_original_diverges() -> None:
    original = await _original()
    model = ScriptedModel(
        [reply(tool_calls=[(f"r{i}", "lookup", {"city": "Oslo"}) for i in range(3)])]
    )
    with pytest.raises(ReplayDiverged, match=r"more often than the original run did"):
        await generate_text(
            model=model,
            messages=replay_input(original.messages),
            tools=replay_tools(
                TOOLS, RecordedOutcomes.from_messages(original.messages)
            ),
            max_tool_concurrency=1,
        )
    assert executed == []


async def test_a_sub_agent_answers_with_its_recorded_result_and_never_runs() -> None:
    helper = agent_tool(
        name="helper", model=ScriptedModel([reply(text="Helped: 42.")]), tools=[]
    )
    original = await generate_text(
        model=ScriptedModel(
            [reply(tool_calls=[("h1", "helper", {"prompt": "ask"})]), reply(text="ok")]
        ),
        prompt="go",
        tools=[helper],
        max_steps=5,
    )
    never = agent_tool(name="helper", model=ScriptedModel([]), tools=[])
    model = ScriptedModel(
        [reply(tool_calls=[("x", "helper", {"prompt": "ask"})]), reply(text="ok")]
    )
    await generate_text(
        model=model,
        messages=replay_input(original.messages),
        tools=replay_tools([never], RecordedOutcomes.from_messages(original.messages)),
        max_steps=5,
    )
    assert _results(model, 1)[0].result == "Helped: 42."


def test_recorded_outcomes_pair_a_reused_call_id_turn_by_turn() -> None:
    history = [
        Message("user", "go"),
        Message("assistant", (ToolUsePart("call_0", "lookup", {"city": "A"}),)),
        Message("tool", (ToolResultPart("call_0", "first"),)),
        Message("assistant", (ToolUsePart("call_0", "lookup", {"city": "B"}),)),
        Message("tool", (ToolResultPart("call_0", "second"),)),
        Message("assistant", (ToolUsePart("call_0", "lookup", {"city": "C"}),)),
    ]
    recorded = RecordedOutcomes.from_messages(history)
    found = [recorded.outcome("lookup", {"city": c}, 0) for c in "ABC"]
    assert [None if f is None else f.result for f in found] == ["first", "second", None]


def test_replay_input_is_what_came_before_the_first_assistant_turn() -> None:
    history: list[Any] = [
        Message("system", "Old prompt."),
        Message("user", "Hello"),
        Message("assistant", (TextPart("Hi"),)),
        Message("user", "More"),
    ]
    assert replay_input(history) == tuple(history[:2])
    assert replay_input(history, system="New prompt.") == (
        Message("system", "New prompt."),
        history[1],
    )
