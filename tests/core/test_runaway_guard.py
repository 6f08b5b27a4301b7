"""The runaway guard counts steps: three consecutive steps in which the same tool failed
end the run (SPEC R3.17, D6)."""

from __future__ import annotations

import asyncio
from typing import Any

from deuz_django.core import Tool, generate_text
from deuz_django.core.durable import (
    DurableSession,
    create_in_memory_session_store,
    resume_from_checkpoint,
)
from deuz_django.core.testing import ScriptedModel, reply
from tests.core.support import Probe, make_deps


def _steps(*batches: list[tuple[str, str]]) -> ScriptedModel:
    """One model turn per batch of (call id, tool name), then a final answer."""
    return ScriptedModel(
        [
            reply(tool_calls=[(cid, name, {}) for cid, name in batch])
            for batch in batches
        ]
        + [reply(text="final")]
    )


def _flaky() -> Tool:
    return Probe(error="service down").tool("flaky")


async def _run(model: ScriptedModel, tools: list[Tool], **options: Any) -> Any:
    return await generate_text(
        model=model, prompt="x", tools=tools, max_steps=20, **options
    )


async def test_three_consecutive_failing_steps_of_one_tool_end_the_run() -> None:
    # D6: three steps in a row in which "flaky" failed.
    store = create_in_memory_session_store()
    model = _steps([("c1", "flaky")], [("c2", "flaky")], [("c3", "flaky")])
    result = await _run(
        model, [_flaky()], session=DurableSession(store, "run-1"), deps=make_deps()
    )
    assert len(model.requests) == 3  # no further model call
    # SPEC R3.17: the loop ends after the step's results are appended, completed.
    assert [m.role for m in result.messages][-2:] == ["assistant", "tool"]
    checkpoint = store.load("run-1")
    assert checkpoint is not None
    assert (checkpoint.status, checkpoint.step_index) == ("completed", 3)
    # SPEC R3.17: the guard does not set stopped_by.
    assert result.stopped_by is None
    assert result.finish_reason == "tool_calls"


async def test_three_failing_parallel_calls_in_one_step_do_not_trip() -> None:
    # D6 (Q5): the reference counted results; we count steps.
    model = _steps([("c1", "flaky"), ("c2", "flaky"), ("c3", "flaky")])
    result = await _run(model, [_flaky()])
    assert len(model.requests) == 2
    assert result.text == "final"


async def test_two_failing_steps_do_not_trip() -> None:
    # D6
    model = _steps([("c1", "flaky")], [("c2", "flaky")])
    result = await _run(model, [_flaky()])
    assert result.text == "final"


async def test_a_success_between_failures_resets_the_count() -> None:
    # SPEC R3.17: a success resets the tool's counter.
    calls = 0

    async def sometimes(args: Any, ctx: Any) -> str:
        nonlocal calls
        calls += 1
        if calls == 3:
            return "worked once"
        raise RuntimeError("down")

    model = _steps(
        [("c1", "flaky")],
        [("c2", "flaky")],
        [("c3", "flaky")],
        [("c4", "flaky")],
        [("c5", "flaky")],
    )
    result = await _run(model, [Tool(name="flaky", execute=sometimes)])
    assert result.text == "final"
    assert len(model.requests) == 6


async def test_a_step_without_the_failing_tool_breaks_the_streak() -> None:
    # D6: the steps must be consecutive.
    model = _steps(
        [("c1", "flaky")],
        [("c2", "flaky")],
        [("c3", "fine")],
        [("c4", "flaky")],
        [("c5", "flaky")],
    )
    result = await _run(model, [_flaky(), Probe().tool("fine")])
    assert result.text == "final"


async def test_counters_are_per_tool_name() -> None:
    # SPEC R3.17: one counter per tool name; alternating failures never add up.
    model = _steps(
        [("c1", "flaky")],
        [("c2", "broken")],
        [("c3", "flaky")],
        [("c4", "broken")],
    )
    result = await _run(model, [_flaky(), Probe(error="x").tool("broken")])
    assert result.text == "final"


async def test_a_tool_failing_alongside_others_in_each_step_trips() -> None:
    # D6: "flaky" failed in three consecutive steps, whatever else ran with it.
    model = _steps(
        [("c1", "flaky"), ("c2", "fine")],
        [("c3", "fine"), ("c4", "flaky")],
        [("c5", "flaky"), ("c6", "fine")],
    )
    result = await _run(model, [_flaky(), Probe().tool("fine")])
    assert len(model.requests) == 3
    assert result.text == ""


async def test_unknown_tool_errors_count() -> None:
    # SPEC R3.17: unknown-tool errors count.
    model = _steps([("c1", "ghost")], [("c2", "ghost")], [("c3", "ghost")])
    result = await _run(model, [Probe().tool("real")])
    assert len(model.requests) == 3
    assert result.text == ""


async def test_timeouts_count() -> None:
    # SPEC R3.17: timeouts count.
    async def stuck(args: Any, ctx: Any) -> str:
        await asyncio.Event().wait()
        return "never"

    model = _steps([("c1", "stuck")], [("c2", "stuck")], [("c3", "stuck")])
    result = await _run(
        model, [Tool(name="stuck", execute=stuck, timeout_ms=5)], deps=make_deps()
    )
    assert len(model.requests) == 3
    assert result.text == ""


async def test_approval_denials_do_not_count() -> None:
    # SPEC R3.17: denied calls are excluded.
    model = _steps([("c1", "gated")], [("c2", "gated")], [("c3", "gated")])
    result = await _run(
        model,
        [Probe().tool("gated", needs_approval=True)],
        approve_tool_call=lambda call, messages: False,
    )
    assert result.text == "final"


async def test_runaway_counters_restart_on_each_leg() -> None:
    # SPEC R7.5: runaway counters restart per leg.
    store = create_in_memory_session_store()
    gate = Probe().tool("gate", needs_approval=True)
    first = _steps([("c1", "flaky")], [("c2", "flaky"), ("c3", "gate")])
    await generate_text(
        model=first,
        prompt="x",
        tools=[_flaky(), gate],
        max_steps=20,
        session=DurableSession(store, "run-1"),
        deps=make_deps(),
    )
    # Leg 1 saw one failing flaky step (c2 was never run: the step broke on c3). Leg 2
    # settles c2 (fails) and c3, then one more failing step: two rounds, not three.
    second = _steps([("c4", "flaky")])
    result = await resume_from_checkpoint(
        store,
        "run-1",
        model=second,
        tools=[_flaky(), gate],
        max_steps=20,
        approval_responses=[{"approval_id": "c3", "approved": True}],
        deps=make_deps(),
    )
    assert result.text == "final"
