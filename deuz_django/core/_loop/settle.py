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
        verdict = by_id.get(call.tool_call_id)
        client = is_client_tool(tools, call.tool_name)
        if (
            client
            and verdict is not None
            and verdict.approved
            and verdict.answer is not None
        ):
            # D11: the client's real result (no token: no request was ever signed).
            answers[call.tool_call_id] = verdict.answer
        elif verdict is not None:
            if not verdict.approved:
                denials[call.tool_call_id] = Denial(verdict.reason)
            elif signer is not None and (
                token_problem(
                    verdict.token,
                    call,
                    signer=signer,
                    run_id=bound_run_id,
                    max_age_ms=max_age_ms,
                )
                is not None
            ):
                denials[call.tool_call_id] = Denial(TOKEN_DENIAL_REASON)
            elif verdict.edited_input is not None:
                problem = _edit_refusal(tools, call, verdict.edited_input)
                if problem is None:
                    edits[call.tool_call_id] = verdict.edited_input
                else:
                    denials[call.tool_call_id] = Denial(problem)
            elif verdict.answer is not None:
                problem = _answer_refusal(tools, call, verdict.answer)
                if problem is None:
                    answers[call.tool_call_id] = verdict.answer
                else:
                    denials[call.tool_call_id] = Denial(problem)
            elif question_of(tools.get(call.tool_name), call.args) is not None:
                denials[call.tool_call_id] = Denial(NO_ANSWER_REASON)
        elif client:
            denials[call.tool_call_id] = Denial(CLIENT_TOOL_REASON)
        elif await is_gated(tools, call, history, signal):
            denials[call.tool_call_id] = Denial(NO_RESPONSE_REASON)
    decisions = {
        call_id: verdict.decision_id
        for call_id in (c.tool_call_id for c in calls)
        if call_id not in denials
        and (verdict := by_id.get(call_id)) is not None
        and verdict.approved
        and verdict.decision_id is not None
    }
    return SettlePlan(calls, denials, edits, answers, decisions)
