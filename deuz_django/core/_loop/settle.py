"""Settle-on-resume: the verdicts of a resume answer the trailing unanswered tool calls
before the first model call (SPEC §5.4, §5.5, R10.9, D4, D10)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..abort import AbortSignal
from ..approvals import ApprovalSignerLike, ToolApprovalResponse
from ..durable.signer import token_problem
from ..messages import Message, ToolResultPart, ToolUsePart
from ..questions import question_of
from ..tools import Tool, ToolCall
from .approval import (
    CLIENT_TOOL_REASON,
    CONFLICT_REASON,
    NO_ANSWER_REASON,
    NO_RESPONSE_REASON,
    TOKEN_DENIAL_REASON,
    Denial,
    is_client_tool,
    is_gated,
)


@dataclass(frozen=True, slots=True)
class SettlePlan:
    """The unanswered calls of the trailing assistant turn, which of them are denied,
    the input a person edited approved calls to, the answers people gave to questions
    and the recorded decisions approved calls run on (all by call id)."""

    calls: tuple[ToolCall, ...]
    denials: dict[str, Denial]
    edits: dict[str, dict[str, Any]] = field(default_factory=dict)
    answers: dict[str, Any] = field(default_factory=dict)
    decisions: dict[str, str] = field(default_factory=dict)

    def executed_calls(self) -> tuple[ToolCall, ...]:
        """The calls as they run: an edited one with its edited input (and the model's
        input kept as ``edited_from``, so its result says a person changed it), an
        answered question with its answer, an approved one with its decision."""
        return tuple(
            ToolCall(
                c.tool_call_id,
                c.tool_name,
                self.edits.get(c.tool_call_id, c.args),
                c.args if c.tool_call_id in self.edits else None,
                self.answers.get(c.tool_call_id),
                self.decisions.get(c.tool_call_id),
            )
            for c in self.calls
        )


def _edit_refusal(tools: Mapping[str, Tool], call: ToolCall, edited: Any) -> str | None:
    """The denial reason when ``edited`` may not replace ``call``'s input (checked again
    here, fail closed: :meth:`Tool.edit_problems`)."""
    declared = tools.get(call.tool_name)
    problems = (
        declared.edit_problems(edited)
        if declared is not None
        else (f"the input of {call.tool_name} calls may not be edited",)
    )
    return f"Invalid edited input: {'; '.join(problems)}" if problems else None


def waiting_client_calls(
    history: Sequence[Message], tools: Mapping[str, Tool]
) -> tuple[ToolCall, ...]:
    """The calls of client tools (tools without ``execute``) that a suspended run's
    history waits on. A verdict on one — ``{"approvalId": <its call id>, "approved":
    True, "answer": <its result>}`` — gives it its real result on resume (D11)."""
    return tuple(
        c
        for c in unanswered_calls(tuple(history))
        if is_client_tool(tools, c.tool_name)
    )


def _answer_refusal(
    tools: Mapping[str, Tool], call: ToolCall, answer: Any
) -> str | None:
    """Why ``answer`` does not answer ``call``'s question (checked again here, fail
    closed): the call must be a question tool's, and the answer must fit its question."""
    question = question_of(tools.get(call.tool_name), call.args)
    if question is None:
        return f"{call.tool_name} calls ask no question."
    problem = question.problem(answer)
    return None if problem is None else f"Invalid answer: {problem}"


def unanswered_calls(history: tuple[Message, ...]) -> tuple[ToolCall, ...]:
    """R5.10 steps 2–3: the trailing assistant turn's tool calls that have no result yet."""
    answered: set[str] = set()
    for message in reversed(history):
        if message.role == "tool":
            if not isinstance(message.content, str):
                answered.update(
                    p.tool_use_id
                    for p in message.content
                    if isinstance(p, ToolResultPart)
                )
            continue
        if message.role != "assistant" or isinstance(message.content, str):
            return ()
        return tuple(
            ToolCall(p.id, p.name, p.input)
            for p in message.content
            if isinstance(p, ToolUsePart) and p.id not in answered
        )
    return ()


def _verdicts_by_id(
    responses: Sequence[ToolApprovalResponse],
) -> dict[str, ToolApprovalResponse]:
    """R5.10.4 with D10: a repeated id keeps the last verdict, conflicting ones deny."""
    by_id: dict[str, ToolApprovalResponse] = {}
    conflicting: set[str] = set()
    for response in responses:
        previous = by_id.get(response.approval_id)
        if previous is not None and previous.approved != response.approved:
            conflicting.add(response.approval_id)
        by_id[response.approval_id] = response
    for approval_id in conflicting:
        by_id[approval_id] = ToolApprovalResponse(
            approval_id=approval_id,
            approved=False,
            reason=CONFLICT_REASON,
        )
    return by_id


async def plan_settle(
    history: tuple[Message, ...],
    responses: Sequence[ToolApprovalResponse],
    tools: Mapping[str, Tool],
    *,
    signer: ApprovalSignerLike | None,
    max_age_ms: float | None,
    bound_run_id: str | None,
    signal: AbortSignal | None,
) -> SettlePlan | None:
    """Decide every unanswered call of the trailing assistant turn (R5.10 steps 4–6)."""
    calls = unanswered_calls(history)
    if not calls:
        return None
    by_id = _verdicts_by_id(responses)
    denials: dict[str, Denial] = {}
    edits: dict[str, dict[str, Any]] = {}
    answers: dict[str, Any] = {}
    for call in calls:
        call_id = call.tool_call_id
        verdict = by_id.get(call_id)
        client = is_client_tool(tools, call.tool_name)
        if verdict is None:
            if client:
                denials[call_id] = Denial(CLIENT_TOOL_REASON)
            elif await is_gated(tools, call, history, signal):
                denials[call_id] = Denial(NO_RESPONSE_REASON)
        elif client and verdict.approved and verdict.answer is not None:
            # D11: the client's real result (no token: no request was ever signed).
            answers[call_id] = verdict.answer
        else:
            denial = _denial(
                call,
                verdict,
                tools,
                signer=signer,
                max_age_ms=max_age_ms,
                bound_run_id=bound_run_id,
            )
            if denial is not None:
                denials[call_id] = denial
            elif verdict.edited_input is not None:
                edits[call_id] = verdict.edited_input
            elif verdict.answer is not None:
                answers[call_id] = verdict.answer
    return SettlePlan(calls, denials, edits, answers, _decisions(calls, by_id, denials))


def _denial(
    call: ToolCall,
    verdict: ToolApprovalResponse,
    tools: Mapping[str, Tool],
    *,
    signer: ApprovalSignerLike | None,
    max_age_ms: float | None,
    bound_run_id: str | None,
) -> Denial | None:
    """Why ``verdict`` does not let ``call`` run (``None``: it runs): it denies it, its
    token does not check out (R10.9), its edited input or its answer do not fit, or it
    gives a question tool's call no answer."""
    if not verdict.approved:
        return Denial(verdict.reason)
    if signer is not None and (
        token_problem(
            verdict.token,
            call,
            signer=signer,
            run_id=bound_run_id,
            max_age_ms=max_age_ms,
        )
        is not None
    ):
        return Denial(TOKEN_DENIAL_REASON)
    if verdict.edited_input is not None:
        problem = _edit_refusal(tools, call, verdict.edited_input)
    elif verdict.answer is not None:
        problem = _answer_refusal(tools, call, verdict.answer)
    elif question_of(tools.get(call.tool_name), call.args) is not None:
        problem = NO_ANSWER_REASON
    else:
        problem = None
    return None if problem is None else Denial(problem)


def _decisions(
    calls: Sequence[ToolCall],
    by_id: Mapping[str, ToolApprovalResponse],
    denials: Mapping[str, Denial],
) -> dict[str, str]:
    """The recorded decision each approved, undenied call runs on (by call id)."""
    return {
        call_id: verdict.decision_id
        for call_id in (c.tool_call_id for c in calls)
        if call_id not in denials
        and (verdict := by_id.get(call_id)) is not None
        and verdict.approved
        and verdict.decision_id is not None
    }
