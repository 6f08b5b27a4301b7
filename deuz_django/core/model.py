"""The ``LanguageModel`` protocol: one streaming call per step, nothing provider-specific out.

A model receives a :class:`ModelRequest` and yields events, which are a subset of the
canonical stream parts:

- :class:`~deuz_django.core.parts.TextDeltaPart` and ``ReasoningDeltaPart`` as text arrives;
- :class:`~deuz_django.core.parts.ToolCallDeltaPart` for streamed tool calls (the first delta
  of a call carries its ``name``; arguments are concatenated and parsed once at the end), or
  a complete :class:`~deuz_django.core.parts.ToolCallPart`;
- one :class:`~deuz_django.core.parts.FinishPart` with the call's usage and finish reason.

Failures are raised (subclasses of :class:`~deuz_django.core.exceptions.ModelError`); the
loop turns them into an ``error`` part or a raised error. When the caller's signal aborts,
the loop cancels the pending event and closes the stream (``aclose``): a model's generator
must release its transport in ``finally`` (``request.signal`` is there for models that
want to notice sooner).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from .abort import AbortSignal
from .messages import Message
from .parts import (
    FinishPart,
    ReasoningDeltaPart,
    TextDeltaPart,
    ToolCallDeltaPart,
    ToolCallPart,
)

ModelEvent = (
    TextDeltaPart | ReasoningDeltaPart | ToolCallDeltaPart | ToolCallPart | FinishPart
)


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """What the model is told about a tool: its name, purpose and JSON Schema."""

    name: str
    description: str | None
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ForcedTool:
    """``tool_choice`` that forces one named tool."""

    tool_name: str


ToolChoice = Literal["auto", "none", "required"] | ForcedTool


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRequest:
    messages: tuple[Message, ...]
    tools: tuple[ToolDefinition, ...] = ()
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool = True
    signal: AbortSignal | None = None


@runtime_checkable
class LanguageModel(Protocol):
    """Anything with a ``model_id`` and a ``stream(request)`` async iterator of events."""

    @property
    def model_id(self) -> str: ...

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]: ...
