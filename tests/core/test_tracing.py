"""OpenTelemetry spans of a run (deuz_django.core.tracing): GenAI names and attributes, the
span tree of a leg, one trace across a suspend and a resume, and nothing without a provider."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from deuz_django.core import (
    ModelError,
    StreamPart,
    Tool,
    agent_tool,
    generate_text,
    tool,
    tracing,
)
from deuz_django.core.durable import (
    DurableSession,
    InMemorySessionStore,
    resume_from_checkpoint,
)
from deuz_django.core.parts import StepStartPart
from deuz_django.core.testing import ScriptedModel, reply
from deuz_django.core.tracing import record_approval, run_trace
from tests.core.support import make_deps
from tests.spans import Recorded, SpanRecord, named, one, recording


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Any:
    with recording(monkeypatch) as recorded:
        yield recorded


@tool
def lookup(order: str) -> str:
    """Find an order."""
    return f"order {order}: shipped"


@tool
def broken(order: str) -> str:
    """Always fails."""
    raise RuntimeError("database is down")


def _delete() -> Tool:
    async def execute(args: Any, ctx: Any) -> str:
        return "deleted"

    return Tool(name="delete", execute=execute, needs_approval=True)


def _children(spans: list[SpanRecord], parent: SpanRecord) -> list[str]:
    return [s.name for s in spans if s.parent_id == parent.span_id]


async def test_a_leg_is_an_invoke_agent_span_with_steps_model_and_tool_calls(
    spans: Recorded,
) -> None:
    model = ScriptedModel(
        [
            reply(tool_calls=[("c1", "lookup", {"order": "42"})], usage=(10, 5)),
            reply(text="Shipped.", usage=(20, 6)),
        ],
        model_id="gpt-test",
    )
    store = InMemorySessionStore()
    with run_trace("", agent="support") as run:
        await generate_text(
            model=model,
            prompt="Where is 42?",
            tools=[lookup],
            session=DurableSession(store, "run-1"),
            deps=make_deps(),
            max_steps=5,
        )
    recorded = spans.spans()
    leg = one(recorded, "invoke_agent support")
    assert run.started
    assert run.traceparent.split("-")[2] == leg.span_id
    assert leg.parent_id is None
    assert leg.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert leg.attributes["gen_ai.agent.name"] == "support"
    assert leg.attributes["gen_ai.conversation.id"] == "run-1"
    assert leg.attributes["gen_ai.provider.name"] == "scripted"
    assert leg.attributes["deuz.run.status"] == "completed"
    assert (
        leg.attributes["gen_ai.usage.input_tokens"],
        leg.attributes["gen_ai.usage.output_tokens"],
    ) == (30, 11)
    steps = named(recorded, "step")
    assert [s.attributes["deuz.step.index"] for s in steps] == [0, 1]
    assert all(s.parent_id == leg.span_id for s in steps)
    assert _children(recorded, steps[0]) == ["chat gpt-test", "execute_tool lookup"]
    assert _children(recorded, steps[1]) == ["chat gpt-test"]
    chat = named(recorded, "chat gpt-test")[0]
    assert chat.attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "scripted",
        "gen_ai.request.model": "gpt-test",
        "gen_ai.response.model": "gpt-test",
        "gen_ai.response.finish_reasons": ("tool_calls",),
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 5,
    }
    call = one(recorded, "execute_tool lookup")
    assert call.attributes == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "lookup",
        "gen_ai.tool.call.id": "c1",
        "gen_ai.tool.type": "function",
    }
    assert call.status == "UNSET"
    assert len({s.trace_id for s in recorded}) == 1


async def test_a_failing_tool_and_a_failing_model_set_error_status(
    spans: Recorded,
) -> None:
    model = ScriptedModel(
        [
            reply(tool_calls=[("c1", "broken", {"order": "1"})]),
            reply(error="overloaded"),
        ]
    )
    with pytest.raises(ModelError, match="overloaded"):
        await generate_text(
            model=model, prompt="go", tools=[broken], deps=make_deps(), max_steps=3
        )
    recorded = spans.spans()
    call = one(recorded, "execute_tool broken")
    assert (call.status, call.attributes["error.type"]) == ("ERROR", "tool_error")
    failed_chat = named(recorded, "chat scripted")[1]
    assert failed_chat.status == "ERROR"
    assert failed_chat.attributes["error.type"] == "ModelError"
    leg = one(recorded, "invoke_agent")
    assert (leg.status, leg.attributes["deuz.run.status"]) == ("ERROR", "failed")


async def test_a_resumed_leg_joins_the_trace_the_first_leg_started(
    spans: Recorded,
) -> None:
    store = InMemorySessionStore()
    with run_trace("", agent="ops") as first:
        suspended = await generate_text(
            model=ScriptedModel([reply(tool_calls=[("c1", "delete", {})])]),
            prompt="clean up",
            tools=[_delete()],
            session=DurableSession(store, "run-2"),
            deps=make_deps(),
        )
    assert suspended.pending_approvals
    with run_trace(first.traceparent, agent="ops") as second:
        await resume_from_checkpoint(
            store,
            "run-2",
            model=ScriptedModel([reply(text="Done.")]),
            tools=[_delete()],
            approval_responses=[{"approval_id": "c1", "approved": True}],
            deps=make_deps(),
            max_steps=5,
        )
    assert not second.started
    assert second.traceparent == first.traceparent
    recorded = spans.spans()
    legs = named(recorded, "invoke_agent ops")
    assert [leg.attributes["deuz.run.status"] for leg in legs] == [
        "suspended",
        "completed",
    ]
    assert legs[1].parent_id == legs[0].span_id
    assert legs[1].attributes["deuz.leg.resumed"] is True
    # The settled call runs in the resumed leg, before its first step.
    assert one(recorded, "execute_tool delete").parent_id == legs[1].span_id
    assert len({s.trace_id for s in recorded}) == 1


async def test_a_sub_agent_leg_nests_under_its_tool_call(spans: Recorded) -> None:
    researcher = agent_tool(
        name="researcher",
        description="Looks things up.",
        model=ScriptedModel([reply(text="found it")], model_id="small"),
    )
    await generate_text(
        model=ScriptedModel(
            [
                reply(tool_calls=[("c1", "researcher", {"prompt": "find"})]),
                reply(text="ok"),
            ]
        ),
        prompt="go",
        tools=[researcher],
        deps=make_deps(),
        max_steps=5,
    )
    recorded = spans.spans()
    call = one(recorded, "execute_tool researcher")
    assert one(recorded, "invoke_agent researcher").parent_id == call.span_id


def test_an_approval_span_spans_the_wait_and_names_the_decider(
    spans: Recorded,
) -> None:
    with run_trace("", agent="ops") as run:
        pass
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    record_approval(
        traceparent,
        tool_name="delete",
        tool_call_id="c1",
        approval_id="c1",
        status="denied",
        requested_at_ns=1_000_000_000,
        decided_at_ns=4_500_000_000,
        decider={"user.id": "7", "user.name": "ada"},
        reason="not today",
    )
    assert not run.started
    span = one(spans.spans(), "await_approval delete")
    assert span.trace_id == "0af7651916cd43dd8448eb211c80319c"
    assert span.parent_id == "b7ad6b7169203331"
    assert (span.start_ns, span.end_ns) == (1_000_000_000, 4_500_000_000)
    assert span.attributes["deuz.approval.latency_ms"] == 3500.0
    assert span.attributes["deuz.approval.approved"] is False
    assert span.attributes["deuz.approval.decider.user.name"] == "ada"


async def test_without_a_tracer_provider_a_run_records_nothing() -> None:
    with run_trace("", agent="quiet") as run:
        await generate_text(
            model=ScriptedModel([reply(text="hi")]),
            prompt="hi",
            tools=[lookup],
            session=DurableSession(InMemorySessionStore(), "run-3"),
            deps=make_deps(),
        )
    assert not run.started
    assert run.traceparent == ""


async def test_a_consumer_that_stops_reading_closes_the_leg_and_fails_nothing(
    spans: Recorded,
) -> None:
    closed: list[str] = []

    async def parts() -> AsyncIterator[StreamPart]:
        try:
            yield StepStartPart(0)
            yield StepStartPart(1)
        finally:
            closed.append("inner")

    traced = tracing.step(parts())
    assert isinstance(await anext(traced), StepStartPart)
    await traced.aclose()

    assert closed == ["inner"]  # at once, as closing the unwrapped stream would
    step = one(spans.spans(), "step")
    assert step.status == "UNSET"
    assert step.attributes == {"deuz.step.index": 0}
