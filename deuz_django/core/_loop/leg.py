"""What one leg has produced so far: history, steps, usage and outcome (SPEC R3.9, R4.3)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..approvals import ToolApprovalRequest
from ..messages import Message
from ..parts import FinishPart
from ..results import GenerateTextResult, StepResult
from ..tools import ToolCall, ToolResult
from ..usage import EMPTY_USAGE, FinishReason, Usage, sum_usage, with_total
from .turn import Turn


@dataclass(slots=True)
class LegRecord:
    """The leg's growing record; ``history`` is always a new tuple, never mutated (R3.3).

    ``usage`` is this leg's alone (model calls plus what sub-agents reported);
    ``finish_reason`` is the last step's, ``"stop"`` before any.
    """

    history: tuple[Message, ...]
    usage: Usage = EMPTY_USAGE
    steps: list[StepResult] = field(default_factory=list)
    response_messages: list[Message] = field(default_factory=list)
    pending: tuple[ToolApprovalRequest, ...] | None = None
    stopped_by: str | None = None
    finish_reason: FinishReason = "stop"

    def append(self, message: Message) -> None:
        self.history = (*self.history, message)
        self.response_messages.append(message)

    def add_usage(self, usage: Usage) -> None:
        self.usage = sum_usage(self.usage, usage)

    def record(
        self,
        turn: Turn,
        calls: tuple[ToolCall, ...],
        results: tuple[ToolResult, ...],
        response: tuple[Message, ...],
    ) -> None:
        self.steps.append(
            turn.step_result(
                first=not self.steps, calls=calls, results=results, response=response
            )
        )

    def finish_part(self) -> FinishPart:
        """R4.3: the leg's usage with its total; ``stoppedBy`` only when a stop fired."""
        metadata = {"deuz": {"stoppedBy": self.stopped_by}} if self.stopped_by else None
        return FinishPart(self.finish_reason, with_total(self.usage), metadata)

    def result(self, run_id: str | None) -> GenerateTextResult:
        """R3.9: the buffered result of the leg."""
        last_tool_step = next((s for s in reversed(self.steps) if s.tool_calls), None)
        return GenerateTextResult(
            text=self.steps[-1].text if self.steps else "",
            steps=tuple(self.steps),
            usage=with_total(self.usage),
            finish_reason=self.finish_reason,
            messages=self.history,
            response_messages=tuple(self.response_messages),
            tool_calls=last_tool_step.tool_calls if last_tool_step else None,
            tool_results=last_tool_step.tool_results if last_tool_step else None,
            pending_approvals=self.pending,
            stopped_by=self.stopped_by,
            run_id=run_id,
        )
