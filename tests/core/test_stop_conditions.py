"""Stop conditions after tool steps (SPEC R3.18, R3.19, R1.10, D6)."""

from __future__ import annotations

from typing import Any

from deuz_django.core import (
    StepInfo,
    Tool,
    Usage,
    cost_exceeds,
    duration_exceeds,
    generate_text,
    has_tool_call,
    step_count_is,
    total_tokens_exceed,
)
from deuz_django.core.durable import (
    DurableSession,
    create_in_memory_session_store,
    resume_from_checkpoint,
)
from deuz_django.core.testing import ScriptedModel, reply
from tests.core.support import FakeClock, Probe, RecordingLogger, make_deps


def _tool_steps(count: int, *, step_usage: tuple[int, int] = (5, 5)) -> ScriptedModel:
    return ScriptedModel(
        [reply(tool_calls=[(f"c{i}", "t", {})], usage=step_usage) for i in range(count)]
        + [reply(text="done", usage=step_usage)]
    )


async def _run(model: ScriptedModel, **options: Any) -> Any:
    options.setdefault("max_steps", 10)
    return await generate_text(
        model=model, prompt="x", tools=[Probe().tool("t")], **options
    )


async def test_step_count_is_stops_after_n_steps_of_this_leg() -> None:
    # SPEC R3.19
    model = _tool_steps(5)
    result = await _run(model, stop_when=step_count_is(2))
    assert len(model.requests) == 2
    assert result.stopped_by == "step_count_is"
    assert result.provider_metadata == {"deuz": {"stoppedBy": "step_count_is"}}


async def test_a_stop_keeps_the_steps_finish_reason() -> None:
    # SPEC R1.10: a stop condition never creates a new reason.
    result = await _run(_tool_steps(5), stop_when=step_count_is(1))
    assert result.finish_reason == "tool_calls"


async def test_max_steps_names_itself_as_the_stop() -> None:
    # SPEC R3.18 with D6: max_steps is a named stop reason.
    model = _tool_steps(5)
    result = await _run(model, max_steps=3)
    assert len(model.requests) == 3
    assert result.stopped_by == "max_steps"


async def test_when_two_conditions_trip_together_the_first_in_order_is_named() -> None:
    # D6 (Q8): max_steps first, then the user's conditions in list order.
    result = await _run(_tool_steps(5), max_steps=2, stop_when=step_count_is(2))
    assert result.stopped_by == "max_steps"
    result = await _run(
        _tool_steps(5), stop_when=[total_tokens_exceed(10), step_count_is(1)]
    )
    assert result.stopped_by == "total_tokens_exceed"
    result = await _run(
        _tool_steps(5), stop_when=[step_count_is(1), total_tokens_exceed(10)]
    )
    assert result.stopped_by == "step_count_is"


async def test_an_unnamed_callable_stops_as_custom() -> None:
    # SPEC R3.18: an unnamed function reports "custom".
    result = await _run(_tool_steps(5), stop_when=lambda info: info.step_count >= 2)
    assert result.stopped_by == "custom"


async def test_a_named_callable_reports_its_name() -> None:
    # SPEC R3.18
    class Enough:
        name = "enough"

        def __call__(self, info: StepInfo) -> bool:
            return True

    result = await _run(_tool_steps(5), stop_when=Enough())
    assert result.stopped_by == "enough"


async def test_conditions_are_not_checked_after_a_natural_completion() -> None:
    # SPEC R3.18: checked only after a step that executed tools.
    checked: list[int] = []

    def condition(info: StepInfo) -> bool:
        checked.append(info.step_count)
        return False

    result = await _run(_tool_steps(1), stop_when=condition)
    assert checked == [1]
    assert result.stopped_by is None
    assert result.text == "done"


async def test_conditions_are_not_checked_after_a_suspension() -> None:
    # SPEC R3.18
    checked: list[int] = []

    def condition(info: StepInfo) -> bool:
        checked.append(info.step_count)
        return True

    result = await generate_text(
        model=_tool_steps(1),
        prompt="x",
        tools=[Probe().tool("t", needs_approval=True)],
        stop_when=condition,
    )
    assert checked == []
    assert result.stopped_by is None


async def test_step_info_counts_this_leg_and_the_runs_cumulative_usage() -> None:
    # SPEC R3.18: steps/step_count per leg, usage cumulative across legs.
    store = create_in_memory_session_store()
    gated = Probe().tool("t", needs_approval=True)
    await generate_text(
        model=ScriptedModel([reply(tool_calls=[("c1", "t", {})], usage=(10, 5))]),
        prompt="x",
        tools=[gated],
        session=DurableSession(store, "run-1"),
        deps=make_deps(),
    )
    seen: list[tuple[int, int, int]] = []

    def condition(info: StepInfo) -> bool:
        seen.append((info.step_count, len(info.steps), info.usage.total_tokens))
        return False

    model = ScriptedModel(
        [
            reply(tool_calls=[("c2", "read", {})], usage=(20, 6)),
            reply(text="done", usage=(1, 1)),
        ]
    )
    await resume_from_checkpoint(
        store,
        "run-1",
        model=model,
        tools=[gated, Probe().tool("read")],
        max_steps=5,
        stop_when=condition,
        approval_responses=[{"approval_id": "c1", "approved": True}],
        deps=make_deps(),
    )
    assert seen == [(1, 1, 41)]


async def test_total_tokens_exceed_uses_the_cumulative_usage_across_legs() -> None:
    # SPEC R3.19, R7.5: budget stops see the whole run's usage.
    store = create_in_memory_session_store()
    gated = Probe().tool("t", needs_approval=True)
    await generate_text(
        model=ScriptedModel([reply(tool_calls=[("c1", "t", {})], usage=(30, 0))]),
        prompt="x",
        tools=[gated],
        session=DurableSession(store, "run-1"),
        deps=make_deps(),
    )
    model = ScriptedModel(
        [reply(tool_calls=[("c2", "t", {})], usage=(10, 0)), reply(text="more")]
    )
    result = await resume_from_checkpoint(
        store,
        "run-1",
        model=model,
        tools=[Probe().tool("t")],
        max_steps=5,
        stop_when=total_tokens_exceed(40),
        approval_responses=[{"approval_id": "c1", "approved": True}],
        deps=make_deps(),
    )
    assert len(model.requests) == 1
    assert result.stopped_by == "total_tokens_exceed"
    checkpoint = store.load("run-1")
    assert checkpoint is not None
    assert (
        checkpoint.status == "completed"
    )  # R3.19: the stop saves a completed boundary


class PerToken:
    def price_usage(self, model_id: str, used: Usage) -> float | None:
        return used.total_tokens / 100


async def test_cost_exceeds_uses_the_price_of_the_cumulative_usage() -> None:
    # SPEC R3.19
    model = _tool_steps(5, step_usage=(5, 5))
    result = await _run(
        model,
        stop_when=cost_exceeds(0.25),
        deps=make_deps(price_provider=PerToken()),
    )
    assert len(model.requests) == 3
    assert result.stopped_by == "cost_exceeds"


async def test_cost_exceeds_without_a_price_provider_warns_once_and_never_fires() -> (
    None
):
    # SPEC R3.19
    logger = RecordingLogger()
    model = _tool_steps(3)
    result = await _run(
        model,
        stop_when=[cost_exceeds(0.0), cost_exceeds(0.0)],
        deps=make_deps(logger=logger),
    )
    assert result.stopped_by is None
    assert result.text == "done"
    assert [msg for msg, _ in logger.warnings] == [
        "cost_exceeds: no deps.price_provider injected — the condition never fires"
    ]


async def test_has_tool_call_stops_after_a_step_that_called_the_tool() -> None:
    # SPEC R3.19
    model = ScriptedModel(
        [
            reply(tool_calls=[("c1", "t", {})]),
            reply(tool_calls=[("c2", "finish_task", {})]),
            reply(text="never"),
        ]
    )
    result = await generate_text(
        model=model,
        prompt="x",
        tools=[Probe().tool("t"), Probe().tool("finish_task")],
        max_steps=10,
        stop_when=has_tool_call("finish_task"),
    )
    assert len(model.requests) == 2
    assert result.stopped_by == "has_tool_call"


async def test_duration_exceeds_measures_the_injected_clock() -> None:
    # SPEC R3.18: elapsedMs = clock.now() - loop start.
    clock = FakeClock()

    async def slow(args: Any, ctx: Any) -> str:
        clock.ms += 600
        return "ok"

    model = _tool_steps(5)
    result = await generate_text(
        model=model,
        prompt="x",
        tools=[Tool(name="t", execute=slow)],
        max_steps=10,
        stop_when=duration_exceeds(1000),
        deps=make_deps(clock=clock),
    )
    assert len(model.requests) == 2
    assert result.stopped_by == "duration_exceeds"


async def test_the_guard_takes_precedence_over_stop_conditions() -> None:
    # SPEC R3.18: conditions are evaluated only when the runaway guard did not trip.
    model = ScriptedModel([reply(tool_calls=[(f"c{i}", "t", {})]) for i in range(5)])
    checked: list[int] = []

    def condition(info: StepInfo) -> bool:
        checked.append(info.step_count)
        return False

    result = await generate_text(
        model=model,
        prompt="x",
        tools=[Probe(error="down").tool("t")],
        max_steps=10,
        stop_when=condition,
    )
    assert checked == [1, 2]
    assert len(model.requests) == 3
    assert result.stopped_by is None
