"""AnthropicModel on the real ``anthropic`` SDK against recorded Messages streams."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest

from deuz_django.core import (
    ForcedTool,
    InvalidInputError,
    MalformedEventError,
    Message,
    ModelHTTPError,
    RateLimitError,
    ReasoningPart,
    TextPart,
    ToolDefinition,
    ToolUsePart,
    Usage,
    generate_text,
    tool,
)
from deuz_django.core.messages import ImagePart, ToolResultPart
from deuz_django.core.parts import (
    FinishPart,
    ReasoningDeltaPart,
    TextDeltaPart,
    ToolCallDeltaPart,
)
from deuz_django.core.providers import AnthropicModel

from .contract import ProviderContract
from .helpers import ask, collect, get_weather
from .sse_server import SSEServer, anthropic_events, json_error, sse

JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
MakeAnthropic = Callable[..., AnthropicModel]


@tool
def fail_tool() -> str:
    """Always fails."""
    raise RuntimeError("disk full")


def stopped(reason: str) -> list[bytes]:
    """A minimal stream ending with ``stop_reason``."""
    return anthropic_events(
        {
            "type": "message_start",
            "message": {"usage": {"input_tokens": 5, "output_tokens": 1}},
        },
        {
            "type": "message_delta",
            "delta": {"stop_reason": reason},
            "usage": {"output_tokens": 2},
        },
        {"type": "message_stop"},
    )


class TestContract(ProviderContract):
    provider = "anthropic"
    text_fixture = "anthropic_text"
    error_event_fixture = "anthropic_error_event"
    malformed_fixture = "anthropic_malformed"
    error_event_status = 529  # overloaded_error

    @pytest.fixture
    def make_model(self, make_anthropic: MakeAnthropic) -> MakeAnthropic:
        return make_anthropic

    def error_body(self, kind: str, message: str) -> dict[str, Any]:
        types = {
            "rate_limit": "rate_limit_error",
            "server": "api_error",
            "invalid": "invalid_request_error",
        }
        return {
            "type": "error",
            "error": {"type": types[kind], "message": message},
            "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
        }


async def test_text_streams_as_deltas_with_cache_usage_split(
    server: SSEServer, make_anthropic: MakeAnthropic
) -> None:
    server.push(sse("anthropic_text"))
    events = await collect(
        make_anthropic(), ask(Message("system", "Be brief."), Message("user", "hi"))
    )
    assert events == [
        TextDeltaPart("Hello"),
        TextDeltaPart(" from"),
        TextDeltaPart(" Oslo"),
        TextDeltaPart("!"),
        FinishPart(
            "stop",
            Usage(
                input_tokens=25,
                output_tokens=12,
                cached_read_tokens=1200,
                cache_write_tokens=40,
                cache_write_1h_tokens=30,
                total_tokens=25 + 1200 + 70 + 12,
            ),
        ),
    ]
    assert server.requests[0].path == "/v1/messages"
    assert server.bodies == [
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 4096,
            "system": "Be brief.",
            "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
            "stream": True,
        }
    ]


async def test_thinking_streams_with_its_signature_and_goes_back_first(
    server: SSEServer, make_anthropic: MakeAnthropic
) -> None:
    server.push(sse("anthropic_thinking_tool"), sse("anthropic_done"))
    model = make_anthropic(
        max_tokens=8000, thinking={"type": "enabled", "budget_tokens": 2048}
    )
    result = await generate_text(
        model=model, prompt="Weather in Oslo?", tools=[get_weather], max_steps=3
    )
    first = result.steps[0]
    assert (
        first.reasoning_text
        == "The user wants the weather in Oslo. I should call get_weather."
    )
    assert first.tool_calls[0].args == {"city": "Oslo", "units": "celsius"}
    assert first.usage.reasoning_tokens == 61
    assert first.finish_reason == "tool_calls"
    signature = result.messages[1].parts[0]
    assert isinstance(signature, ReasoningPart)
    assert signature.signature.startswith("EqQB")
    second = server.bodies[1]
    assert second["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert second["max_tokens"] == 8000
    assert second["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {
                    "type": "thinking",
                    "thinking": first.reasoning_text,
                    "signature": signature.signature,
                },
                {"type": "text", "text": "Let me check the weather."},
                {
                    "type": "tool_use",
                    "id": "toolu_01A09q90qw90lq917835lq9",
                    "name": "get_weather",
                    "input": {"city": "Oslo", "units": "celsius"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01A09q90qw90lq917835lq9",
                    "content": '{"city":"Oslo","temp":3,"units":"celsius"}',
                }
            ],
        },
    ]


async def test_parallel_tool_uses_are_answered_in_one_user_turn_with_is_error(
    server: SSEServer, make_anthropic: MakeAnthropic
) -> None:
    server.push(sse("anthropic_parallel_tools"), sse("anthropic_done"))
    result = await generate_text(
        model=make_anthropic(),
        prompt="Go.",
        tools=[get_weather, fail_tool],
        max_steps=3,
    )
    assert [c.tool_name for c in result.steps[0].tool_calls] == [
        "get_weather",
        "fail_tool",
    ]
    last = server.bodies[1]["messages"][-1]
    assert last["role"] == "user"
    assert [block["tool_use_id"] for block in last["content"]] == [
        "toolu_01Weather7Hq2Lm4Np6Rs8Tu0V",
        "toolu_01Broken3Jk5Mn7Pq9Rs1Tu3V",
    ]
    assert "is_error" not in last["content"][0]
    assert last["content"][1]["is_error"] is True
    assert "disk full" in last["content"][1]["content"]


async def test_redacted_thinking_round_trips_as_redacted_thinking(
    server: SSEServer, make_anthropic: MakeAnthropic
) -> None:
    server.push(sse("anthropic_redacted"), sse("anthropic_done"))
    model = make_anthropic("claude-3-7-sonnet")
    first = await generate_text(model=model, prompt="Help?")
    data = first.messages[1].parts[0]
    assert isinstance(data, ReasoningPart)
    assert data.encrypted
    history = [*first.messages, Message("user", "Thanks!")]
    await generate_text(model=model, messages=history)
    assert server.bodies[1]["messages"][1]["content"] == [
        {"type": "redacted_thinking", "data": data.text},
        {"type": "text", "text": "I can help with that."},
    ]


async def test_images_tool_history_and_unsigned_reasoning_are_mapped(
    server: SSEServer, make_anthropic: MakeAnthropic
) -> None:
    server.push(sse("anthropic_text"))
    history = (
        Message(
            "user",
            (
                TextPart("What is this?"),
                ImagePart(JPEG),
                ImagePart("https://example.com/cat.png"),
            ),
        ),
        Message(
            "assistant",
            (
                ReasoningPart("unsigned, from another provider"),
                ToolUsePart("t1", "look", "raw"),
            ),
        ),
        Message("tool", (ToolResultPart("t1", {"seen": "a cat"}),)),
        Message("user", "And now?"),
    )
    await collect(make_anthropic(), ask(*history))
    assert server.bodies[0]["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {
                    "type": "image",
                    "source": {
                        "type": "base64",
                        "media_type": "image/jpeg",
                        "data": base64.b64encode(JPEG).decode(),
                    },
                },
                {
                    "type": "image",
                    "source": {"type": "url", "url": "https://example.com/cat.png"},
                },
            ],
        },
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "look", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": '{"seen":"a cat"}',
                },
                {"type": "text", "text": "And now?"},
            ],
        },
    ]


@pytest.mark.parametrize(
    ("choice", "parallel", "thinking", "sent"),
    [
        (None, True, None, None),
        (None, False, None, {"type": "auto", "disable_parallel_tool_use": True}),
        ("required", True, None, {"type": "any"}),
        ("none", False, None, {"type": "none"}),
        (ForcedTool("look"), True, None, {"type": "tool", "name": "look"}),
        (
            ForcedTool("look"),
            True,
            {"type": "enabled", "budget_tokens": 1024},
            {"type": "auto"},
        ),
    ],
)
async def test_tool_choice_is_mapped_and_never_forced_while_thinking(
    server: SSEServer,
    make_anthropic: MakeAnthropic,
    choice: Any,
    parallel: bool,
    thinking: Any,
    sent: Any,
) -> None:
    server.push(sse("anthropic_text"))
    definition = ToolDefinition("look", "Look.", {"type": "object"})
    model = make_anthropic(thinking=thinking, extra_body={"temperature": 1.0})
    await collect(
        model,
        ask(tools=(definition,), tool_choice=choice, parallel_tool_calls=parallel),
    )
    body = server.bodies[0]
    assert body.get("tool_choice") == sent
    assert body["tools"] == [
        {"name": "look", "description": "Look.", "input_schema": {"type": "object"}}
    ]
    assert body["temperature"] == 1.0


@pytest.mark.parametrize(
    ("reason", "mapped"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("pause_turn", "stop"),
        ("max_tokens", "length"),
        ("tool_use", "tool_calls"),
        ("refusal", "content_filter"),
    ],
)
async def test_stop_reasons_are_mapped(
    server: SSEServer, make_anthropic: MakeAnthropic, reason: str, mapped: str
) -> None:
    server.push(sse(stopped(reason)))
    events = await collect(make_anthropic(), ask())
    assert events == [
        FinishPart(mapped, Usage(input_tokens=5, output_tokens=2, total_tokens=7))  # type: ignore[arg-type]
    ]


async def test_server_tool_blocks_are_not_local_tool_calls(
    server: SSEServer, make_anthropic: MakeAnthropic
) -> None:
    events = anthropic_events(
        {
            "type": "message_start",
            "message": {"usage": {"input_tokens": 5, "output_tokens": 1}},
        },
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {
                "type": "server_tool_use",
                "id": "srvtoolu_1",
                "name": "web_search",
                "input": {},
            },
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"query":"x"}'},
        },
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "look",
                "input": {},
            },
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": "{}"},
        },
        {"type": "future_event", "anything": True},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {
                "output_tokens": 9,
                "server_tool_use": {"web_search_requests": 1, "web_fetch_requests": 0},
            },
        },
        {"type": "message_stop"},
    )
    server.push(sse(events))
    parts = await collect(make_anthropic(), ask())
    assert parts[:2] == [
        ToolCallDeltaPart("toolu_1", "", "look"),
        ToolCallDeltaPart("toolu_1", "{}"),
    ]
    assert parts[2].usage.server_tool_uses == 1


async def test_thinking_and_signature_deltas_stream_as_reasoning(
    server: SSEServer, make_anthropic: MakeAnthropic
) -> None:
    server.push(sse("anthropic_thinking_tool"))
    parts = await collect(make_anthropic(), ask())
    assert parts[:4] == [
        ReasoningDeltaPart("The user wants"),
        ReasoningDeltaPart(" the weather in Oslo."),
        ReasoningDeltaPart(" I should call get_weather."),
        ReasoningDeltaPart("", parts[3].signature),
    ]
    assert parts[3].signature.startswith("EqQB")


async def test_an_event_of_the_wrong_shape_is_a_malformed_event(
    server: SSEServer, make_anthropic: MakeAnthropic
) -> None:
    events = anthropic_events(
        {"type": "message_start", "message": {"usage": {"input_tokens": 5}}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta"}},
    )
    server.push(sse(events))
    with pytest.raises(MalformedEventError, match="'text'"):
        await collect(make_anthropic(), ask())


def test_a_thinking_budget_must_stay_below_max_tokens() -> None:
    with pytest.raises(InvalidInputError, match="budget_tokens"):
        AnthropicModel(
            "claude-sonnet-4-5",
            api_key="k",
            max_tokens=1024,
            thinking={"type": "enabled", "budget_tokens": 2048},
        )


async def test_overloaded_status_keeps_its_code(
    server: SSEServer, make_anthropic: MakeAnthropic
) -> None:
    server.push(
        json_error(
            529,
            {
                "type": "error",
                "error": {"type": "overloaded_error", "message": "Overloaded"},
            },
        ),
        json_error(
            429,
            {
                "type": "error",
                "error": {"type": "rate_limit_error", "message": "Slow down"},
            },
        ),
    )
    with pytest.raises(ModelHTTPError) as caught:
        await generate_text(model=make_anthropic(), prompt="hi")
    assert caught.value.status_code == 529
    assert str(caught.value) == "anthropic: HTTP 529 (overloaded_error): Overloaded"
    with pytest.raises(RateLimitError, match="Slow down"):
        await generate_text(model=make_anthropic(), prompt="hi")
