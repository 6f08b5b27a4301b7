"""Sub-agents: a whole tool loop behind one tool call (SPEC §9, D2, D8).

The child runs the streaming loop; its parts are forwarded to a streaming parent as
``sub-agent`` parts tagged with the child's agent path, and its usage is folded into the
parent's. Under a durable parent, the child checkpoints under its own run id,
``{parent_run_id}::{name}#{tool_call_id}`` (:func:`.durable.child_run_id`); a gated call
inside it suspends the child and the parent, and the verdicts given to the parent's resume
are forwarded down to settle it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from ._loop.engine import LoopRun
from ._loop.execution import SubAgentSuspension
from ._loop.options import LoopOptions
from .approvals import ToolApprovalRequest
from .durable._checkpointer import ResumePoint, load_best_effort
from .durable.checkpoint import AgentCheckpoint
from .durable.run_ids import child_run_id
from .durable.session import DurableSession
from .messages import Message
from .model import LanguageModel
from .parts import ErrorPart, SubAgentPart, ToolApprovalRequestPart
from .results import StepResult
from .stop import StopCondition
from .tools import (
    NeedsApproval,
    Tool,
    ToolArgumentsError,
    ToolContext,
    ToolSet,
    coerce_tools,
)
from .usage import EMPTY_USAGE, Usage, sum_usage

PROMPT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "prompt": {"type": "string", "description": "The task for the sub-agent."}
    },
    "required": ["prompt"],
    "additionalProperties": False,
}
NO_ANSWER = "(the sub-agent finished without a text answer)"


def _no_session_message(name: str) -> str:
    return (
        f"agentTool '{name}': a sub-agent tool call needs approval. Client-mode approval "
        "inside a sub-agent is not supported yet without a durable session — pass a "
        "server-mode approveToolCall on the parent call, or add `session` (1.5 durable "
        "sessions) so the run can suspend and resume."
    )


def _answer(steps: Sequence[StepResult]) -> str:
    """R9.6: the last step's text, else the latest earlier text, else a placeholder."""
    for step in reversed(steps):
        if step.text.strip():
            return step.text
    return NO_ANSWER


def _completed_answer(checkpoint: AgentCheckpoint) -> str:
    for message in reversed(checkpoint.messages):
        if message.role == "assistant" and message.text.strip():
            return message.text
    return NO_ANSWER


@dataclass(frozen=True, slots=True)
class _ChildStart:
    session: DurableSession | None = None
    checkpoint: AgentCheckpoint | None = None
    resume_point: ResumePoint | None = None
    uncounted: Usage = EMPTY_USAGE


async def _child_start(ctx: ToolContext, name: str) -> _ChildStart:
    """R9.3, R9.4 with D8: the child's key, and the checkpoint it continues from.

    ``uncounted`` is the child's checkpointed usage the parent has not counted yet. A call
    the model issued in this leg re-runs a step that a crash cut short, so the parent never
    saved the child's progress; a call replayed by settle was counted in the parent's
    suspended checkpoint.
    """
    if ctx.session is None or ctx.session.run_id is None:
        return _ChildStart()
    key = child_run_id(ctx.session.run_id, name, ctx.tool_call_id)
    session = DurableSession(ctx.session.store, key)
    existing = await load_best_effort(ctx.session.store, key, ctx.deps)
    if existing is None:
        return _ChildStart(session, None, ResumePoint(0, EMPTY_USAGE))
    uncounted = EMPTY_USAGE if ctx.resumed else existing.usage
    return _ChildStart(session, existing, ResumePoint.of(existing), uncounted)


def _validate_prompt(args: Any) -> dict[str, str]:
    if not isinstance(args, dict) or not isinstance(args.get("prompt"), str):
        raise ToolArgumentsError(["prompt: expected a string"])
    return {"prompt": args["prompt"]}


@dataclass(frozen=True, slots=True)
class _SubAgent:
    """What one ``agent_tool`` runs on each call: the child's model, prompt and limits."""

    name: str
    model: LanguageModel
    system: str | None
    tools: dict[str, Tool]
    max_steps: int
    max_depth: int
    forward_parts: bool
    stop_when: Sequence[StopCondition]

    async def execute(self, args: dict[str, str], ctx: ToolContext) -> str:
        """Run the child on ``args["prompt"]`` (or continue it, D8); its answer is the
        call's result, and its approvals suspend the parent."""
        path = self._path(ctx)
        start = await _child_start(ctx, self.name)
        if start.checkpoint is not None and start.checkpoint.status == "completed":
            ctx.report_usage(start.uncounted)
            return _completed_answer(start.checkpoint)  # D8: never restarted
        child = self._loop(args["prompt"], ctx, path, start)
        requests = await self._drain(child, ctx, path)
        result = child.result()
        ctx.report_usage(sum_usage(start.uncounted, result.usage))
        if requests:
            if start.session is None:
                raise RuntimeError(_no_session_message(self.name))
            raise SubAgentSuspension(requests)
        return _answer(result.steps)

    def _path(self, ctx: ToolContext) -> tuple[str, ...]:
        """The child's agent path; refused past ``max_depth``, so agents cannot nest
        without end."""
        path = (*ctx.agent_path, self.name)
        if len(path) > self.max_depth:
            raise RuntimeError(
                f"agentTool '{self.name}': max agent depth {self.max_depth} reached "
                f"({' > '.join(path)})."
            )
        return path

    def _loop(
        self, prompt: str, ctx: ToolContext, path: tuple[str, ...], start: _ChildStart
    ) -> LoopRun:
        """The child's leg: from its checkpoint's history when it has one, else from
        the prompt; it inherits the parent call's approvals, signal and deps."""
        if start.checkpoint is not None:
            messages = start.checkpoint.messages
        else:
            system = () if self.system is None else (Message("system", self.system),)
            messages = (*system, Message("user", prompt))
        return LoopRun(
            LoopOptions(
                model=self.model,
                messages=messages,
                tools=self.tools,
                max_steps=self.max_steps,
                stop_when=tuple(self.stop_when),
                approve_tool_call=ctx.approve_tool_call,
                approval_responses=ctx.approval_responses,
                approval_signer=ctx.approval_signer,
                approval_max_age_ms=ctx.approval_max_age_ms,
                signal=ctx.signal,
                session=start.session,
                deps=ctx.deps,
                agent_path=path,
                root_run_id=ctx.root_run_id,
                idempotency_scope=ctx.idempotency_key,
                resume_from=start.resume_point,
            )
        )

    async def _drain(
        self, child: LoopRun, ctx: ToolContext, path: tuple[str, ...]
    ) -> list[ToolApprovalRequest]:
        """Run the child to its end, forwarding its parts to a streaming parent (R9.5);
        the approvals it asked for, tagged with its path. Its error is the call's."""
        requests: list[ToolApprovalRequest] = []
        async for part in child.stream():
            if self.forward_parts and ctx.emit_part is not None:
                ctx.emit_part(
                    part if isinstance(part, SubAgentPart) else SubAgentPart(path, part)
                )
            if isinstance(part, ToolApprovalRequestPart):
                request = part.request
                if not request.agent_path:
                    request = replace(request, agent_path=path)
                requests.append(request)
            elif isinstance(part, ErrorPart):
                raise part.error
        return requests


def agent_tool(
    *,
    name: str,
    model: LanguageModel,
    description: str | None = None,
    system: str | None = None,
    tools: ToolSet | Sequence[Tool] | None = None,
    max_steps: int = 10,
    max_depth: int = 2,
    needs_approval: NeedsApproval = False,
    sub_agent_stream: Literal["full", "none"] = "full",
    stop_when: Sequence[StopCondition] = (),
    approval_permission: str | None = None,
) -> Tool:
    """A tool that runs a sub-agent on ``prompt`` and returns its final answer."""
    child_tools = coerce_tools(tools)
    sub_agent = _SubAgent(
        name=name,
        model=model,
        system=system,
        tools=child_tools,
        max_steps=max_steps,
        max_depth=max_depth,
        forward_parts=sub_agent_stream == "full",
        stop_when=stop_when,
    )
    return Tool(
        name=name,
        description=description,
        parameters=PROMPT_SCHEMA,
        execute=sub_agent.execute,
        validate=_validate_prompt,
        needs_approval=needs_approval,
        approval_permission=approval_permission,
        sub_tools=child_tools,
        # Safe to run again after a crash: the child run is durable under this call's
        # key, and its own step journal keeps its tools from repeating.
        idempotent=True,
    )
