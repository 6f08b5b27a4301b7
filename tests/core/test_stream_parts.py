"""The canonical stream: part shapes, the R4.2 grammar of a leg and its ordering rules
(SPEC §4)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from deuz_django.core import Tool, Usage, agent_tool, stream_chat
from deuz_django.core.durable import (
    DurableSession,
    create_in_memory_session_store,
    resume_stream_from_checkpoint,
)
from deuz_django.core.parts import (
    CostPart,
    FinishPart,
    StepFinishPart,
    StreamPart,
    SubAgentPart,
    ToolApprovalRequestPart,
    ToolStatePart,
)
from deuz_django.core.testing import ScriptedModel, reply
from tests.core.support import (
    Probe,
    RecordingLogger,
    collect,
    make_deps,
    tokens,
    usage,
)

# -- the grammar of one leg (R4.2) as a regular expression over part tokens -------------


def _t(name: str) -> str:
    return f"(?:{re.escape(name)} )"


_SUB = r"sub-agent\[[^\]]*\]:\S+ "
_EXECUTING = _t("tool-state:executing")
_APPROVAL = _t("tool-approval-request")
_RESULT_PAIR = (
    f"{_t('tool-result')}(?:{_t('tool-state:complete')}|{_t('tool-state:error')})"
)
_SETTLE = (
    f"(?:{_EXECUTING}*(?:{_SUB})*(?:{_RESULT_PAIR})*"
    f"|{_EXECUTING}*(?:{_SUB})*(?:{_APPROVAL})+)"
)
_INNER = (
    f"(?:{_t('text-delta')}|{_t('reasoning-delta')}"
    f"|{_t('tool-state:input-streaming')}{_t('tool-call-delta')}"
    f"|{_t('tool-call-delta')}|{_t('source')}|{_t('warning')})"
)
_BREAK = f"{_t('tool-state:awaiting-approval')}*(?:{_APPROVAL})*"
_EXECUTE = (
    f"(?:{_EXECUTING}*(?:{_SUB})*(?:{_RESULT_PAIR})+(?:{_t('budget-exceeded')})?"
    f"|{_EXECUTING}*(?:{_SUB})*(?:{_APPROVAL})+)"
)
_TOOL_PHASE = (
    f"(?:{_t('tool-call')}{_t('tool-state:input-complete')})+(?:{_BREAK}|{_EXECUTE})"
)
_NATURAL_END = f"(?:{_t('false-finish')})?(?:{_t('verify')})?"
_STEP = (
    f"{_t('step-start')}(?:{_t('compaction')})*(?:{_t('warning')})*(?:{_INNER})*"
    f"{_t('step-finish')}(?:{_t('cost')})?(?:{_NATURAL_END}|{_TOOL_PHASE})"
)
LEG = re.compile(f"(?:{_SETTLE})?(?:{_STEP})*(?:{_t('finish')}|{_t('error')})")


def assert_leg(parts: list[StreamPart]) -> None:
    """SPEC R4.2: the leg's top-level parts follow the grammar and end with finish/error."""
    text = "".join(f"{t} " for t in tokens(parts))
    assert LEG.fullmatch(text), text


# -- scenarios -----------------------------------------------------------------------------


def _weather() -> Tool:
    return Probe({"temp": 22}).tool("get_weather")


def _gated(name: str = "delete") -> Tool:
    return Probe("deleted").tool(name, needs_approval=True)


async def test_a_tool_step_then_an_answer_follows_the_grammar() -> None:
    # SPEC R4.2
    model = ScriptedModel(
        [
            reply(tool_calls=[("c1", "get_weather", {"city": "Oslo"})], reasoning="hm"),
            reply(text=["Sun", "ny."]),
        ]
    )
    parts = await collect(
        stream_chat(model=model, prompt="x", tools=[_weather()], max_steps=2)
    )
    assert_leg(parts)
    assert tokens(parts) == [
        "step-start",
        "reasoning-delta",
        "tool-state:input-streaming",
        "tool-call-delta",
        "tool-call-delta",
        "step-finish",
        "tool-call",
        "tool-state:input-complete",
        "tool-state:executing",
        "tool-result",
        "tool-state:complete",
        "step-start",
        "text-delta",
        "text-delta",
        "step-finish",
        "finish",
    ]


async def test_input_streaming_precedes_the_first_delta_of_each_call() -> None:
    # SPEC R4.2: tool-state(input-streaming) right before each call id's first delta.
    model = ScriptedModel(
        [
            reply(tool_calls=[("c1", "get_weather", {}), ("c2", "get_weather", {})]),
            reply(),
        ]
    )
    parts = await collect(
        stream_chat(model=model, prompt="x", tools=[_weather()], max_steps=2)
    )
    streaming = [
        (i, p.tool_call_id)
        for i, p in enumerate(parts)
        if isinstance(p, ToolStatePart) and p.state == "input-streaming"
    ]
    for index, call_id in streaming:
        following = parts[index + 1]
        assert following.type == "tool-call-delta"
        assert following.id == call_id  # type: ignore[union-attr]
    assert [c for _, c in streaming] == ["c1", "c2"]


async def test_tool_call_parts_come_after_step_finish_in_call_order() -> None:
    # SPEC R3.8.2, R4.2
    model = ScriptedModel(
        [
            reply(tool_calls=[("c1", "get_weather", {"a": 1}), ("c2", "nope", {})]),
            reply(),
        ]
    )
    parts = await collect(
        stream_chat(model=model, prompt="x", tools=[_weather()], max_steps=2)
    )
    assert_leg(parts)
    finish_at = next(i for i, p in enumerate(parts) if isinstance(p, StepFinishPart))
    after = [p.to_json() for p in parts[finish_at + 1 : finish_at + 5]]
    assert after == [
        {
            "type": "tool-call",
            "toolCallId": "c1",
            "toolName": "get_weather",
            "input": {"a": 1},
        },
        {
            "type": "tool-state",
            "toolCallId": "c1",
            "toolName": "get_weather",
            "state": "input-complete",
        },
        {"type": "tool-call", "toolCallId": "c2", "toolName": "nope", "input": {}},
        {
            "type": "tool-state",
            "toolCallId": "c2",
            "toolName": "nope",
            "state": "input-complete",
        },
    ]


async def test_unknown_tool_calls_get_no_executing_state() -> None:
    # SPEC R4.2: unknown-tool calls go straight to error.
    model = ScriptedModel(
        [reply(tool_calls=[("c1", "get_weather", {}), ("c2", "nope", {})]), reply()]
    )
    parts = await collect(
        stream_chat(model=model, prompt="x", tools=[_weather()], max_steps=2)
    )
    states = [
        (p.tool_call_id, p.state)
        for p in parts
        if isinstance(p, ToolStatePart)
        and p.state in ("executing", "complete", "error")
    ]
    assert states == [("c1", "executing"), ("c1", "complete"), ("c2", "error")]


async def test_an_approval_break_follows_the_grammar_and_ends_with_finish() -> None:
    # SPEC R4.2, R5.8: awaiting-approval per gated call, then the requests, then finish.
    model = ScriptedModel(
        [reply(tool_calls=[("c1", "get_weather", {}), ("c2", "delete", {})])]
    )
    parts = await collect(
        stream_chat(model=model, prompt="x", tools=[_weather(), _gated()], max_steps=2)
    )
    assert_leg(parts)
    assert tokens(parts)[-3:] == [
        "tool-state:awaiting-approval",
        "tool-approval-request",
        "finish",
    ]
    assert parts[-3].tool_call_id == "c2"  # type: ignore[union-attr]
    finish = parts[-1]
    assert isinstance(finish, FinishPart)
    assert finish.finish_reason == "tool_calls"


async def test_server_mode_denials_end_in_error_state_without_reason() -> None:
    # SPEC R4.2, R5.2
    model = ScriptedModel([reply(tool_calls=[("c1", "delete", {})]), reply()])
    parts = await collect(
        stream_chat(
            model=model,
            prompt="x",
            tools=[_gated()],
            max_steps=2,
            approve_tool_call=lambda call, messages: False,
        )
    )
    assert_leg(parts)
    [terminal] = [
        p for p in parts if isinstance(p, ToolStatePart) and p.state == "error"
    ]
    assert terminal.to_json() == {
        "type": "tool-state",
        "toolCallId": "c1",
        "toolName": "delete",
        "state": "error",
        "denied": True,
    }
    assert "tool-state:executing" not in tokens(parts)


async def test_a_resume_leg_settles_before_its_first_step_start() -> None:
    # SPEC R4.2, R7.6: settle parts first; executing states first, then pairs in order.
    store = create_in_memory_session_store()
    tools = [_gated("a"), _gated("b"), _gated("c"), _weather()]
    first = ScriptedModel(
        [
            reply(
                tool_calls=[
                    ("c1", "a", {}),
                    ("c2", "b", {}),
                    ("c3", "c", {}),
                    ("c4", "get_weather", {}),
                ]
            )
        ]
    )
    await collect(
        stream_chat(
            model=first,
            prompt="x",
            tools=tools,
            session=DurableSession(store, "run-1"),
            deps=make_deps(),
        )
    )
    resumed = resume_stream_from_checkpoint(
        store,
        "run-1",
        model=ScriptedModel([reply(text="done")]),
        tools=tools,
        approval_responses=[
            {"approval_id": "c1", "approved": True},
            {"approval_id": "c2", "approved": False, "reason": "not today"},
        ],
        deps=make_deps(),
    )
    parts = await collect(resumed)
    assert_leg(parts)
    assert tokens(parts)[:10] == [
        "tool-state:executing",
        "tool-state:executing",
        "tool-result",
        "tool-state:complete",
        "tool-result",
        "tool-state:error",
        "tool-result",
        "tool-state:error",
        "tool-result",
        "tool-state:complete",
    ]
    assert [p.tool_call_id for p in parts[:2]] == ["c1", "c4"]  # type: ignore[union-attr]
    denied = [p.to_json() for p in parts if isinstance(p, ToolStatePart) and p.denied]
    assert denied == [
        {
            "type": "tool-state",
            "toolCallId": "c2",
            "toolName": "b",
            "state": "error",
            "denied": True,
            "deniedReason": "not today",
        },
        {
            "type": "tool-state",
            "toolCallId": "c3",
            "toolName": "c",
            "state": "error",
            "denied": True,
            "deniedReason": "No approval response.",
        },
    ]
    assert tokens(parts)[10] == "step-start"


def _coder(child: ScriptedModel) -> Tool:
    return agent_tool(name="coder", model=child, tools=[_gated("run_shell")])


async def test_a_suspending_sub_agent_gets_no_tool_result_and_ends_with_finish() -> (
    None
):
    # SPEC R4.2 execute (second form), R9.8: no tool-result; the request surfaces top-level.
    store = create_in_memory_session_store()
    child = ScriptedModel([reply(tool_calls=[("k1", "run_shell", {"cmd": "ls"})])])
    parent = ScriptedModel([reply(tool_calls=[("c1", "coder", {"prompt": "fix"})])])
    parts = await collect(
        stream_chat(
            model=parent,
            prompt="x",
            tools=[_coder(child)],
            max_steps=3,
            session=DurableSession(store, "root"),
            deps=make_deps(),
        )
    )
    assert_leg(parts)
    top = tokens(parts)
    assert "tool-result" not in top
    assert top[-2:] == ["tool-approval-request", "finish"]
    request = parts[-2]
    assert isinstance(request, ToolApprovalRequestPart)
    assert request.request.agent_path == ("coder",)
    forwarded = [p for p in parts if isinstance(p, SubAgentPart)]
    assert forwarded
    assert all(p.agent_path == ("coder",) for p in forwarded)
    # The child's own approval parts were forwarded wrapped (R9.8).
    assert "sub-agent[coder]:tool-approval-request" in top
    assert isinstance(parts[-1], FinishPart)
    assert parts[-1].finish_reason == "tool_calls"


async def test_a_settle_that_re_suspends_ends_with_finish_stop() -> None:
    # SPEC R4.2 settle (second form): no step ran, so finish says 'stop'.
    store = create_in_memory_session_store()
    child = ScriptedModel(
        [
            reply(tool_calls=[("k1", "run_shell", {})]),
            reply(tool_calls=[("k2", "run_shell", {})]),
        ]
    )
    parent = ScriptedModel([reply(tool_calls=[("c1", "coder", {"prompt": "fix"})])])
    options: dict[str, Any] = {"tools": [_coder(child)], "max_steps": 3}
    await collect(
        stream_chat(
            model=parent,
            prompt="x",
            session=DurableSession(store, "root"),
            deps=make_deps(),
            **options,
        )
    )
    parts = await collect(
        resume_stream_from_checkpoint(
            store,
            "root",
            model=parent,
            approval_responses=[{"approval_id": "k1", "approved": True}],
            deps=make_deps(),
            **options,
        )
    )
    assert_leg(parts)
    assert "step-start" not in tokens(parts)
    assert tokens(parts)[0] == "tool-state:executing"
    assert tokens(parts)[-2:] == ["tool-approval-request", "finish"]
    assert isinstance(parts[-1], FinishPart)
    assert parts[-1].finish_reason == "stop"


async def test_an_error_cuts_the_leg_and_nothing_follows_it() -> None:
    # SPEC R4.2: terminal := finish | error; an error may cut a leg at any point.
    model = ScriptedModel([reply(text="par", error="boom")])
    parts = await collect(stream_chat(model=model, prompt="x", tools=[_weather()]))
    assert tokens(parts) == ["step-start", "text-delta", "error"]


# -- R4.3: the finish part ----------------------------------------------------------------


async def test_finish_usage_is_the_leg_usage_including_sub_agents() -> None:
    # SPEC R4.3, R9.6
    child = ScriptedModel([reply(text="child answer", usage=(100, 1))])
    helper = agent_tool(name="helper", model=child)
    parent = ScriptedModel(
        [
            reply(tool_calls=[("c1", "helper", {"prompt": "p"})], usage=(10, 5)),
            reply(text="done", usage=(20, 6)),
        ]
    )
    parts = await collect(
        stream_chat(model=parent, prompt="x", tools=[helper], max_steps=2)
    )
    finish = parts[-1]
    assert isinstance(finish, FinishPart)
    assert finish.usage == usage(130, 12)
    assert finish.provider_metadata is None
    step_usages = [p.usage for p in parts if isinstance(p, StepFinishPart)]
    assert step_usages == [usage(10, 5), usage(20, 6)]


async def test_finish_carries_stopped_by_only_when_a_condition_stopped_the_leg() -> (
    None
):
    # SPEC R4.3: providerMetadata = {deuz: {stoppedBy}} only when non-empty.
    model = ScriptedModel([reply(tool_calls=[("c1", "get_weather", {})]), reply()])
    parts = await collect(
        stream_chat(model=model, prompt="x", tools=[_weather()], max_steps=1)
    )
    finish = parts[-1]
    assert isinstance(finish, FinishPart)
    assert finish.to_json()["providerMetadata"] == {"deuz": {"stoppedBy": "max_steps"}}


# -- R4.4: cost parts -----------------------------------------------------------------------


class PerToken:
    """$0.001 per total token."""

    def price_usage(self, model_id: str, used: Usage) -> float | None:
        return used.total_tokens / 1000


class Broken:
    def price_usage(self, model_id: str, used: Usage) -> float | None:
        raise RuntimeError("price list unavailable")


async def test_one_cost_part_per_step_with_cumulative_cost_and_delta() -> None:
    # SPEC R4.4
    model = ScriptedModel(
        [
            reply(tool_calls=[("c1", "get_weather", {})], usage=(10, 5)),
            reply(text="done", usage=(20, 6)),
        ]
    )
    parts = await collect(
        stream_chat(
            model=model,
            prompt="x",
            tools=[_weather()],
            max_steps=2,
            deps=make_deps(price_provider=PerToken()),
        )
    )
    assert_leg(parts)
    costs = [p.to_json() for p in parts if isinstance(p, CostPart)]
    assert costs == [
        {"type": "cost", "costUsd": 0.015, "deltaUsd": 0.015, "stepIndex": 0},
        {"type": "cost", "costUsd": 0.041, "deltaUsd": 0.026, "stepIndex": 1},
    ]
    assert tokens(parts).index("cost") == tokens(parts).index("step-finish") + 1


async def test_cost_on_a_resume_leg_starts_from_the_price_of_the_base_usage() -> None:
    # SPEC R4.4: on resume, prev = price of the checkpoint's cumulative usage.
    store = create_in_memory_session_store()
    deps = make_deps(price_provider=PerToken())
    first = ScriptedModel([reply(tool_calls=[("c1", "delete", {})], usage=(10, 5))])
    await collect(
        stream_chat(
            model=first,
            prompt="x",
            tools=[_gated()],
            session=DurableSession(store, "run-1"),
            deps=deps,
        )
    )
    parts = await collect(
        resume_stream_from_checkpoint(
            store,
            "run-1",
            model=ScriptedModel([reply(text="done", usage=(20, 6))]),
            tools=[_gated()],
            approval_responses=[{"approval_id": "c1", "approved": True}],
            deps=deps,
        )
    )
    costs = [p for p in parts if isinstance(p, CostPart)]
    assert [(c.cost_usd, c.delta_usd, c.step_index) for c in costs] == [
        (0.041, 0.026, 1)
    ]


async def test_a_raising_price_provider_logs_a_warning_and_emits_no_cost_part() -> None:
    # SPEC R4.4
    logger = RecordingLogger()
    model = ScriptedModel([reply(text="done", usage=(1, 1))])
    parts = await collect(
        stream_chat(
            model=model,
            prompt="x",
            tools=[_weather()],
            deps=make_deps(price_provider=Broken(), logger=logger),
        )
    )
    assert "cost" not in tokens(parts)
    assert any("price list unavailable" in msg for msg, _ in logger.warnings)


@pytest.mark.parametrize(
    ("part", "expected"),
    [
        (CostPart(0.5), {"type": "cost", "costUsd": 0.5}),
        (
            StepFinishPart(2, "stop", Usage()),
            {
                "type": "step-finish",
                "stepIndex": 2,
                "finishReason": "stop",
                "usage": Usage().to_json(),
            },
        ),
        (
            ToolStatePart("c1", "input-complete"),
            {"type": "tool-state", "toolCallId": "c1", "state": "input-complete"},
        ),
    ],
)
def test_canonical_part_json_uses_camel_case_and_omits_absent_keys(
    part: StreamPart, expected: dict[str, Any]
) -> None:
    # SPEC R4.1
    assert part.to_json() == expected


def test_the_grammar_rejects_misordered_legs() -> None:
    # SPEC R4.2: the checker above is strict enough to catch an ordering slip.
    def leg(*names: str) -> str:
        return "".join(f"{n} " for n in names)

    assert LEG.fullmatch(leg("step-start", "step-finish", "finish"))
    assert not LEG.fullmatch(leg("step-start", "tool-call", "step-finish", "finish"))
    assert not LEG.fullmatch(leg("step-start", "step-finish"))
    assert not LEG.fullmatch(
        leg("step-start", "step-finish", "finish", "step-start", "finish")
    )
    assert not LEG.fullmatch(
        leg("step-start", "step-finish", "tool-result", "tool-state:complete", "finish")
    )


async def test_a_resumed_sub_agent_call_streams_executing_child_parts_then_result() -> (
    None
):
    # SPEC R4.2: a suspended sub-agent call gets no terminal state in the suspending leg;
    # on resume its settle emits executing, the child's forwarded parts, then the result.
    store = create_in_memory_session_store()
    child = ScriptedModel(
        [reply(tool_calls=[("k1", "run_shell", {})]), reply(text="child done")]
    )
    parent = ScriptedModel(
        [reply(tool_calls=[("c1", "coder", {"prompt": "fix"})]), reply(text="end")]
    )
    options: dict[str, Any] = {"tools": [_coder(child)], "max_steps": 3}
    first = await collect(
        stream_chat(
            model=parent,
            prompt="x",
            session=DurableSession(store, "root"),
            deps=make_deps(),
            **options,
        )
    )
    own = [
        p.state
        for p in first
        if isinstance(p, ToolStatePart) and p.tool_call_id == "c1"
    ]
    assert own == ["input-streaming", "input-complete", "executing"]
    parts = await collect(
        resume_stream_from_checkpoint(
            store,
            "root",
            model=parent,
            approval_responses=[{"approval_id": "k1", "approved": True}],
            deps=make_deps(),
            **options,
        )
    )
    assert_leg(parts)
    names = tokens(parts)
    result_at = names.index("tool-result")
    assert names[0] == "tool-state:executing"
    assert all(n.startswith("sub-agent[coder]:") for n in names[1:result_at])
    assert result_at > 1
    assert names[result_at + 1] == "tool-state:complete"
    assert names[result_at + 2] == "step-start"
