"""Messages, parts and how one model turn becomes an assistant message (SPEC §1.1, R3.3)."""

from __future__ import annotations

from typing import Any

import pytest

from deuz_django.core import (
    ImagePart,
    InvalidInputError,
    Message,
    ReasoningPart,
    TextPart,
    Tool,
    ToolResultPart,
    ToolUsePart,
    generate_text,
)
from deuz_django.core.durable import (
    DurableSession,
    create_in_memory_session_store,
    resume_from_checkpoint,
)
from deuz_django.core.parts import (
    FinishPart,
    ReasoningDeltaPart,
    TextDeltaPart,
    ToolCallDeltaPart,
)
from deuz_django.core.testing import ScriptedModel, reply
from tests.core.support import RawModel, make_deps, usage


def _noop_tool(name: str = "t") -> Tool:
    async def execute(args: Any, ctx: Any) -> Any:
        return args

    return Tool(name=name, execute=execute)


# -- R1.1, R1.2: the five part kinds and their JSON ------------------------------------


def test_text_part_json() -> None:
    # SPEC R1.2
    assert TextPart("hi").to_json() == {"type": "text", "text": "hi"}


def test_image_part_keeps_bytes_and_omits_absent_media_type() -> None:
    # SPEC R1.2: raw bytes stay bytes; an absent mediaType is an absent key.
    assert ImagePart(b"\x00\x01").to_json() == {"type": "image", "image": b"\x00\x01"}
    assert ImagePart("https://x/y.png", "image/png").to_json() == {
        "type": "image",
        "image": "https://x/y.png",
        "mediaType": "image/png",
    }


def test_tool_use_part_keeps_provider_metadata() -> None:
    # SPEC R1.2: providerMetadata is opaque round-trip data.
    part = ToolUsePart("c1", "t", {"a": 1}, {"google": {"thoughtSignature": "sig"}})
    assert part.to_json() == {
        "type": "tool_use",
        "id": "c1",
        "name": "t",
        "input": {"a": 1},
        "providerMetadata": {"google": {"thoughtSignature": "sig"}},
    }


def test_tool_result_part_uses_camel_case_tool_use_id() -> None:
    # SPEC R1.2: "toolUseId", not "tool_use_id"; isError absent unless set.
    assert ToolResultPart("c1", 42).to_json() == {
        "type": "tool_result",
        "toolUseId": "c1",
        "result": 42,
    }
    assert ToolResultPart("c1", "x", True).to_json()["isError"] is True


def test_reasoning_part_json_keeps_every_flag() -> None:
    # SPEC R1.2
    part = ReasoningPart("think", "sig", encrypted=True, redacted=False)
    assert part.to_json() == {
        "type": "reasoning",
        "text": "think",
        "signature": "sig",
        "encrypted": True,
        "redacted": False,
    }


def test_message_from_dict_round_trips_every_part_kind() -> None:
    # SPEC R1.1, R1.2
    data = {
        "role": "assistant",
        "content": [
            {"type": "reasoning", "text": "r", "signature": "s"},
            {"type": "text", "text": "t"},
            {"type": "image", "image": b"\x01", "mediaType": "image/png"},
            {"type": "tool_use", "id": "c1", "name": "n", "input": {}},
            {"type": "tool_result", "toolUseId": "c1", "result": 1, "isError": False},
        ],
        "providerMetadata": {"openai": {"phase": "final"}},
    }
    assert Message.from_json(data).to_json() == data


def test_plain_string_content_stays_a_string() -> None:
    # SPEC R1.1
    assert Message.from_json({"role": "user", "content": "hi"}).content == "hi"


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"role": "robot", "content": "x"}, "messages[0].role"),
        ({"role": "user"}, "messages[0].content"),
        (
            {"role": "tool", "content": [{"type": "tool_result", "toolUseId": 3}]},
            "messages[0].content[0].toolUseId",
        ),
        (
            {"role": "user", "content": [{"type": "video"}]},
            "messages[0].content[0].type",
        ),
    ],
)
async def test_invalid_message_dict_is_rejected_naming_the_field(
    data: dict[str, Any], field: str
) -> None:
    # DESIGN §3: plain dicts are validated with an error naming the bad field.
    with pytest.raises(InvalidInputError, match=rf"^{field.replace('[', r'\[')}"):
        await generate_text(model=ScriptedModel([]), messages=[data])


async def test_reasoning_in_history_reaches_the_model_unchanged() -> None:
    # SPEC R1.2: reasoning parts are carried through the loop unchanged.
    reasoning = ReasoningPart("opaque", "sig", encrypted=True)
    history = [
        Message("user", "q"),
        Message("assistant", (reasoning, TextPart("a"))),
        Message("user", "again"),
    ]
    model = ScriptedModel([reply(text="ok")])
    await generate_text(model=model, messages=history, tools=[_noop_tool()])
    assert model.requests[0].messages[1].content == (reasoning, TextPart("a"))


# -- R1.3: assembling the assistant message -------------------------------------------


async def test_assistant_content_order_is_encrypted_reasoning_text_then_tool_uses() -> (
    None
):
    # SPEC R1.3: encrypted payloads, then joined plain reasoning (last signature), then
    # text, then one tool_use per call in first-delta order.
    model = RawModel(
        [
            [
                TextDeltaPart("Hel"),
                ReasoningDeltaPart("think ", "s1"),
                ReasoningDeltaPart("blob-1", "e1", encrypted=True),
                ToolCallDeltaPart("c2", "", "second"),
                ReasoningDeltaPart("more", "s2"),
                ToolCallDeltaPart("c1", '{"x":1}', "first"),
                ReasoningDeltaPart("blob-2", encrypted=True),
                TextDeltaPart("lo"),
                FinishPart("tool_calls", usage(1, 1)),
            ],
            [FinishPart("stop", usage(1, 1))],
        ]
    )
    result = await generate_text(
        model=model,
        prompt="go",
        tools=[_noop_tool("first"), _noop_tool("second")],
        max_steps=2,
    )
    assistant = result.response_messages[0]
    assert assistant.content == (
        ReasoningPart("blob-1", "e1", encrypted=True),
        ReasoningPart("blob-2", None, encrypted=True),
        ReasoningPart("think more", "s2"),
        TextPart("Hello"),
        ToolUsePart("c2", "second", {}),
        ToolUsePart("c1", "first", {"x": 1}),
    )


async def test_a_turn_that_produced_nothing_is_an_empty_list_not_a_string() -> None:
    # SPEC R1.3: content is [] (a list), never "".
    model = RawModel([[FinishPart("stop", usage(1, 0))]])
    result = await generate_text(model=model, prompt="go", tools=[_noop_tool()])
    assert result.response_messages[0].content == ()
    assert result.response_messages[0].to_json() == {"role": "assistant", "content": []}


# -- R1.4: tool-call arguments ---------------------------------------------------------


@pytest.mark.parametrize(
    ("args_text", "parsed"),
    [
        ("", {}),
        ('{"city":"Oslo"}', {"city": "Oslo"}),
        ("[1,2]", [1, 2]),
        ("{not json", "{not json"),
    ],
)
async def test_tool_arguments_are_parsed_once_at_the_end_of_the_turn(
    args_text: str, parsed: Any
) -> None:
    # SPEC R1.4: empty → {}, valid JSON → its value, invalid → the raw string (no error).
    half = len(args_text) // 2
    model = RawModel(
        [
            [
                ToolCallDeltaPart("c1", args_text[:half], "t"),
                ToolCallDeltaPart("c1", args_text[half:]),
                FinishPart("tool_calls", usage(1, 1)),
            ],
            [FinishPart("stop", usage(1, 1))],
        ]
    )
    result = await generate_text(
        model=model, prompt="go", tools=[_noop_tool()], max_steps=2
    )
    assert result.steps[0].tool_calls[0].args == parsed


async def test_a_missing_tool_name_becomes_empty_and_metadata_is_the_last_seen() -> (
    None
):
    # SPEC R1.4: missing name → ""; a call's providerMetadata is the last on its deltas.
    model = RawModel(
        [
            [
                ToolCallDeltaPart("c1", "{", None, {"p": 1}),
                ToolCallDeltaPart("c1", "}", None, {"p": 2}),
                FinishPart("tool_calls", usage(1, 1)),
            ],
            [FinishPart("stop", usage(1, 1))],
        ]
    )
    result = await generate_text(
        model=model, prompt="go", tools=[_noop_tool()], max_steps=2
    )
    assert result.response_messages[0].content == (ToolUsePart("c1", "", {}, {"p": 2}),)


# -- R1.5: the OpenAI Responses phase --------------------------------------------------


async def test_openai_phase_on_finish_is_kept_on_the_assistant_message() -> None:
    # SPEC R1.5
    model = RawModel(
        [
            [
                TextDeltaPart("done"),
                FinishPart("stop", usage(1, 1), {"openai": {"phase": "final", "x": 1}}),
            ]
        ]
    )
    result = await generate_text(model=model, prompt="go", tools=[_noop_tool()])
    assert result.response_messages[0].provider_metadata == {
        "openai": {"phase": "final"}
    }


async def test_no_phase_means_no_provider_metadata() -> None:
    # SPEC R1.5
    model = RawModel([[TextDeltaPart("done"), FinishPart("stop", usage(1, 1))]])
    result = await generate_text(model=model, prompt="go", tools=[_noop_tool()])
    assert result.response_messages[0].provider_metadata is None


# -- R3.3: history is immutable ------------------------------------------------------


async def test_the_callers_message_list_is_never_mutated() -> None:
    # SPEC R3.3
    history: list[Any] = [{"role": "user", "content": "go"}]
    model = ScriptedModel([reply(tool_calls=[("c1", "t", {})]), reply(text="done")])
    await generate_text(
        model=model, messages=history, tools=[_noop_tool()], max_steps=3
    )
    assert history == [{"role": "user", "content": "go"}]


async def test_each_model_request_sees_a_new_history_tuple() -> None:
    # SPEC R3.3: every change builds a new list; earlier ones stay as they were.
    model = ScriptedModel([reply(tool_calls=[("c1", "t", {})]), reply(text="done")])
    await generate_text(model=model, prompt="go", tools=[_noop_tool()], max_steps=3)
    first, second = (r.messages for r in model.requests)
    assert isinstance(first, tuple)
    assert len(first) == 1
    assert len(second) == 3
    assert second[:1] == first


async def test_a_stored_checkpoint_is_not_changed_by_a_later_leg() -> None:
    # SPEC R3.3, DESIGN §3: a checkpoint's messages are a true snapshot.
    store = create_in_memory_session_store()
    gated = Tool(name="t", execute=_noop_tool().execute, needs_approval=True)
    model = ScriptedModel([reply(tool_calls=[("c1", "t", {})]), reply(text="done")])
    await generate_text(
        model=model,
        prompt="go",
        tools=[gated],
        session=DurableSession(store, "run"),
        deps=make_deps(),
    )
    suspended = store.load("run")
    assert suspended is not None
    before = [m.to_json() for m in suspended.messages]
    await resume_from_checkpoint(
        store,
        "run",
        model=model,
        tools=[gated],
        approval_responses=[{"approval_id": "c1", "approved": True}],
        deps=make_deps(),
    )
    assert [m.to_json() for m in suspended.messages] == before
    assert store.load("run") is not suspended
