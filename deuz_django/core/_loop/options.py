"""What one leg of the loop is given: the validated call options and where it resumes from."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..abort import AbortSignal
from ..approvals import ApprovalSignerLike, ToolApprovalResponse
from ..deps import Deps
from ..durable._checkpointer import ResumePoint
from ..durable.session import DurableSession, SessionStore
from ..messages import Message
from ..model import LanguageModel, ToolChoice
from ..stop import StopCondition
from ..tools import ServerApprover, Tool
from ..usage import Usage


@dataclass(frozen=True, slots=True, kw_only=True)
class PrepareStepInfo:
    """What ``prepare_step`` sees: ``step_index`` and ``usage`` count the whole run."""

    step_index: int
    messages: tuple[Message, ...]
    usage: Usage


@dataclass(frozen=True, slots=True, kw_only=True)
class StepOverrides:
    """What ``prepare_step`` may change: ``messages`` for this and later steps, the rest
    for this step only."""

    messages: Sequence[Message | dict[str, Any]] | None = None
    active_tools: Sequence[str] | None = None
    tool_choice: ToolChoice | None = None
    model: LanguageModel | None = None


PrepareStep = Callable[
    [PrepareStepInfo], StepOverrides | Awaitable[StepOverrides | None] | None
]


@dataclass(frozen=True, slots=True)
class ResumeSource:
    """Resume lazily from the store: the checkpoint is loaded when the leg starts (R7.4)."""

    store: SessionStore
    run_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopOptions:
    """One leg's options. ``single_turn`` is the R2.1 routing of a tool-less public call;
    sub-agents and resume legs always run the loop."""

    model: LanguageModel
    messages: tuple[Message, ...]
    tools: dict[str, Tool]
    single_turn: bool = False
    max_steps: int = 1
    stop_when: tuple[StopCondition, ...] = ()
    prepare_step: PrepareStep | None = None
    approve_tool_call: ServerApprover | None = None
    approval_responses: tuple[ToolApprovalResponse, ...] | None = None
    approval_signer: ApprovalSignerLike | None = None
    approval_max_age_ms: float | None = None
    max_tool_concurrency: int = 5
    signal: AbortSignal | None = None
    session: DurableSession | None = None
    deps: Deps = field(default_factory=Deps)
    agent_path: tuple[str, ...] = ()
    root_run_id: str | None = None
    resume_from: ResumePoint | None = None
    resume_source: ResumeSource | None = None
