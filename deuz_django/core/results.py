"""What a loop call returns: per-step records and the buffered result (SPEC R1.16, R3.9)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from .approvals import ToolApprovalRequest
from .messages import Message
from .tools import ToolCall, ToolResult
from .usage import FinishReason, Usage


@dataclass(frozen=True, slots=True, kw_only=True)
class StepResult:
    """One model call and what the loop did with it; ``usage`` is the model call's alone."""

    step_type: Literal["initial", "tool-result"]
    text: str
    reasoning_text: str | None
    tool_calls: tuple[ToolCall, ...]
    tool_results: tuple[ToolResult, ...]
    finish_reason: FinishReason
    usage: Usage
    response_messages: tuple[Message, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class GenerateTextResult:
    """The outcome of one leg.

    ``usage`` is this leg's (what the call cost); ``messages`` is the full history after the
    leg and ``response_messages`` only what this leg appended. ``pending_approvals`` is set
    when the run suspended on gated calls; ``run_id`` on durable calls.
    """

    text: str
    steps: tuple[StepResult, ...]
    usage: Usage
    finish_reason: FinishReason
    messages: tuple[Message, ...]
    response_messages: tuple[Message, ...]
    tool_calls: tuple[ToolCall, ...] | None = None
    tool_results: tuple[ToolResult, ...] | None = None
    pending_approvals: tuple[ToolApprovalRequest, ...] | None = None
    stopped_by: str | None = None
    run_id: str | None = None

    @property
    def provider_metadata(self) -> dict[str, Any] | None:
        """The reference's ``{"deuz": {"stoppedBy": ...}}``, present only when non-empty."""
        if self.stopped_by is None:
            return None
        return {"deuz": {"stoppedBy": self.stopped_by}}
