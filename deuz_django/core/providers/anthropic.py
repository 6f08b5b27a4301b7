"""Anthropic Messages through the official ``anthropic`` SDK.

>>> model = AnthropicModel("claude-sonnet-4-5")  # ANTHROPIC_API_KEY from the environment
>>> thinker = AnthropicModel(
...     "claude-sonnet-4-5",
...     max_tokens=16000,
...     thinking={"type": "enabled", "budget_tokens": 8000},
... )

Thinking round-trips: ``thinking_delta`` and ``signature_delta`` stream as reasoning
deltas, so the assistant message the loop assembles holds a
:class:`~deuz_django.core.messages.ReasoningPart` with the signature, which goes back on the
next turn (and through a checkpoint) as a ``thinking`` block ahead of text and tool use.
A ``redacted_thinking`` block streams as an encrypted reasoning delta and goes back as
``redacted_thinking``.

Each step is one streamed ``POST /v1/messages`` through the SDK client (see
:mod:`._base`); server tool blocks (web search…) run at Anthropic and are not local calls.

Usage follows the TypeScript SDK: ``input_tokens`` is Anthropic's (cache tokens excluded),
``cache_write_tokens`` the 5-minute and ``cache_write_1h_tokens`` the 1-hour cache
writes, and ``total_tokens`` counts every input (cached, written, uncached) plus output.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..exceptions import InvalidInputError, ModelConnectionError
from ..messages import (
    ImagePart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolResultPart,
    ToolUsePart,
)
from ..model import ForcedTool, ModelEvent, ModelRequest
from ..parts import FinishPart, ReasoningDeltaPart, TextDeltaPart, ToolCallDeltaPart
from ..usage import FinishReason, Usage
from ._base import SDKModel, StreamReader, build_client
from ._content import as_text, resolve_image
from ._errors import expect_int, expect_str, require_sdk

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

DEFAULT_MAX_TOKENS = 4096

_STOP: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
_NO_EVENTS: tuple[ModelEvent, ...] = ()
_COUNTED = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


class AnthropicModel(SDKModel):
    """A :class:`~deuz_django.core.model.LanguageModel` over ``AsyncAnthropic``.

    Pass ``client=`` to use a pre-built SDK client; otherwise one is built from
    ``api_key``, ``base_url``, ``timeout`` and ``max_retries`` (SDK defaults, such as
    ``ANTHROPIC_API_KEY``, when not given). ``max_tokens`` is required by the API;
    ``thinking`` is sent as-is (``{"type": "enabled", "budget_tokens": 2048}``);
    ``extra_body`` is merged into every request's JSON (``{"temperature": 0.2}``).
    """

    path = "/v1/messages"
    client: AsyncAnthropic

    def __init__(
        self,
        model: str,
        *,
        client: AsyncAnthropic | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        thinking: Mapping[str, Any] | None = None,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        sdk = require_sdk("anthropic", provider="anthropic", extra="anthropic")
        budget = (thinking or {}).get("budget_tokens")
        if isinstance(budget, int) and budget >= max_tokens:
            raise InvalidInputError(
                f"thinking.budget_tokens ({budget}) must be below max_tokens ({max_tokens})"
            )
        if client is None:
            client = build_client(
                sdk.AsyncAnthropic,
                api_key=api_key,
                base_url=base_url,
                timeout=timeout,
                max_retries=max_retries,
            )
        super().__init__(
            model, sdk=sdk, client=client, provider="anthropic", extra_body=extra_body
        )
        self._max_tokens = max_tokens
        self._thinking = dict(thinking) if thinking else None

    def _reader(self) -> _EventReader:
        return _EventReader(self.provider)

    def _body(self, request: ModelRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self._model,
            "max_tokens": self._max_tokens,
            "messages": _messages(request.messages),
            "stream": True,
        }
        system = "\n\n".join(m.text for m in request.messages if m.role == "system")
        if system:
            body["system"] = system
        if self._thinking is not None:
            body["thinking"] = self._thinking
        if request.tools:
            body["tools"] = [
                {
                    "name": tool.name,
                    **({"description": tool.description} if tool.description else {}),
                    "input_schema": tool.parameters,
                }
                for tool in request.tools
            ]
            choice = self._tool_choice(request)
            if choice is not None:
                body["tool_choice"] = choice
        return body

    def _tool_choice(self, request: ModelRequest) -> dict[str, Any] | None:
        """Forcing a tool is not allowed while thinking: it then falls back to auto."""
        choice = request.tool_choice
        if choice == "none":
            return {"type": "none"}
        extra = (
            {} if request.parallel_tool_calls else {"disable_parallel_tool_use": True}
        )
        thinking = (self._thinking or {}).get("type") not in (None, "disabled")
        if isinstance(choice, ForcedTool) and not thinking:
            return {"type": "tool", "name": choice.tool_name, **extra}
        if choice == "required" and not thinking:
            return {"type": "any", **extra}
        if choice is None and not extra:
            return None
        return {"type": "auto", **extra}


def _messages(history: tuple[Message, ...]) -> list[dict[str, Any]]:
    """Tool messages become user turns; consecutive turns of one role are merged."""
    out: list[dict[str, Any]] = []
    for message in history:
        if message.role == "system":
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = [block for part in message.parts for block in _blocks(part)]
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


def _blocks(part: Part) -> Iterator[dict[str, Any]]:
    if isinstance(part, TextPart):
        if part.text:  # the API rejects empty text blocks
            yield {"type": "text", "text": part.text}
    elif isinstance(part, ToolUsePart):
        # The API takes only objects; a raw string that failed to parse cannot go back.
        tool_input = part.input if isinstance(part.input, dict) else {}
        yield {
            "type": "tool_use",
            "id": part.id,
            "name": part.name,
            "input": tool_input,
        }
    elif isinstance(part, ToolResultPart):
        block = {
            "type": "tool_result",
            "tool_use_id": part.tool_use_id,
            "content": as_text(part.result),
        }
        yield {**block, "is_error": True} if part.is_error else block
    elif isinstance(part, ReasoningPart):
        if part.redacted or (part.encrypted and part.signature is None):
            yield {"type": "redacted_thinking", "data": part.text}
        elif part.signature is not None:
            yield {
                "type": "thinking",
                "thinking": part.text,
                "signature": part.signature,
            }
        # Unsigned reasoning (another provider's) would be rejected: it is not sent.
    elif isinstance(part, ImagePart):
        image = resolve_image(part)
        source = (
            {"type": "url", "url": image.url}
            if image.url
            else {"type": "base64", "media_type": image.media_type, "data": image.data}
        )
        yield {"type": "image", "source": source}


class _EventReader(StreamReader):
    """Turns raw Messages stream events (JSON) into model events, dispatching on ``type``."""

    def __init__(self, provider: str) -> None:
        super().__init__(provider)
        self.tools: dict[int, str] = {}  # content-block index → tool_use id
        self.counts: dict[str, int] = {}
        self.stop_reason: str | None = None
        self.stopped = False

    def finish(self) -> FinishPart:
        if not self.stopped:
            raise ModelConnectionError(
                f"{self.provider}: the stream ended before message_stop",
                provider=self.provider,
            )
        return FinishPart(_STOP.get(self.stop_reason or "", "stop"), self._usage())

    def _read(self, event: dict[str, Any]) -> tuple[ModelEvent, ...]:
        kind = event.get("type")
        if kind == "content_block_delta":
            delta = event["delta"]
            delta_kind = delta.get("type")
            if delta_kind == "text_delta":
                return (TextDeltaPart(expect_str(delta["text"])),)
            if delta_kind == "thinking_delta":
                return (ReasoningDeltaPart(expect_str(delta["thinking"])),)
            if delta_kind == "signature_delta":
                return (ReasoningDeltaPart("", expect_str(delta["signature"])),)
            if delta_kind == "input_json_delta" and event.get("index") in self.tools:
                call_id = self.tools[event["index"]]
                return (ToolCallDeltaPart(call_id, expect_str(delta["partial_json"])),)
        elif kind == "content_block_start":
            return self._block_start(event.get("index"), event["content_block"])
        elif kind == "message_start":
            self._count(event["message"].get("usage"))
        elif kind == "message_delta":
            if stop_reason := (event.get("delta") or {}).get("stop_reason"):
                self.stop_reason = expect_str(stop_reason)
            self._count(event.get("usage"))
        elif kind == "message_stop":
            self.stopped = True
        return _NO_EVENTS  # unknown event types are skipped, for forward compatibility

    def _block_start(self, index: Any, block: dict[str, Any]) -> tuple[ModelEvent, ...]:
        kind = block.get("type")
        if kind == "tool_use":
            call_id = self.tools[index] = expect_str(block["id"])
            return (ToolCallDeltaPart(call_id, "", expect_str(block["name"])),)
        if kind == "text" and block.get("text"):
            return (TextDeltaPart(expect_str(block["text"])),)
        if kind == "thinking" and (block.get("thinking") or block.get("signature")):
            signature = block.get("signature")
            return (
                ReasoningDeltaPart(
                    expect_str(block.get("thinking") or ""),
                    expect_str(signature) if signature else None,
                ),
            )
        if kind == "redacted_thinking":
            return (
                ReasoningDeltaPart(
                    expect_str(block["data"]), encrypted=True, redacted=True
                ),
            )
        return _NO_EVENTS  # server tool blocks run at Anthropic: not local tool calls

    def _count(self, usage: dict[str, Any] | None) -> None:
        """``message_start`` usage, then the cumulative counts of ``message_delta``."""
        if not usage:
            return
        counts = self.counts
        for name in _COUNTED:
            value = usage.get(name)
            if value is not None:
                counts[name] = expect_int(value)
        if cache_creation := usage.get("cache_creation"):
            counts["ephemeral_1h"] = expect_int(
                cache_creation.get("ephemeral_1h_input_tokens") or 0
            )
        if details := usage.get("output_tokens_details"):
            counts["thinking_tokens"] = expect_int(details.get("thinking_tokens") or 0)
        if server := usage.get("server_tool_use"):
            counts["server_tool_uses"] = sum(
                expect_int(server.get(name) or 0)
                for name in ("web_search_requests", "web_fetch_requests")
            )

    def _usage(self) -> Usage:
        counts = self.counts
        input_tokens = counts.get("input_tokens", 0)
        output_tokens = counts.get("output_tokens", 0)
        cache_read = counts.get("cache_read_input_tokens", 0)
        cache_write = counts.get("cache_creation_input_tokens", 0)
        cache_write_1h = min(counts.get("ephemeral_1h", 0), cache_write)
        return Usage(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            reasoning_tokens=counts.get("thinking_tokens", 0),
            cached_read_tokens=cache_read,
            cache_write_tokens=cache_write - cache_write_1h,
            cache_write_1h_tokens=cache_write_1h,
            total_tokens=input_tokens + cache_read + cache_write + output_tokens,
            server_tool_uses=counts.get("server_tool_uses") or None,
        )
