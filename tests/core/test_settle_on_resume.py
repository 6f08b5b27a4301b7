"""Settle-on-resume: verdicts answer the trailing unanswered tool calls before the first
model call (SPEC §5.4, §5.5, R5.9–R5.13, R7.8, D10)."""

from __future__ import annotations

from typing import Any

import pytest

from deuz_django.core import (
    Message,
    TextPart,
    Tool,
    ToolResultPart,
    ToolUsePart,
    generate_text,
    stream_chat,
)
from deuz_django.core.durable import (
    DurableSession,
    create_in_memory_session_store,
    resume_from_checkpoint,
)
from deuz_django.core.parts import ToolStatePart
from deuz_django.core.testing import ScriptedModel, reply
from tests.core.support import Probe, collect, make_deps


def _history(
    *calls: tuple[str, str], tail: list[Message] | None = None
) -> list[Message]:
    assistant = Message(
        "assistant", tuple(ToolUsePart(cid, name, {"n": cid}) for cid, name in calls)
    )
    return [Message("user", "go"), assistant, *(tail or [])]


async def _settle(
    history: list[Message], tools: list[Tool], responses: Any, **options: Any
) -> Any:
    """One plain call that settles ``history`` and then answers "done"."""
    model = ScriptedModel([reply(text="done")])
    result = await generate_text(
        model=model,
        messages=history,
        tools=tools,
        approval_responses=responses,
        **options,
    )
    return result, model


def _settled(result: Any) -> list[tuple[str, Any, bool | None]]:
    tool_message = result.response_messages[0]
    assert tool_message.role == "tool"
    return [(p.tool_use_id, p.result, p.is_error) for p in tool_message.content]


# -- R5.9: when settle runs ---------------------------------------------------------------


async def test_unanswered_gated_call_is_denied_on_resume() -> None:
    # SPEC R5.9, R5.10.6: an empty verdict list still settles; no verdict → denied.
    probe = Probe()
    result, model = await _settle(
        _history(("c1", "delete")), [probe.tool("delete", needs_approval=True)], []
    )
    assert probe.calls == []
    assert _settled(result) == [
        ("c1", "Tool call denied. Reason: No approval response.", True)
    ]
    # R3.4: the settle message is in the history the first model call sees.
    assert [m.role for m in model.requests[0].messages] == ["user", "assistant", "tool"]


async def test_without_approval_responses_nothing_is_settled() -> None:
    # SPEC R5.10.1: absent verdicts → do nothing.
    probe = Probe()
    result, model = await _settle(
        _history(("c1", "delete")), [probe.tool("delete", needs_approval=True)], None
    )
    assert probe.calls == []
    assert [m.role for m in result.response_messages] == ["assistant"]
    assert [m.role for m in model.requests[0].messages] == ["user", "assistant"]


@pytest.mark.parametrize(
    "last",
    [Message("user", "new question"), Message("assistant", "plain text answer")],
)
async def test_settle_needs_a_trailing_assistant_turn_with_parts(last: Message) -> None:
    # SPEC R5.10.2: the first non-tool message from the end must be an assistant with
    # part content; a user message or a string content means nothing to settle.
    probe = Probe()
    history = [*_history(("c1", "t")), last]
    result, _ = await _settle(history, [probe.tool("t")], [])
    assert probe.calls == []
    assert [m.role for m in result.response_messages] == ["assistant"]


async def test_only_the_unanswered_calls_of_the_trailing_turn_settle() -> None:
    # SPEC R5.10.3, R5.12: calls answered by a later tool message are not touched.
    probe = Probe("ran")
    answered = Message("tool", (ToolResultPart("c1", "client said blue"),))
    history = _history(("c1", "pick_color"), ("c2", "t"), tail=[answered])
    result, _ = await _settle(history, [Tool(name="pick_color"), probe.tool("t")], [])
    assert _settled(result) == [("c2", "ran", None)]
    # R5.10.9: one NEW tool message, never merged into the existing one.
    assert [m.role for m in result.messages] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    assert result.messages[2] is answered


async def test_fully_answered_turn_settles_nothing() -> None:
    # SPEC R5.10.3
    answered = Message("tool", (ToolResultPart("c1", "done"),))
    result, _ = await _settle(
        _history(("c1", "t"), tail=[answered]), [Probe().tool("t")], []
    )
    assert [m.role for m in result.response_messages] == ["assistant"]


# -- R5.10.6: the verdict table -------------------------------------------------------------


async def test_approved_call_executes_and_denied_call_carries_the_reason() -> None:
    # SPEC R5.10.6, R5.10.8
    probe = Probe("deleted")
    result, _ = await _settle(
        _history(("c1", "delete"), ("c2", "delete")),
        [probe.tool("delete", needs_approval=True)],
        [
            {"approval_id": "c1", "approved": True},
            {"approval_id": "c2", "approved": False, "reason": "too risky"},
        ],
    )
    assert probe.calls == [{"n": "c1"}]
    assert _settled(result) == [
        ("c1", "deleted", None),
        ("c2", "Tool call denied. Reason: too risky", True),
    ]


async def test_a_denial_without_reason_uses_the_short_text() -> None:
    # SPEC R5.10.8
    result, _ = await _settle(
        _history(("c1", "delete")),
        [Probe().tool("delete", needs_approval=True)],
        [{"approval_id": "c1", "approved": False}],
    )
    assert _settled(result) == [("c1", "Tool call denied.", True)]


async def test_an_explicit_denial_applies_to_an_ungated_call_too() -> None:
    # SPEC R5.10.6: a false verdict denies ANY unanswered call.
    probe = Probe()
    result, _ = await _settle(
        _history(("c1", "read")),
        [probe.tool("read")],
        [{"approval_id": "c1", "approved": False, "reason": "no"}],
    )
    assert probe.calls == []
    assert _settled(result) == [("c1", "Tool call denied. Reason: no", True)]


async def test_ungated_deferred_server_tools_run_without_a_verdict() -> None:
    # SPEC R5.10.6: no verdict, not gated, not a client tool → allowed.
    probe = Probe("read it")
    result, _ = await _settle(_history(("c1", "read")), [probe.tool("read")], [])
    assert _settled(result) == [("c1", "read it", None)]


async def test_an_unanswered_client_tool_gets_the_documented_placeholder() -> None:
    # SPEC R5.10.6, R5.10.8
    result, _ = await _settle(
        _history(("c1", "pick_color")), [Tool(name="pick_color")], []
    )
    assert _settled(result) == [
        (
            "c1",
            "Tool call denied. Reason: No result provided for this client tool.",
            True,
        )
    ]


async def test_an_approved_client_tool_has_no_server_side_executor() -> None:
    # SPEC R3.14.3: an approved verdict cannot give a client tool a result.
    result, _ = await _settle(
        _history(("c1", "pick_color")),
        [Tool(name="pick_color")],
        [{"approval_id": "c1", "approved": True}],
    )
    assert _settled(result) == [("c1", "No server-side executor.", True)]


async def test_the_gating_predicate_runs_only_for_calls_without_a_verdict() -> None:
    # SPEC R5.10.5: gated is computed only over unanswered calls without a verdict, with
    # the current history.
    asked: list[str] = []

    def needs(args: Any, ctx: Any) -> bool:
        asked.append(ctx.tool_call_id)
        assert [m.role for m in ctx.messages] == ["user", "assistant"]
        return False

    probe = Probe()
    result, _ = await _settle(
        _history(("c1", "t"), ("c2", "t")),
        [probe.tool("t", needs_approval=needs)],
        [{"approval_id": "c1", "approved": True}],
    )
    assert asked == ["c2"]
    assert _settled(result) == [("c1", "ok", None), ("c2", "ok", None)]


async def test_verdicts_for_unknown_ids_are_ignored() -> None:
    # SPEC R5.10.4: replay-safe.
    probe = Probe()
    result, _ = await _settle(
        _history(("c1", "delete")),
        [probe.tool("delete", needs_approval=True)],
        [{"approval_id": "elsewhere", "approved": True}],
    )
    assert _settled(result) == [
        ("c1", "Tool call denied. Reason: No approval response.", True)
    ]


async def test_a_repeated_identical_verdict_keeps_the_last() -> None:
    # SPEC R5.10.4: the same approval id twice → the last one wins.
    result, _ = await _settle(
        _history(("c1", "delete")),
        [Probe("ran").tool("delete", needs_approval=True)],
        [
            {"approval_id": "c1", "approved": False, "reason": "first"},
            {"approval_id": "c1", "approved": False, "reason": "second"},
        ],
    )
    assert _settled(result) == [("c1", "Tool call denied. Reason: second", True)]


async def test_conflicting_duplicate_verdicts_deny() -> None:
    # D10: approve and deny for one approval id → denied (the safe side).
    probe = Probe()
    result, _ = await _settle(
        _history(("c1", "delete")),
        [probe.tool("delete", needs_approval=True)],
        [
            {"approval_id": "c1", "approved": False},
            {"approval_id": "c1", "approved": True},
        ],
    )
    assert probe.calls == []
    assert _settled(result) == [
        ("c1", "Tool call denied. Reason: Conflicting verdicts for one approval.", True)
    ]


# -- R5.10.7–R5.10.10, R5.11: streaming and bookkeeping --------------------------------------


async def test_streaming_settle_emits_executing_states_then_results_with_reasons() -> (
    None
):
    # SPEC R5.10.7, R5.11: deniedReason verbatim; explicit denial without reason → none.
    tools = [Probe().tool("t", needs_approval=True), Tool(name="pick_color")]
    stream = stream_chat(
        model=ScriptedModel([reply(text="done")]),
        messages=_history(("c1", "t"), ("c2", "t"), ("c3", "t"), ("c4", "pick_color")),
        tools=tools,
        approval_responses=[
            {"approval_id": "c1", "approved": True},
            {"approval_id": "c2", "approved": False},
        ],
    )
    parts = await collect(stream)
    states = [p.to_json() for p in parts if isinstance(p, ToolStatePart)]
    assert states == [
        {
            "type": "tool-state",
            "toolCallId": "c1",
            "toolName": "t",
            "state": "executing",
        },
        {
            "type": "tool-state",
            "toolCallId": "c1",
            "toolName": "t",
            "state": "complete",
        },
        {
            "type": "tool-state",
            "toolCallId": "c2",
            "toolName": "t",
            "state": "error",
            "denied": True,
        },
        {
            "type": "tool-state",
            "toolCallId": "c3",
            "toolName": "t",
            "state": "error",
            "denied": True,
            "deniedReason": "No approval response.",
        },
        {
            "type": "tool-state",
            "toolCallId": "c4",
            "toolName": "pick_color",
            "state": "error",
            "denied": True,
            "deniedReason": "No result provided for this client tool.",
        },
    ]


async def test_settle_is_not_a_step_and_saves_no_checkpoint_by_itself() -> None:
    # SPEC R5.10 (last paragraph): no step, no checkpoint, not in steps/toolResults;
    # the settle tool message is in response_messages (R3.9).
    store = create_in_memory_session_store()
    saves: list[str] = []
    real_save = store.save

    def save(checkpoint: Any) -> None:
        saves.append(checkpoint.status)
        real_save(checkpoint)

    store.save = save  # type: ignore[method-assign]
    result = await generate_text(
        model=ScriptedModel([reply(text="done")]),
        messages=_history(("c1", "read")),
        tools=[Probe().tool("read")],
        approval_responses=[],
        session=DurableSession(store, "run-1"),
        deps=make_deps(),
    )
    assert saves == ["completed"]
    assert len(result.steps) == 1
    assert result.steps[0].tool_results == ()
    assert result.tool_results is None
    assert [m.role for m in result.response_messages] == ["tool", "assistant"]


async def test_settle_failures_count_toward_the_runaway_guard() -> None:
    # SPEC R5.10.10, R3.17 with D6: settle counts as one failing round; two more failing
    # steps trip the guard (settle alone never stops the run).
    model = ScriptedModel(
        [
            reply(tool_calls=[("c2", "flaky", {})]),
            reply(tool_calls=[("c3", "flaky", {})]),
            reply(text="never reached"),
        ]
    )
    result = await generate_text(
        model=model,
        messages=_history(("c1", "flaky")),
        tools=[Probe(error="down").tool("flaky")],
        approval_responses=[],
        max_steps=10,
    )
    assert len(model.requests) == 2
    assert result.finish_reason == "tool_calls"


async def test_settle_alone_never_stops_the_run() -> None:
    # SPEC R3.17: the guard's verdict is ignored in settle.
    history = _history(("c1", "flaky"), ("c2", "flaky"), ("c3", "flaky"))
    result, model = await _settle(history, [Probe(error="down").tool("flaky")], [])
    assert len(model.requests) == 1
    assert result.text == "done"


# -- R7.8: resuming with another tool set ------------------------------------------------------


async def test_a_resume_without_the_tool_gets_the_unknown_tool_error() -> None:
    # SPEC R7.8, R3.14.2: with no tools at all, "No tools are available."
    store = create_in_memory_session_store()
    await generate_text(
        model=ScriptedModel([reply(tool_calls=[("c1", "delete", {})])]),
        prompt="x",
        tools=[Probe().tool("delete", needs_approval=True)],
        session=DurableSession(store, "run-1"),
        deps=make_deps(),
    )
    resumed = await resume_from_checkpoint(
        store,
        "run-1",
        model=ScriptedModel([reply(text="done")]),
        approval_responses=[{"approval_id": "c1", "approved": True}],
        deps=make_deps(),
    )
    [outcome] = resumed.response_messages[0].content
    assert isinstance(outcome, ToolResultPart)
    assert outcome.result == 'No such tool: "delete". No tools are available.'


async def test_a_tool_no_longer_gated_runs_without_a_verdict_on_resume() -> None:
    # SPEC R7.8
    store = create_in_memory_session_store()
    await generate_text(
        model=ScriptedModel([reply(tool_calls=[("c1", "delete", {})])]),
        prompt="x",
        tools=[Probe().tool("delete", needs_approval=True)],
        session=DurableSession(store, "run-1"),
        deps=make_deps(),
    )
    probe = Probe("deleted")
    await resume_from_checkpoint(
        store,
        "run-1",
        model=ScriptedModel([reply(text="done")]),
        tools=[probe.tool("delete")],
        deps=make_deps(),
    )
    assert probe.calls == [{}]


async def test_a_text_part_next_to_tool_uses_does_not_disturb_settle() -> None:
    # SPEC R5.10.3: only tool_use parts are calls.
    assistant = Message(
        "assistant", (TextPart("let me"), ToolUsePart("c1", "read", {}))
    )
    probe = Probe("ok")
    result, _ = await _settle(
        [Message("user", "go"), assistant], [probe.tool("read")], []
    )
    assert _settled(result) == [("c1", "ok", None)]
