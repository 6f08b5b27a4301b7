"""OpenAIChatModel on the real ``openai`` SDK against recorded Chat Completions streams."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import openai
import pytest

from deuz_django.core import (
    ForcedTool,
    InvalidInputError,
    MalformedEventError,
    Message,
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
from deuz_django.core.providers import OpenAIChatModel

from .contract import ProviderContract
from .helpers import API_KEY, ask, collect, get_weather
from .sse_server import SSEServer, openai_events, sse

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01"
MakeOpenAI = Callable[..., OpenAIChatModel]


@tool
def get_time(tz: str) -> str:
    """The local time in a time zone."""
    return f"12:00 in {tz}"


def chunk(delta: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """An ad-hoc chunk: one choice with ``delta`` (and ``finish_reason``), or ``usage``."""
    choices = (
        [{"index": 0, "delta": delta, "finish_reason": fields.pop("finish", None)}]
        if delta is not None
        else []
    )
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1764691200,
        "model": "llama3.1",
        "choices": choices,
        **fields,
    }


class TestContract(ProviderContract):
    provider = "openai"
    text_fixture = "openai_text"
    error_event_fixture = "openai_error_event"
    malformed_fixture = "openai_malformed"
    error_event_status = 500

    @pytest.fixture
    def make_model(self, make_openai: MakeOpenAI) -> MakeOpenAI:
        return make_openai

    def error_body(self, kind: str, message: str) -> dict[str, Any]:
        types = {
            "rate_limit": ("requests", "rate_limit_exceeded"),
            "server": ("server_error", None),
            "invalid": ("invalid_request_error", None),
        }
        error_type, code = types[kind]
        return {
            "error": {
                "message": message,
                "type": error_type,
                "param": None,
                "code": code,
            }
        }


async def test_text_streams_as_deltas_and_usage_is_normalized(
    server: SSEServer, make_openai: MakeOpenAI
) -> None:
    server.push(sse("openai_text"))
    events = await collect(make_openai(), ask())
    assert events == [
        TextDeltaPart("Hello"),
        TextDeltaPart(" from"),
        TextDeltaPart(" Oslo"),
        TextDeltaPart("!"),
        FinishPart(
            "stop",
            Usage(
                input_tokens=21,  # 1301 prompt tokens, 1280 of them cached
                output_tokens=4,
                cached_read_tokens=1280,
                total_tokens=1305,
            ),
        ),
    ]
    assert server.requests[0].path == "/v1/chat/completions"
    assert server.requests[0].headers["authorization"] == f"Bearer {API_KEY}"
    assert server.bodies == [
        {
            "model": "gpt-4.1-mini",
            "messages": [{"role": "user", "content": "hi"}],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    ]


async def test_tool_arguments_split_across_chunks_are_parsed_once_and_answered(
    server: SSEServer, make_openai: MakeOpenAI
) -> None:
    server.push(sse("openai_tool_call"), sse("openai_done"))
    result = await generate_text(
        model=make_openai(),
        system="Be brief.",
        prompt="Weather in Oslo?",
        tools=[get_weather],
        max_steps=3,
    )
    assert result.steps[0].tool_calls[0].args == {"city": "Oslo", "units": "celsius"}
    assert result.steps[0].finish_reason == "tool_calls"
    assert result.text == "Deleted /tmp/old.log."
    call_id = "call_Qx3mN8vR2kLp7sYt1wZa9bCd"
    assert server.bodies[1]["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Oslo?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "arguments": '{"city":"Oslo","units":"celsius"}',
                    },
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": call_id,
            "content": '{"city":"Oslo","temp":3,"units":"celsius"}',
        },
    ]
    assert server.bodies[1]["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "The weather for a city.",
                "parameters": get_weather.parameters,
            },
        }
    ]


async def test_parallel_tool_calls_each_get_their_own_tool_message(
    server: SSEServer, make_openai: MakeOpenAI
) -> None:
    server.push(sse("openai_parallel_tools"), sse("openai_done"))
    result = await generate_text(
        model=make_openai("o4-mini"),
        prompt="Weather and time in Oslo?",
        tools=[get_weather, get_time],
        max_steps=3,
    )
    calls = [(c.tool_name, c.args) for c in result.steps[0].tool_calls]
    assert calls == [
        ("get_weather", {"city": "Oslo"}),
        ("get_time", {"tz": "Europe/Oslo"}),
    ]
    assert result.steps[0].usage.reasoning_tokens == 256
    tool_messages = [m for m in server.bodies[1]["messages"] if m["role"] == "tool"]
    assert tool_messages == [
        {
            "role": "tool",
            "tool_call_id": "call_A1b2C3d4E5f6G7h8I9j0K1l2",
            "content": '{"city":"Oslo","temp":3,"units":"celsius"}',
        },
        {
            "role": "tool",
            "tool_call_id": "call_Z9y8X7w6V5u4T3s2R1q0P9o8",
            "content": "12:00 in Europe/Oslo",
        },
    ]


async def test_images_go_as_data_urls_from_bytes_and_as_urls_from_urls(
    server: SSEServer, make_openai: MakeOpenAI
) -> None:
    server.push(sse("openai_text"))
    message = Message(
        "user",
        (
            TextPart("Compare these."),
            ImagePart(PNG),
            ImagePart("https://example.com/cat.jpg"),
            ImagePart(base64.b64encode(PNG).decode(), "image/webp"),
            ImagePart(base64.b64encode(PNG).decode()),  # media type read from the bytes
            ImagePart("data:image/gif;base64,R0lGODlhAQABAAAAACw="),
        ),
    )
    await collect(make_openai(), ask(message))
    encoded = base64.b64encode(PNG).decode()
    assert server.bodies[0]["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Compare these."},
                {
                    "type": "image_url",
                    "image_url": {"url": f"data:image/png;base64,{encoded}"},
                },
                {
                    "type": "image_url",
                    "image_url": {"url": "https://example.com/cat.jpg"},
                },
                {
                    "type": "image_url",
                    "image_url": {"url": f"data:image/webp;base64,{encoded}"},
                },
                {
                    "type": "image_url",
                    "image_url": {"url": f"data:image/png;base64,{encoded}"},
                },
                {
                    "type": "image_url",
                    "image_url": {"url": "data:image/gif;base64,R0lGODlhAQABAAAAACw="},
                },
            ],
        }
    ]


async def test_an_image_of_unknown_format_without_media_type_is_invalid_input(
    server: SSEServer, make_openai: MakeOpenAI
) -> None:
    message = Message("user", (ImagePart(b"not an image"),))
    with pytest.raises(InvalidInputError, match="pass media_type"):
        await collect(make_openai(), ask(message))
    assert server.requests == []


async def test_history_maps_reasoning_out_and_several_results_to_several_messages(
    server: SSEServer, make_openai: MakeOpenAI
) -> None:
    server.push(sse("openai_text"))
    history = (
        Message("user", "Go."),
        Message(
            "assistant",
            (
                ReasoningPart("thinking...", "sig"),
                TextPart("Calling both."),
                ToolUsePart("c1", "a", {"x": 1}),
                ToolUsePart("c2", "b", "not json"),
            ),
        ),
        Message(
            "tool",
            (ToolResultPart("c1", [1, 2]), ToolResultPart("c2", "boom", is_error=True)),
        ),
    )
    await collect(make_openai(), ask(*history))
    assert server.bodies[0]["messages"][1:] == [
        {
            "role": "assistant",
            "content": "Calling both.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "a", "arguments": '{"x":1}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "b", "arguments": "not json"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "[1,2]"},
        {"role": "tool", "tool_call_id": "c2", "content": "boom"},
    ]


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("required", "required"),
        ("none", "none"),
        (
            ForcedTool("get_time"),
            {"type": "function", "function": {"name": "get_time"}},
        ),
    ],
)
async def test_tool_choice_parallelism_and_extra_body_reach_the_request(
    server: SSEServer, make_openai: MakeOpenAI, choice: Any, sent: Any
) -> None:
    server.push(sse("openai_text"))
    model = make_openai(extra_body={"temperature": 0.2})
    definition = ToolDefinition("get_time", None, {"type": "object"})
    await collect(
        model,
        ask(tools=(definition,), tool_choice=choice, parallel_tool_calls=False),
    )
    body = server.bodies[0]
    assert body["tool_choice"] == sent
    assert body["parallel_tool_calls"] is False
    assert body["temperature"] == 0.2
    assert body["tools"] == [
        {
            "type": "function",
            "function": {"name": "get_time", "parameters": {"type": "object"}},
        }
    ]


@pytest.mark.parametrize(
    ("reason", "mapped"),
    [
        ("stop", "stop"),
        ("length", "length"),
        ("tool_calls", "tool_calls"),
        ("function_call", "tool_calls"),
        ("content_filter", "content_filter"),
    ],
)
async def test_finish_reasons_are_mapped(
    server: SSEServer, make_openai: MakeOpenAI, reason: str, mapped: str
) -> None:
    server.push(sse(openai_events(chunk({"content": "x"}), chunk({}, finish=reason))))
    events = await collect(make_openai(), ask())
    assert events[-1] == FinishPart(mapped, Usage())  # type: ignore[arg-type]


async def test_compatible_servers_reasoning_ids_and_extra_content_round_trip(
    server: SSEServer, make_openai: MakeOpenAI
) -> None:
    """Ollama/vLLM stream ``reasoning_content``; some send no call ids, Gemini sends
    ``extra_content`` (thought signatures) that must come back with the call."""
    server.push(
        sse(
            openai_events(
                chunk({"role": "assistant", "reasoning_content": "Hmm."}),
                chunk(
                    {
                        "tool_calls": [
                            {"index": 0, "function": {"name": "f", "arguments": "{}"}}
                        ]
                    }
                ),
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": 1,
                                "id": "g1",
                                "function": {"name": "g", "arguments": ""},
                                "extra_content": {"google": {"thought_signature": "T"}},
                            }
                        ]
                    }
                ),
                chunk({}, finish="tool_calls"),
            )
        )
    )
    events = await collect(make_openai("llama3.1"), ask())
    assert events[0] == ReasoningDeltaPart("Hmm.")
    first, second = events[1], events[2]
    assert isinstance(first, ToolCallDeltaPart)
    assert first.id.startswith("call_")
    assert (first.name, first.args_text_delta) == ("f", "{}")
    assert second == ToolCallDeltaPart(
        "g1", "", "g", {"extra_content": {"google": {"thought_signature": "T"}}}
    )
    server.push(sse("openai_text"))
    use = ToolUsePart(
        "g1", "g", {}, {"extra_content": {"google": {"thought_signature": "T"}}}
    )
    await collect(make_openai("llama3.1"), ask(Message("assistant", (use,))))
    assert server.bodies[1]["messages"][0]["tool_calls"] == [
        {
            "id": "g1",
            "type": "function",
            "function": {"name": "g", "arguments": "{}"},
            "extra_content": {"google": {"thought_signature": "T"}},
        }
    ]


async def test_a_chunk_of_the_wrong_shape_is_a_malformed_event(
    server: SSEServer, make_openai: MakeOpenAI
) -> None:
    server.push(sse(openai_events(chunk({"content": 42}))))
    with pytest.raises(MalformedEventError, match="expected a string"):
        await collect(make_openai(), ask())


async def test_a_prebuilt_sdk_client_is_used_as_is(server: SSEServer) -> None:
    server.push(sse("openai_text"))
    async with openai.AsyncOpenAI(
        api_key="sk-custom-client-key-0000", base_url=f"{server.url}/v1", max_retries=0
    ) as client:
        model = OpenAIChatModel("gpt-4.1-mini", client=client)
        assert model.client is client
        events = await collect(model, ask())
    assert events[-1].finish_reason == "stop"
    assert (
        server.requests[0].headers["authorization"]
        == "Bearer sk-custom-client-key-0000"
    )
