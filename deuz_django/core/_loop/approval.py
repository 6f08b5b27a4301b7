"""Approval gating and signing (SPEC §5.1–§5.3, R5.7, D2).

The verdicts of a resume are applied in :mod:`.settle`; their tokens are checked by the
public :func:`~deuz_django.core.durable.token_problem` (R10.9, D4).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from .._awaitable import resolve
from ..abort import AbortSignal
from ..approvals import ApprovalSignerLike, ToolApprovalRequest
from ..deps import Deps
from ..messages import Message
from ..questions import question_of
from ..tools import NeedsApprovalContext, ServerApprover, Tool, ToolCall
from .options import LoopOptions

TOKEN_DENIAL_REASON = (
    "Approval token missing, invalid, expired, or bound to another run."
)
NO_RESPONSE_REASON = "No approval response."
CLIENT_TOOL_REASON = "No result provided for this client tool."
CONFLICT_REASON = "Conflicting verdicts for one approval."


@dataclass(frozen=True, slots=True)
class Denial:
    """A call that will not run; ``reason`` (if any) reaches the model and the UI verbatim."""

    reason: str | None = None


NO_ANSWER_REASON = "No answer was given to the question."


def is_client_tool(tools: Mapping[str, Tool], name: str) -> bool:
    """A real client tool is a declared tool without ``execute`` (R5.4) — and not a
    question tool, whose answer comes with its verdict."""
    declared = tools.get(name)
    return (
        declared is not None and declared.execute is None and declared.question is None
    )


def is_question(tools: Mapping[str, Tool], name: str) -> bool:
    declared = tools.get(name)
    return declared is not None and declared.question is not None


async def is_gated(
    tools: Mapping[str, Tool],
    call: ToolCall,
    messages: tuple[Message, ...],
    signal: AbortSignal | None,
) -> bool:
    """R5.1: a predicate that raises gates the call (the safe side)."""
    declared = tools.get(call.tool_name)
    if declared is None:
        return False
    if declared.question is not None:
        return True  # a question always waits for its person
    if declared.needs_approval is False:
        return False
    if declared.needs_approval is True:
        return True
    context = NeedsApprovalContext(
        tool_call_id=call.tool_call_id, messages=messages, signal=signal
    )
    try:
        return bool(await resolve(declared.needs_approval(call.args, context)))
    except Exception:
        return True


async def server_denials(
    approver: ServerApprover, gated: Sequence[ToolCall], messages: tuple[Message, ...]
) -> dict[str, Denial]:
    """R5.2: ``False`` or an exception denies, with no reason."""
    denials: dict[str, Denial] = {}
    for call in gated:
        try:
            approved = bool(await resolve(approver(call, messages)))
        except Exception:
            approved = False
        if not approved:
            denials[call.tool_call_id] = Denial()
    return denials


async def gate(
    calls: Sequence[ToolCall],
    tools: Mapping[str, Tool],
    messages: tuple[Message, ...],
    signal: AbortSignal | None,
    approver: ServerApprover | None,
) -> tuple[dict[str, Denial], list[ToolCall]]:
    """One step's gate: server mode decides the gated calls now (their denials run as
    results); client mode returns them as pending (R5.1–R5.3). A question is pending in
    both modes: only a person answers it."""
    if not any(
        (declared := tools.get(c.tool_name)) is not None
        and (declared.needs_approval or declared.question is not None)
        for c in calls
    ):
        return {}, []  # the fast path: nothing declares needs_approval or a question
    gated = [c for c in calls if await is_gated(tools, c, messages, signal)]
    if approver is None:
        return {}, gated
    questions = [c for c in gated if is_question(tools, c.tool_name)]
    if questions:
        return {}, questions
    return await server_denials(approver, gated, messages), []


def pending_requests(
    calls: Sequence[ToolCall],
    agent_path: tuple[str, ...],
    tools: Mapping[str, Tool],
) -> tuple[ToolApprovalRequest, ...]:
    """One request per call; a question tool's call carries its question."""
    return tuple(
        ToolApprovalRequest(
            approval_id=call.tool_call_id,
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            input=call.args,
            agent_path=agent_path or None,
            question=question_of(tools.get(call.tool_name), call.args),
        )
        for call in calls
    )


def sign_requests(
    requests: tuple[ToolApprovalRequest, ...],
    signer: ApprovalSignerLike | None,
    run_id: str | None,
    deps: Deps,
) -> tuple[ToolApprovalRequest, ...]:
    """R5.7: best-effort — a failing signer sends the requests unsigned (they will deny)."""
    if signer is None or not requests:
        return requests
    try:
        return tuple(replace(r, token=signer.sign(r, run_id)) for r in requests)
    except Exception as error:
        deps.logger.error(
            "approval signing failed — requests go out unsigned", extra={"error": error}
        )
        return requests


def signed_requests(
    calls: Sequence[ToolCall],
    options: LoopOptions,
    tools: Mapping[str, Tool],
    run_id: str | None,
    deps: Deps,
) -> tuple[ToolApprovalRequest, ...]:
    """One request per call, from the loop's agent, signed for ``run_id`` (R5.7)."""
    return sign_requests(
        pending_requests(calls, options.agent_path, tools),
        options.approval_signer,
        run_id,
        deps,
    )
