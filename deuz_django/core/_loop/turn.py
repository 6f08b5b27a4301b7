"""Collecting one model turn into an assistant message and its tool calls (SPEC R1.3–R1.5)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..messages import Message, Part, ReasoningPart, TextPart, ToolUsePart
from ..model import ModelEvent
from ..parts import (
    FinishPart,
    ReasoningDeltaPart,
    StreamPart,
    TextDeltaPart,
    ToolCallDeltaPart,
    ToolCallPart,
    ToolStatePart,
)
from ..results import StepResult
from ..tools import ToolCall, ToolResult
from ..usage import EMPTY_USAGE, FinishReason, Usage


def parse_arguments(text: str) -> Any:
    """R1.4: empty → ``{}``, valid JSON → its value, anything else → the raw string."""
    if text == "":
        return {}
    try:
        return json.loads(text)
    except ValueError:
        return text


@dataclass(slots=True)
class _PendingCall:
    name: str = ""
    args_text: str = ""
    provider_metadata: dict[str, Any] | None = None
    complete_input: Any = None
    complete: bool = False


@dataclass(slots=True)
class Turn:
    """Accumulates the events of one model call."""

    text: list[str] = field(default_factory=list)
    # Plain reasoning in blocks. A block ends with a signature-only delta (how Anthropic
    # closes a thinking block); a model that thinks several times in a turn (interleaved
    # thinking) must get each signed block back as it was. With one block this is R1.3.
    reasoning: list[list[str]] = field(default_factory=list)
    signatures: list[str | None] = field(default_factory=list)
    block_closed: bool = True
    encrypted: list[ReasoningPart] = field(default_factory=list)
    calls: dict[str, _PendingCall] = field(default_factory=dict)
    finish_reason: FinishReason | None = None
    usage: Usage | None = None
    provider_metadata: dict[str, Any] | None = None

    def add(self, event: ModelEvent) -> tuple[StreamPart, ...]:
        """Record ``event``; return the parts to stream for it (in order)."""
        if isinstance(event, TextDeltaPart):
            self.text.append(event.text)
            return (event,)
        if isinstance(event, ReasoningDeltaPart):
            if event.encrypted:
                self.encrypted.append(
                    ReasoningPart(
                        event.text,
                        event.signature,
                        encrypted=True,
                        redacted=event.redacted,
                    )
                )
                return (event,)
            if self.block_closed and (event.text or not self.reasoning):
                self.reasoning.append([])
                self.signatures.append(None)
                self.block_closed = False
            self.reasoning[-1].append(event.text)
            if event.signature is not None:
                self.signatures[-1] = event.signature
                self.block_closed = not event.text
            return (event,)
        if isinstance(event, ToolCallDeltaPart):
            pending = self.calls.get(event.id)
            prefix: tuple[StreamPart, ...] = ()
            if pending is None:
                pending = self.calls[event.id] = _PendingCall()
                prefix = (ToolStatePart(event.id, "input-streaming", event.name),)
            if event.name:
                pending.name = event.name
            pending.args_text += event.args_text_delta
            if event.provider_metadata is not None:
                pending.provider_metadata = event.provider_metadata
            return (*prefix, event)
        if isinstance(event, ToolCallPart):
            pending = self.calls.setdefault(event.tool_call_id, _PendingCall())
            pending.name = event.tool_name
            pending.complete_input = event.input
            pending.complete = True
            return ()
        if isinstance(event, FinishPart):
            self.finish_reason = event.finish_reason
            self.usage = event.usage
            self.provider_metadata = event.provider_metadata
            return ()
        raise TypeError(f"model emitted an unsupported event: {event!r}")

    @classmethod
    def replay(cls, message: Message) -> tuple[Turn, tuple[StreamPart, ...]]:
        """A turn recorded in the step journal, as if the model had just answered it:
        the turn (no usage: no model was called) and the parts to stream for its text and
        reasoning (its tool calls stream with the tool phase)."""
        turn = cls(finish_reason="tool_calls")
        parts: list[StreamPart] = []
        content = () if isinstance(message.content, str) else message.content
        for part in content:
            if isinstance(part, ReasoningPart) and not part.encrypted:
                turn.reasoning.append([part.text])
                turn.signatures.append(part.signature)
                parts.append(ReasoningDeltaPart(part.text, part.signature))
            elif isinstance(part, TextPart):
                turn.text.append(part.text)
                parts.append(TextDeltaPart(part.text))
            elif isinstance(part, ToolUsePart):
                turn.calls[part.id] = _PendingCall(
                    part.name, "", part.provider_metadata, part.input, True
                )
        return turn, tuple(parts)

    @property
    def step_usage(self) -> Usage:
        return self.usage or EMPTY_USAGE

    @property
    def text_value(self) -> str:
        return "".join(self.text)

    @property
    def reasoning_text(self) -> str:
        return "".join("".join(block) for block in self.reasoning)

    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(
            ToolCall(
                call_id,
                pending.name,
                pending.complete_input
                if pending.complete
                else parse_arguments(pending.args_text),
            )
            for call_id, pending in self.calls.items()
        )

    def assistant_message(self, calls: tuple[ToolCall, ...]) -> Message:
        """R1.3 content order: encrypted reasoning, reasoning, text, tool uses.

        One reasoning part per signed block (the reference joins them all under the last
        signature, which a provider verifying each block's signature would reject).
        """
        content: list[Part] = list(self.encrypted)
        for block, signature in zip(self.reasoning, self.signatures, strict=True):
            text = "".join(block)
            if text:
                content.append(ReasoningPart(text, signature))
        if self.text_value:
            content.append(TextPart(self.text_value))
        content.extend(
            ToolUsePart(
                call.tool_call_id,
                call.tool_name,
                call.args,
                self.calls[call.tool_call_id].provider_metadata,
            )
            for call in calls
        )
        metadata = None
        phase = (self.provider_metadata or {}).get("openai", {}).get("phase")
        if phase is not None:
            metadata = {"openai": {"phase": phase}}
        return Message("assistant", tuple(content), metadata)

    def step_result(
        self,
        *,
        first: bool,
        calls: tuple[ToolCall, ...],
        results: tuple[ToolResult, ...],
        response: tuple[Message, ...],
    ) -> StepResult:
        """The record of this turn as a step of its leg (R1.16)."""
        return StepResult(
            step_type="initial" if first else "tool-result",
            text=self.text_value,
            reasoning_text=self.reasoning_text or None,
            tool_calls=calls,
            tool_results=results,
            finish_reason=self.finish_reason or "stop",
            usage=self.step_usage,
            response_messages=response,
        )
