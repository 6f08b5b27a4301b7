"""A whole durable run per provider: tool call → suspend on approval → checkpoint text →
a fresh store, model and event loop → resume → final answer, with the exact request
bodies the provider received on each leg."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable
from typing import Any

from deuz_django.core import ImagePart, Message, TextPart, generate_text, tool
from deuz_django.core.durable import (
    DurableSession,
    create_approval_signer,
    create_in_memory_session_store,
    deserialize_checkpoint,
    resume_from_checkpoint,
    serialize_checkpoint,
)
from deuz_django.core.providers import AnthropicModel, OpenAIChatModel

from .helpers import API_KEY
from .sse_server import SSEServer, sse

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x02\x00\x00\x00\x02\xff\x00"
PNG_B64 = base64.b64encode(PNG).decode()
SIGNER = create_approval_signer(secret="s3cret")
SYSTEM = "You tidy up files."
REQUEST = Message(
    "user", (TextPart("Delete the file in this screenshot."), ImagePart(PNG))
)


@tool(needs_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def run_in_two_processes(
    make_model: Callable[[], OpenAIChatModel | AnthropicModel], run_id: str
) -> tuple[str, Any]:
    """Leg one suspends; its checkpoint crosses as text; leg two resumes it elsewhere."""

    async def first_leg() -> tuple[str, str]:
        store = create_in_memory_session_store()
        model = make_model()
        try:
            result = await generate_text(
                model=model,
                system=SYSTEM,
                messages=[REQUEST],
                tools=[delete_file],
                max_steps=4,
                session=DurableSession(store, run_id),
                approval_signer=SIGNER,
            )
        finally:
            await model.client.close()
        assert result.finish_reason == "tool_calls"
        (pending,) = result.pending_approvals or ()
        assert (pending.tool_name, pending.input) == (
            "delete_file",
            {"path": "/tmp/old.log"},
        )
        checkpoint = store.load(run_id)
        assert checkpoint is not None
        assert checkpoint.status == "suspended"
        assert pending.token is not None
        return serialize_checkpoint(checkpoint), pending.token

    stored, token = asyncio.run(first_leg())
    assert '"$deuzBytes"' in stored  # the image bytes travel inside the checkpoint

    async def second_leg() -> Any:
        store = create_in_memory_session_store()
        checkpoint = deserialize_checkpoint(stored)
        store.save(checkpoint)
        model = make_model()
        try:
            return await resume_from_checkpoint(
                store,
                run_id,
                model=model,
                tools=[delete_file],
                max_steps=4,
                approval_signer=SIGNER,
                approval_responses=[
                    {
                        "approval_id": checkpoint.pending_approvals[0].approval_id,  # type: ignore[index]
                        "approved": True,
                        "token": token,
                    }
                ],
            )
        finally:
            await model.client.close()

    result = asyncio.run(second_leg())
    assert result.text == "Deleted /tmp/old.log."
    assert result.finish_reason == "stop"
    return stored, result


def test_openai_run_resumes_from_a_serialized_checkpoint(server: SSEServer) -> None:
    server.push(sse("openai_delete_file"), sse("openai_done"))
    run_in_two_processes(
        lambda: OpenAIChatModel(
            "gpt-4.1-mini", api_key=API_KEY, base_url=f"{server.url}/v1", max_retries=0
        ),
        "run-openai",
    )
    call_id = "call_Del0tE9fI1e2R3u4N5s6T7u8"
    first_messages = [
        {"role": "system", "content": SYSTEM},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Delete the file in this screenshot."},
                {
                    "type": "image_url",
                    "image_url": {"url": f"data:image/png;base64,{PNG_B64}"},
                },
            ],
        },
    ]
    tools = [
        {
            "type": "function",
            "function": {
                "name": "delete_file",
                "description": "Delete a file.",
                "parameters": delete_file.parameters,
            },
        }
    ]
    common = {
        "model": "gpt-4.1-mini",
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": tools,
    }
    assert server.bodies == [
        {**common, "messages": first_messages},
        {
            **common,
            "messages": [
                *first_messages,
                {
                    "role": "assistant",
                    "content": "I will delete it.",
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {
                                "name": "delete_file",
                                "arguments": '{"path":"/tmp/old.log"}',
                            },
                        }
                    ],
                },
                {
                    "role": "tool",
                    "tool_call_id": call_id,
                    "content": "deleted /tmp/old.log",
                },
            ],
        },
    ]


def test_anthropic_run_echoes_the_thinking_signature_after_a_checkpoint(
    server: SSEServer,
) -> None:
    server.push(sse("anthropic_delete_file"), sse("anthropic_done"))
    thinking = {"type": "enabled", "budget_tokens": 2048}
    stored, result = run_in_two_processes(
        lambda: AnthropicModel(
            "claude-sonnet-4-5",
            api_key=API_KEY,
            base_url=server.url,
            max_retries=0,
            max_tokens=8000,
            thinking=thinking,
        ),
        "run-anthropic",
    )
    signature = (
        "ErUBCkYIBxgCIkDq3PnlMUAlv0yNzqzOamPlLqYAqZx2x0UmCX4TPi0N1kqaI6Y5cXpD7SgPEE1Hsmv7ok5L"
        "Giyhl6X3aDmJKWJzEgzRh0Q2XjXz1kvZ8uAaDHP8EOLjqfnL1CTFLyIwgJcKWBI0UjrSBQt8vM+Gd3c5Lx9S"
        "mHlLTnbq+hJMlD2UnnTVfUvDNFpBRZ1VQSD/KhA="
    )
    assert signature in stored
    assert result.usage.cached_read_tokens == 1536
    tool_id = "toolu_01DeL3t3F1l3xYz9WvUt7Sr5"
    first_messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Delete the file in this screenshot."},
                {
                    "type": "image",
                    "source": {
                        "type": "base64",
                        "media_type": "image/png",
                        "data": PNG_B64,
                    },
                },
            ],
        }
    ]
    common = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 8000,
        "system": SYSTEM,
        "stream": True,
        "thinking": thinking,
        "tools": [
            {
                "name": "delete_file",
                "description": "Delete a file.",
                "input_schema": delete_file.parameters,
            }
        ],
    }
    assert server.bodies == [
        {**common, "messages": first_messages},
        {
            **common,
            "messages": [
                *first_messages,
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "thinking",
                            "thinking": "The user asked me to remove the file shown in "
                            "the screenshot.",
                            "signature": signature,
                        },
                        {
                            "type": "tool_use",
                            "id": tool_id,
                            "name": "delete_file",
                            "input": {"path": "/tmp/old.log"},
                        },
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": tool_id,
                            "content": "deleted /tmp/old.log",
                        }
                    ],
                },
            ],
        },
    ]
