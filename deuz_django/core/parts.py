"""Canonical stream parts (SPEC §4): what ``full_stream`` yields, tagged by ``type``.

Each part is a frozen value whose ``type`` is the Deuz part name (``"text-delta"``) and whose
``to_json()`` is the canonical camelCase form. Models emit a subset of the same parts (text,
reasoning and tool-call deltas, complete tool calls, ``finish``), so nothing is translated
twice. The UI wire mapping lives in :mod:`deuz_django.core.wire`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from .approvals import ToolApprovalRequest
from .usage import FinishReason, Usage

ToolState = Literal[
    "input-streaming",
    "input-complete",
    "awaiting-approval",
    "executing",
    "complete",
    "error",
]


def _put(out: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        out[key] = value


@dataclass(frozen=True, slots=True)
class TextDeltaPart:
    text: str
    type: ClassVar[str] = "text-delta"

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "text": self.text}


@dataclass(frozen=True, slots=True)
class ReasoningDeltaPart:
    text: str
    signature: str | None = None
    encrypted: bool | None = None
    redacted: bool | None = None  # an encrypted payload the provider redacted
    type: ClassVar[str] = "reasoning-delta"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "text": self.text}
        _put(out, "signature", self.signature)
        _put(out, "encrypted", self.encrypted)
        _put(out, "redacted", self.redacted)
        return out


@dataclass(frozen=True, slots=True)
class ToolCallDeltaPart:
    """A fragment of a streamed tool call; arguments are parsed once the turn ends (R1.4)."""

    id: str
    args_text_delta: str = ""
    name: str | None = None
    provider_metadata: dict[str, Any] | None = None
    type: ClassVar[str] = "tool-call-delta"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "id": self.id}
        _put(out, "name", self.name)
        out["argsTextDelta"] = self.args_text_delta
        _put(out, "providerMetadata", self.provider_metadata)
        return out


@dataclass(frozen=True, slots=True)
class ToolCallPart:
    """A complete tool call: emitted by the loop after ``step-finish``, or by a model."""

    tool_call_id: str
    tool_name: str
    input: Any
    type: ClassVar[str] = "tool-call"

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "toolCallId": self.tool_call_id,
            "toolName": self.tool_name,
            "input": self.input,
        }


@dataclass(frozen=True, slots=True)
class ToolOutputPart:
    """The ``tool-result`` part: one executed (or denied) call's output."""

    tool_call_id: str
    tool_name: str
    output: Any
    is_error: bool = False
    type: ClassVar[str] = "tool-result"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.type,
            "toolCallId": self.tool_call_id,
            "toolName": self.tool_name,
            "output": self.output,
        }
        if self.is_error:
            out["isError"] = True
        return out


@dataclass(frozen=True, slots=True)
class ToolApprovalRequestPart:
    request: ToolApprovalRequest
    type: ClassVar[str] = "tool-approval-request"

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, **self.request.to_json()}


@dataclass(frozen=True, slots=True)
class ToolStatePart:
    tool_call_id: str
    state: ToolState
    tool_name: str | None = None
    denied: bool = False
    denied_reason: str | None = None
    type: ClassVar[str] = "tool-state"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "toolCallId": self.tool_call_id}
        _put(out, "toolName", self.tool_name)
        out["state"] = self.state
        if self.denied:
            out["denied"] = True
        _put(out, "deniedReason", self.denied_reason)
        return out


@dataclass(frozen=True, slots=True)
class StepStartPart:
    step_index: int
    type: ClassVar[str] = "step-start"

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "stepIndex": self.step_index}


@dataclass(frozen=True, slots=True)
class StepFinishPart:
    """The end of one model call; ``usage`` is that call's alone."""

    step_index: int
    finish_reason: FinishReason
    usage: Usage
    type: ClassVar[str] = "step-finish"

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "stepIndex": self.step_index,
            "finishReason": self.finish_reason,
            "usage": self.usage.to_json(),
        }


@dataclass(frozen=True, slots=True)
class SubAgentPart:
    """A part of a sub-agent's stream, forwarded once with the path of the agent that emitted it."""

    agent_path: tuple[str, ...]
    part: StreamPart
    type: ClassVar[str] = "sub-agent"

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "agentPath": list(self.agent_path),
            "part": self.part.to_json(),
        }


@dataclass(frozen=True, slots=True)
class CostPart:
    """The run's cumulative price after a step (emitted when a price provider is set, R4.4)."""

    cost_usd: float
    delta_usd: float | None = None
    cache_savings_usd: float | None = None
    step_index: int | None = None
    type: ClassVar[str] = "cost"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "costUsd": self.cost_usd}
        _put(out, "deltaUsd", self.delta_usd)
        _put(out, "cacheSavingsUsd", self.cache_savings_usd)
        _put(out, "stepIndex", self.step_index)
        return out


@dataclass(frozen=True, slots=True)
class DataPart:
    """Application data in the stream (R4.1's ``data{name, payload}``); on the UI wire
    ``{"type": "data-<name>", "payload": …}``. The loop emits ``input-delivered`` when it
    delivers a queued input (:mod:`deuz_django.core.durable.inputs`)."""

    name: str
    payload: Any
    type: ClassVar[str] = "data"

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "name": self.name, "payload": self.payload}


@dataclass(frozen=True, slots=True)
class FinishPart:
    """The last part of a leg (also what a model emits at the end of its turn)."""

    finish_reason: FinishReason
    usage: Usage
    provider_metadata: dict[str, Any] | None = None
    type: ClassVar[str] = "finish"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.type,
            "usage": self.usage.to_json(),
            "finishReason": self.finish_reason,
        }
        _put(out, "providerMetadata", self.provider_metadata)
        return out


@dataclass(frozen=True, slots=True)
class ErrorPart:
    """A failure that ended the leg; nothing follows it."""

    error: BaseException
    type: ClassVar[str] = "error"

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "error": str(self.error) or type(self.error).__name__,
        }


StreamPart = (
    TextDeltaPart
    | ReasoningDeltaPart
    | ToolCallDeltaPart
    | ToolCallPart
    | ToolOutputPart
    | ToolApprovalRequestPart
    | ToolStatePart
    | StepStartPart
    | StepFinishPart
    | SubAgentPart
    | CostPart
    | DataPart
    | FinishPart
    | ErrorPart
)
