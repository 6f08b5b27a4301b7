"""OpenAI Chat Completions — and OpenAI-compatible servers — through the official SDK.

>>> model = OpenAIChatModel("gpt-4.1-mini")  # OPENAI_API_KEY from the environment
>>> local = OpenAIChatModel(
...     "llama3.1", base_url="http://localhost:11434/v1", api_key="ollama"
... )

One streamed ``POST /chat/completions`` per step, with
``stream_options={"include_usage": True}``, through the SDK client (see
:mod:`._base`). Only the first choice is read; ``reasoning_content``/``reasoning`` deltas
of compatible servers become reasoning deltas, and are not sent back.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from ..exceptions import ModelConnectionError
from ..messages import ImagePart, Message, TextPart, ToolResultPart, ToolUsePart
from ..model import ForcedTool, ModelEvent, ModelRequest, ToolChoice
from ..parts import FinishPart, ReasoningDeltaPart, TextDeltaPart, ToolCallDeltaPart
from ..usage import EMPTY_USAGE, FinishReason, Usage
from ._base import SDKModel, StreamReader, build_client
from ._content import as_text, resolve_image
from ._errors import expect_int, expect_list, expect_str, require_sdk

if TYPE_CHECKING:
    from openai import AsyncOpenAI

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}


class OpenAIChatModel(SDKModel):
    """A :class:`~deuz_django.core.model.LanguageModel` over ``AsyncOpenAI``.

    Pass ``client=`` to use a pre-built SDK client (custom transport, tests); otherwise one
    is built from ``api_key``, ``base_url``, ``timeout`` and ``max_retries``, each left to
    the SDK's default (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``…) when not given.
    ``extra_body`` is merged into every request's JSON (``temperature``,
    ``max_completion_tokens``, ``reasoning_effort``…). ``provider`` names the adapter in
    errors.
    """

    path = "/chat/completions"
    request_options: ClassVar[Mapping[str, Any]] = {"security": {"bearer_auth": True}}
    client: AsyncOpenAI

    def __init__(
        self,
        model: str,
        *,
        client: AsyncOpenAI | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        extra_body: Mapping[str, Any] | None = None,
        provider: str = "openai",
    ) -> None:
        sdk = require_sdk("openai", provider=provider, extra="openai")
        if client is None:
            client = build_client(
                sdk.AsyncOpenAI,
                api_key=api_key,
                base_url=base_url,
                timeout=timeout,
                max_retries=max_retries,
            )
        super().__init__(
            model, sdk=sdk, client=client, provider=provider, extra_body=extra_body
        )

    def _reader(self) -> _ChunkReader:
        return _ChunkReader(self.provider)

    def _body(self, request: ModelRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self._model,
            "messages": [m for message in request.messages for m in _messages(message)],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        **(
                            {"description": tool.description}
                            if tool.description
                            else {}
                        ),
                        "parameters": tool.parameters,
                    },
                }
                for tool in request.tools
            ]
            if request.tool_choice is not None:
                body["tool_choice"] = _tool_choice(request.tool_choice)
            if not request.parallel_tool_calls:
                body["parallel_tool_calls"] = False
        return body


def _tool_choice(choice: ToolChoice) -> Any:
    if isinstance(choice, ForcedTool):
        return {"type": "function", "function": {"name": choice.tool_name}}
    return choice


def _messages(message: Message) -> Iterator[dict[str, Any]]:
    """One Deuz message as OpenAI messages: each tool result is its own ``tool`` message."""
    if message.role == "system":
        yield {"role": "system", "content": message.text}
        return
    parts = message.parts
    if message.role == "assistant":
        text = "".join(p.text for p in parts if isinstance(p, TextPart))
        calls = [
            {
                "id": p.id,
                "type": "function",
                "function": {"name": p.name, "arguments": as_text(p.input)},
                **_extra_content(p.provider_metadata),
            }
            for p in parts
            if isinstance(p, ToolUsePart)
        ]
        if text or calls:  # reasoning has no Chat Completions form: it is not sent back
            out: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                out["tool_calls"] = calls
            yield out
        return
    for part in parts:
        if isinstance(part, ToolResultPart):
            yield {
                "role": "tool",
                "tool_call_id": part.tool_use_id,
                "content": as_text(part.result),
            }
    content = [p for p in parts if isinstance(p, TextPart | ImagePart)]
    if any(isinstance(p, ImagePart) for p in content):
        yield {"role": "user", "content": [_content_part(p) for p in content]}
    elif content or isinstance(message.content, str):
        yield {"role": "user", "content": message.text}


def _extra_content(metadata: dict[str, Any] | None) -> dict[str, Any]:
    if metadata is None or "extra_content" not in metadata:
        return {}
    return {"extra_content": metadata["extra_content"]}


def _content_part(part: TextPart | ImagePart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    return {"type": "image_url", "image_url": {"url": resolve_image(part).data_url}}


class _ChunkReader(StreamReader):
    """Turns chunk JSON into model events, for the first choice (``index`` 0)."""

    def __init__(self, provider: str) -> None:
        super().__init__(provider)
        self.calls: dict[int, str] = {}  # tool-call index → id
        self.finish_reason: FinishReason | None = None
        self.usage = EMPTY_USAGE

    def finish(self) -> FinishPart:
        if self.finish_reason is None:
            raise ModelConnectionError(
                f"{self.provider}: the stream ended before a finish reason",
                provider=self.provider,
            )
        return FinishPart(self.finish_reason, self.usage)

    def _read(self, chunk: dict[str, Any]) -> list[ModelEvent]:
        usage = chunk.get("usage")
        if usage:
            self.usage = _usage(usage)
        events: list[ModelEvent] = []
        for choice in expect_list(chunk.get("choices")):
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            if delta:
                if content := delta.get("content"):
                    events.append(TextDeltaPart(expect_str(content)))
                if refusal := delta.get("refusal"):
                    events.append(TextDeltaPart(expect_str(refusal)))
                # Compatible servers (vLLM, Ollama, DeepSeek) stream reasoning here.
                if reasoning := delta.get("reasoning_content") or delta.get(
                    "reasoning"
                ):
                    events.append(ReasoningDeltaPart(expect_str(reasoning)))
                for call in expect_list(delta.get("tool_calls")):
                    events.append(self._tool_call(call))
            if finish := choice.get("finish_reason"):
                self.finish_reason = _FINISH.get(expect_str(finish), "stop")
        return events

    def _tool_call(self, call: dict[str, Any]) -> ToolCallDeltaPart:
        index = call.get("index", 0)
        function = call.get("function") or {}
        known = self.calls.get(index)
        call_id = call.get("id")
        if call_id and call_id != known:  # a new call (some servers reuse index 0)
            call_id = self.calls[index] = expect_str(call_id)
        elif known is None:  # a server that sends no ids
            call_id = self.calls[index] = f"call_{uuid.uuid4().hex[:24]}"
        else:
            call_id = known
        name = function.get("name")
        return ToolCallDeltaPart(
            call_id,
            expect_str(function.get("arguments") or ""),
            expect_str(name) if name else None,
            # Gemini's compatible endpoint puts thought signatures here; sent back as-is.
            {"extra_content": call["extra_content"]}
            if "extra_content" in call
            else None,
        )


def _usage(usage: dict[str, Any]) -> Usage:
    """``input_tokens`` excludes the cached prompt tokens, as the TypeScript SDK counts."""
    prompt = expect_int(usage.get("prompt_tokens") or 0)
    completion = expect_int(usage.get("completion_tokens") or 0)
    prompt_details = usage.get("prompt_tokens_details") or {}
    completion_details = usage.get("completion_tokens_details") or {}
    cached = expect_int(prompt_details.get("cached_tokens") or 0)
    audio = expect_int(prompt_details.get("audio_tokens") or 0) + expect_int(
        completion_details.get("audio_tokens") or 0
    )
    return Usage(
        input_tokens=max(0, prompt - cached),
        output_tokens=completion,
        reasoning_tokens=expect_int(completion_details.get("reasoning_tokens") or 0),
        cached_read_tokens=cached,
        total_tokens=expect_int(usage.get("total_tokens") or prompt + completion),
        audio_tokens=audio or None,
    )
