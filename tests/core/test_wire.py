"""The UI wire mapping (SPEC R11.4–R11.6, D7) against the reference's recorded journal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deuz_django.core import Tool, Usage, stream_chat
from deuz_django.core.approvals import ToolApprovalRequest
from deuz_django.core.durable import (
    DurableSession,
    create_approval_signer,
    create_in_memory_session_store,
    resume_stream_from_checkpoint,
)
from deuz_django.core.parts import (
    CostPart,
    ErrorPart,
    FinishPart,
    ReasoningDeltaPart,
    StepFinishPart,
    StepStartPart,
    StreamPart,
    SubAgentPart,
    TextDeltaPart,
    ToolApprovalRequestPart,
    ToolCallDeltaPart,
    ToolCallPart,
    ToolOutputPart,
    ToolStatePart,
)
from deuz_django.core.testing import ScriptedModel, reply
from deuz_django.core.wire import redact, to_ui_part
from tests.core.support import FakeClock, make_deps

FIXTURES = Path(__file__).parents[1] / "fixtures" / "vectors"
WIRE = json.loads((FIXTURES / "wire.json").read_text("utf-8"))
TWO_LEGS = WIRE["durable_approval_two_legs"]
ZERO = Usage().to_json()


# -- the recorded two-leg journal ----------------------------------------------------------


def _journal(first: int, last: int) -> list[dict[str, Any]]:
    return [r["part"] for r in TWO_LEGS["journal"] if first <= r["seq"] <= last]


async def test_two_durable_legs_map_to_the_reference_journal_exactly() -> None:
    # SPEC R11.4, D7: journal seq 1–10 (leg 1 after its start part) and 12–18 (leg 2).
    store = create_in_memory_session_store()
    signer = create_approval_signer(secret="wire-secret", clock=FakeClock(1000))

    async def get_weather(args: Any, ctx: Any) -> Any:
        return {"temp": 22}

    tools = {
        "getWeather": Tool(name="getWeather", execute=get_weather, needs_approval=True)
    }
    model = ScriptedModel(
        [
            reply(
                tool_calls=[("toolu_1", "getWeather", {"city": "Paris"})], usage=(10, 5)
            ),
            reply(text="Sunny in Paris.", usage=(20, 6)),
        ]
    )
    leg1 = stream_chat(
        model=model,
        messages=[{"role": "user", "content": "weather?"}],
        tools=tools,
        session=DurableSession(store, "run-w"),
        approval_signer=signer,
        deps=make_deps(),
    )
    got = [to_ui_part(p) async for p in leg1.full_stream]
    assert got == _journal(1, 10)
    # The checkpoint after leg 1 is the reference's (createdAt aside).
    checkpoint = store.load("run-w")
    assert checkpoint is not None
    expected = {**TWO_LEGS["checkpoint_after_leg1"], "createdAt": checkpoint.created_at}
    assert checkpoint.to_json() == expected

    token = got[-2]["token"]  # type: ignore[index]
    leg2 = resume_stream_from_checkpoint(
        store,
        "run-w",
        model=model,
        tools=tools,
        approval_signer=signer,
        approval_responses=[
            {"approvalId": "toolu_1", "approved": True, "token": token}
        ],
        deps=make_deps(),
    )
    got = [to_ui_part(p) async for p in leg2.full_stream]
    assert got == _journal(12, 18)
    checkpoint = store.load("run-w")
    assert checkpoint is not None
    expected = {**TWO_LEGS["checkpoint_after_leg2"], "createdAt": checkpoint.created_at}
    assert checkpoint.to_json() == expected


# -- R11.4: part by part -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("part", "ui"),
    [
        (TextDeltaPart("hi"), {"type": "text-delta", "text": "hi"}),
        (
            ReasoningDeltaPart("r", "sig"),
            {"type": "reasoning-delta", "text": "r", "signature": "sig"},
        ),
        (
            ToolCallDeltaPart("c1", '{"a"', "t"),
            {
                "type": "tool-input-delta",
                "toolCallId": "c1",
                "toolName": "t",
                "delta": '{"a"',
            },
        ),
        (
            ToolCallDeltaPart("c1", "1}", provider_metadata={"x": 1}),
            {"type": "tool-input-delta", "toolCallId": "c1", "delta": "1}"},
        ),
        (
            ToolCallPart("c1", "t", {"a": 1}),
            {
                "type": "tool-call",
                "toolCallId": "c1",
                "toolName": "t",
                "input": {"a": 1},
            },
        ),
        (
            ToolOutputPart("c1", "t", {"ok": True}),
            {
                "type": "tool-result",
                "toolCallId": "c1",
                "toolName": "t",
                "output": {"ok": True},
            },
        ),
        (
            ToolOutputPart("c1", "t", "bad", True),
            {
                "type": "tool-result",
                "toolCallId": "c1",
                "toolName": "t",
                "output": "bad",
                "isError": True,
            },
        ),
        (StepStartPart(3), {"type": "step-start", "step": 3}),
        (
            StepFinishPart(3, "tool_calls", Usage()),
            {
                "type": "step-finish",
                "step": 3,
                "finishReason": "tool_calls",
                "usage": ZERO,
            },
        ),
        (
            ToolStatePart("c1", "executing", "t"),
            {
                "type": "tool-state",
                "toolCallId": "c1",
                "toolName": "t",
                "state": "executing",
            },
        ),
        (
            ToolStatePart("c1", "error", "t", denied=True, denied_reason="nope"),
            {
                "type": "tool-state",
                "toolCallId": "c1",
                "toolName": "t",
                "state": "error",
                "denied": True,
                "deniedReason": "nope",
            },
        ),
        (
            CostPart(0.5, 0.1, None, 2),
            {"type": "cost", "costUsd": 0.5, "deltaUsd": 0.1, "stepIndex": 2},
        ),
        (
            FinishPart("stop", Usage(), {"deuz": {"stoppedBy": "max_steps"}}),
            {"type": "finish", "finishReason": "stop", "usage": ZERO},
        ),
        (ErrorPart(RuntimeError("it broke")), {"type": "error", "message": "it broke"}),
    ],
    ids=lambda v: v.type if hasattr(v, "type") else "",
)
def test_each_canonical_part_maps_to_its_ui_part(
    part: StreamPart, ui: dict[str, Any]
) -> None:
    # SPEC R11.4: key order as listed, optional keys omitted when absent.
    mapped = to_ui_part(part)
    assert mapped == ui
    assert list(mapped or {}) == list(ui)


def test_the_approval_request_keeps_agent_path_and_token() -> None:
    # D7 (Q7): the UI must show which agent asks.
    request = ToolApprovalRequest(
        approval_id="k1",
        tool_call_id="k1",
        tool_name="run_shell",
        input={"cmd": "ls"},
        agent_path=("coder",),
        token="v1.x.y",
    )
    assert to_ui_part(ToolApprovalRequestPart(request)) == {
        "type": "tool-approval-request",
        "approvalId": "k1",
        "toolCallId": "k1",
        "toolName": "run_shell",
        "input": {"cmd": "ls"},
        "agentPath": ["coder"],
        "token": "v1.x.y",
    }


def test_encrypted_reasoning_keeps_its_flag() -> None:
    # D7 (Q7): encrypted stays on reasoning-delta.
    assert to_ui_part(ReasoningDeltaPart("blob", encrypted=True)) == {
        "type": "reasoning-delta",
        "text": "blob",
        "encrypted": True,
    }


def test_a_sub_agent_part_maps_its_inner_part() -> None:
    # SPEC R11.4
    part = SubAgentPart(("a", "b"), StepStartPart(0))
    assert to_ui_part(part) == {
        "type": "sub-agent",
        "agentPath": ["a", "b"],
        "part": {"type": "step-start", "step": 0},
    }


def test_an_error_message_and_a_denial_reason_are_redacted() -> None:
    # SPEC R11.4, R11.5
    error = ErrorPart(RuntimeError("auth failed for sk-ant-SECRETxyz1234567"))
    assert to_ui_part(error) == {"type": "error", "message": "auth failed for ****4567"}
    state = ToolStatePart(
        "c1", "error", denied=True, denied_reason="key sk-ant-abcd1234"
    )
    assert to_ui_part(state)["deniedReason"] == "key ****1234"  # type: ignore[index]


def test_an_error_without_a_message_maps_to_an_empty_message() -> None:
    # SPEC R11.4: message is redact(err.message) for Error objects.
    assert to_ui_part(ErrorPart(RuntimeError())) == {"type": "error", "message": ""}


# -- R11.5: redaction ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("sk-ant-SECRETxyz1234567", "****4567"),
        ("key sk-abcdefghijklmnop1234 end", "key ****1234 end"),
        ("sk-short", "sk-short"),
        ("AIzaSyA1234567890", "****7890"),
        ("AIza123", "AIza123"),
        ("Authorization: Bearer abc.def-ghi_jkl", "Authorization: ****_jkl"),
        ("bearer   tok", "**** tok"),
        ("sk-ant-", "sk-ant-"),
        ("nothing secret here", "nothing secret here"),
    ],
)
def test_redaction_masks_key_like_substrings(text: str, redacted: str) -> None:
    # SPEC R11.5: "****" + the last four characters, or "****" for 4 or fewer.
    assert redact(text) == redacted


def test_redaction_applies_the_patterns_in_order() -> None:
    # SPEC R11.5: sk-ant- first, so an Anthropic key is masked once as a whole.
    assert redact("sk-ant-api03-abcdefghijklmnopqrstuv") == "****stuv"


# -- R11.6: v1 clients ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "part",
    [ToolStatePart("c1", "executing", "t"), CostPart(0.1)],
    ids=["state", "cost"],
)
def test_v2_only_parts_are_dropped_for_a_v1_client_even_inside_sub_agent(
    part: StreamPart,
) -> None:
    # SPEC R11.6
    assert to_ui_part(part, "v1") is None
    assert to_ui_part(SubAgentPart(("a",), part), "v1") is None
    assert to_ui_part(part, "v2") is not None


def test_v1_keeps_every_other_part() -> None:
    # SPEC R11.6
    assert to_ui_part(TextDeltaPart("x"), "v1") == {"type": "text-delta", "text": "x"}
