"""Client-mode approvals and client tools: the break rule and pending approvals
(SPEC §5.3, R5.3–R5.8)."""

from __future__ import annotations

from deuz_django.core import Tool, ToolApprovalRequest, generate_text, stream_chat
from deuz_django.core.durable import DurableSession, create_in_memory_session_store
from deuz_django.core.parts import ToolApprovalRequestPart
from deuz_django.core.testing import ScriptedModel, reply
from tests.core.support import Probe, collect, make_deps, tokens, usage


def _gated(probe: Probe, name: str = "delete") -> Tool:
    return probe.tool(name, needs_approval=True)


def _client(name: str = "pick_color") -> Tool:
    return Tool(name=name, description="Runs in the browser.")


async def test_a_gated_call_in_client_mode_becomes_a_pending_approval() -> None:
    # SPEC R5.3, R5.6: keys approvalId == toolCallId, toolName, input.
    result = await generate_text(
        model=ScriptedModel([reply(tool_calls=[("c1", "delete", {"path": "/x"})])]),
        prompt="x",
        tools=[_gated(Probe())],
        max_steps=3,
    )
    assert result.pending_approvals == (
        ToolApprovalRequest(
            approval_id="c1",
            tool_call_id="c1",
            tool_name="delete",
            input={"path": "/x"},
        ),
    )
    assert result.pending_approvals[0].to_json() == {
        "approvalId": "c1",
        "toolCallId": "c1",
        "toolName": "delete",
        "input": {"path": "/x"},
    }


async def test_a_break_executes_nothing_in_the_batch() -> None:
    # SPEC R5.5: not the ungated server tools, not the client tools.
    gated, ungated = Probe(), Probe()
    model = ScriptedModel(
        [
            reply(
                tool_calls=[
                    ("c1", "read", {}),
                    ("c2", "delete", {}),
                    ("c3", "pick_color", {}),
                ],
                usage=(10, 5),
            )
        ]
    )
    result = await generate_text(
        model=model,
        prompt="x",
        tools=[ungated.tool("read"), _gated(gated), _client()],
        max_steps=3,
    )
    assert gated.calls == []
    assert ungated.calls == []
    assert len(model.requests) == 1
    # No tool message; history ends with the assistant turn.
    assert [m.role for m in result.messages] == ["user", "assistant"]
    [step] = result.steps
    assert step.tool_results == ()
    assert [c.tool_call_id for c in step.tool_calls] == ["c1", "c2", "c3"]
    # R5.6: only the gated call is pending.
    assert [r.tool_call_id for r in result.pending_approvals or ()] == ["c2"]
    assert result.finish_reason == "tool_calls"
    assert result.usage == usage(10, 5)


async def test_pending_approvals_list_only_gated_calls_in_call_order() -> None:
    # SPEC R5.6
    result = await generate_text(
        model=ScriptedModel(
            [
                reply(
                    tool_calls=[
                        ("c1", "b", {}),
                        ("c2", "read", {}),
                        ("c3", "a", {}),
                    ]
                )
            ]
        ),
        prompt="x",
        tools=[_gated(Probe(), "a"), _gated(Probe(), "b"), Probe().tool("read")],
    )
    assert [r.tool_call_id for r in result.pending_approvals or ()] == ["c1", "c3"]
    assert all(r.agent_path is None for r in result.pending_approvals or ())


async def test_a_client_tool_alone_breaks_without_pending_approvals() -> None:
    # SPEC R5.4–R5.6: no pendingApprovals key, and none in the checkpoint either.
    store = create_in_memory_session_store()
    result = await generate_text(
        model=ScriptedModel([reply(tool_calls=[("c1", "pick_color", {})])]),
        prompt="x",
        tools=[_client()],
        max_steps=3,
        session=DurableSession(store, "run-1"),
        deps=make_deps(),
    )
    assert result.pending_approvals is None
    assert [m.role for m in result.messages] == ["user", "assistant"]
    checkpoint = store.load("run-1")
    assert checkpoint is not None
    assert checkpoint.status == "suspended"
    assert "pendingApprovals" not in checkpoint.to_json()


async def test_a_hallucinated_tool_is_not_a_client_tool_and_self_heals() -> None:
    # SPEC R5.4: an unknown name gets the unknown-tool error and the loop continues.
    model = ScriptedModel(
        [reply(tool_calls=[("c1", "ghost", {})]), reply(text="sorry")]
    )
    result = await generate_text(
        model=model, prompt="x", tools=[_client()], max_steps=3
    )
    assert result.pending_approvals is None
    assert result.text == "sorry"
    [outcome] = result.steps[0].tool_results
    assert outcome.result == 'No such tool: "ghost". Available tools: pick_color.'


async def test_a_gated_client_tool_is_pending_too() -> None:
    # SPEC R5.6: client tools appear in pendingApprovals only when also gated.
    result = await generate_text(
        model=ScriptedModel([reply(tool_calls=[("c1", "pick_color", {})])]),
        prompt="x",
        tools=[Tool(name="pick_color", needs_approval=True)],
    )
    assert [r.tool_call_id for r in result.pending_approvals or ()] == ["c1"]


async def test_the_streaming_break_sequence() -> None:
    # SPEC R5.8: awaiting-approval per gated call, then one request each, then finish.
    stream = stream_chat(
        model=ScriptedModel(
            [reply(tool_calls=[("c1", "a", {}), ("c2", "b", {})], usage=(3, 4))]
        ),
        prompt="x",
        tools=[_gated(Probe(), "a"), _gated(Probe(), "b")],
    )
    parts = await collect(stream)
    assert tokens(parts)[-6:] == [
        "tool-state:input-complete",
        "tool-state:awaiting-approval",
        "tool-state:awaiting-approval",
        "tool-approval-request",
        "tool-approval-request",
        "finish",
    ]
    requests = [p for p in parts if isinstance(p, ToolApprovalRequestPart)]
    assert [p.to_json() for p in requests] == [
        {
            "type": "tool-approval-request",
            "approvalId": "c1",
            "toolCallId": "c1",
            "toolName": "a",
            "input": {},
        },
        {
            "type": "tool-approval-request",
            "approvalId": "c2",
            "toolCallId": "c2",
            "toolName": "b",
            "input": {},
        },
    ]
    # usage resolves normally.
    assert await stream.usage == usage(3, 4)
    assert await stream.finish_reason == "tool_calls"


async def test_a_client_tool_break_emits_no_approval_parts() -> None:
    # SPEC R4.2 break: only GATED calls get awaiting-approval and requests.
    parts = await collect(
        stream_chat(
            model=ScriptedModel([reply(tool_calls=[("c1", "pick_color", {})])]),
            prompt="x",
            tools=[_client()],
        )
    )
    assert tokens(parts)[-2:] == ["tool-state:input-complete", "finish"]
