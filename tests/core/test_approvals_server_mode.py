"""Which calls are gated, and server-mode approval (SPEC §5.1, §5.2)."""

from __future__ import annotations

from typing import Any

import pytest

from deuz_django.core import AbortController, ToolCall, generate_text
from deuz_django.core.testing import ScriptedModel, reply
from tests.core.support import Probe


def _model(*calls: tuple[str, str, Any]) -> ScriptedModel:
    return ScriptedModel([reply(tool_calls=list(calls)), reply(text="done")])


# -- R5.1: gating -------------------------------------------------------------------------


@pytest.mark.parametrize(("needs_approval", "gated"), [(False, False), (True, True)])
async def test_a_bool_needs_approval_gates_or_not(
    needs_approval: bool, gated: bool
) -> None:
    # SPEC R5.1
    result = await generate_text(
        model=_model(("c1", "t", {})),
        prompt="x",
        tools=[Probe().tool("t", needs_approval=needs_approval)],
        max_steps=2,
    )
    assert (result.pending_approvals is not None) is gated


async def test_a_predicate_receives_the_args_and_a_narrow_context() -> None:
    # SPEC R5.1, R1.13: (parsed args, {toolCallId, messages, signal}).
    seen: list[Any] = []
    controller = AbortController()

    def needs(args: Any, ctx: Any) -> bool:
        seen.append(
            (args, ctx.tool_call_id, [m.role for m in ctx.messages], ctx.signal)
        )
        return args["amount"] > 100

    result = await generate_text(
        model=_model(("c1", "pay", {"amount": 5}), ("c2", "pay", {"amount": 500})),
        prompt="x",
        tools=[Probe().tool("pay", needs_approval=needs)],
        max_steps=2,
        signal=controller.signal,
    )
    assert seen == [
        ({"amount": 5}, "c1", ["user", "assistant"], controller.signal),
        ({"amount": 500}, "c2", ["user", "assistant"], controller.signal),
    ]
    assert [r.tool_call_id for r in result.pending_approvals or ()] == ["c2"]


async def test_an_async_predicate_is_awaited() -> None:
    # SPEC R5.1
    async def needs(args: Any, ctx: Any) -> bool:
        return True

    result = await generate_text(
        model=_model(("c1", "t", {})),
        prompt="x",
        tools=[Probe().tool("t", needs_approval=needs)],
    )
    assert result.pending_approvals is not None


async def test_a_raising_predicate_gates_the_call() -> None:
    # SPEC R5.1: the safe side.
    def needs(args: Any, ctx: Any) -> bool:
        raise RuntimeError("cannot tell")

    result = await generate_text(
        model=_model(("c1", "t", {})),
        prompt="x",
        tools=[Probe().tool("t", needs_approval=needs)],
    )
    assert [r.tool_call_id for r in result.pending_approvals or ()] == ["c1"]


# -- R5.2: server mode ---------------------------------------------------------------------


async def test_the_server_approver_gets_the_call_and_the_history() -> None:
    # SPEC R5.2
    seen: list[Any] = []

    def approve(call: ToolCall, messages: Any) -> bool:
        seen.append((call, [m.role for m in messages]))
        return True

    probe = Probe("paid")
    result = await generate_text(
        model=_model(("c1", "pay", {"amount": 5})),
        prompt="x",
        tools=[probe.tool("pay", needs_approval=True)],
        max_steps=2,
        approve_tool_call=approve,
    )
    assert seen == [(ToolCall("c1", "pay", {"amount": 5}), ["user", "assistant"])]
    assert probe.calls == [{"amount": 5}]
    assert result.pending_approvals is None
    assert result.text == "done"


@pytest.mark.parametrize("verdict", ["false", "raises"])
async def test_a_server_denial_runs_as_a_denied_result_in_the_same_step(
    verdict: str,
) -> None:
    # SPEC R5.2: False or an exception denies, with no reason; the loop continues.
    async def approve(call: ToolCall, messages: Any) -> bool:
        if verdict == "raises":
            raise RuntimeError("approver down")
        return False

    gated = Probe("deleted")
    ungated = Probe("read")
    result = await generate_text(
        model=_model(("c1", "delete", {}), ("c2", "read", {})),
        prompt="x",
        tools=[gated.tool("delete", needs_approval=True), ungated.tool("read")],
        max_steps=2,
        approve_tool_call=approve,
    )
    assert gated.calls == []
    assert ungated.calls == [{}]
    denied, read = result.steps[0].tool_results
    assert (denied.result, denied.is_error) == ("Tool call denied.", True)
    assert (read.result, read.is_error) == ("read", None)
    assert len(result.steps) == 2
    assert result.text == "done"


async def test_only_gated_calls_reach_the_server_approver() -> None:
    # SPEC R5.2: ungated calls are not asked about.
    asked: list[str] = []

    def approve(call: ToolCall, messages: Any) -> bool:
        asked.append(call.tool_call_id)
        return True

    await generate_text(
        model=_model(("c1", "delete", {}), ("c2", "read", {})),
        prompt="x",
        tools=[Probe().tool("delete", needs_approval=True), Probe().tool("read")],
        max_steps=2,
        approve_tool_call=approve,
    )
    assert asked == ["c1"]


async def test_server_denials_never_trip_the_runaway_guard() -> None:
    # SPEC R5.2, R3.17: three denied steps in a row keep the loop going.
    model = ScriptedModel(
        [reply(tool_calls=[(f"c{i}", "delete", {})]) for i in range(4)]
        + [reply(text="gave up")]
    )
    result = await generate_text(
        model=model,
        prompt="x",
        tools=[Probe().tool("delete", needs_approval=True)],
        max_steps=10,
        approve_tool_call=lambda call, messages: False,
    )
    assert len(model.requests) == 5
    assert result.text == "gave up"
