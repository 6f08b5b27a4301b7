"""Approval requests and verdicts: data, never exceptions (SPEC R1.15)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from . import _jsjson as jsjson
from ._kept import keep
from .exceptions import InvalidInputError
from .questions import Question


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolApprovalRequest:
    """A gated tool call waiting for a verdict; ``agent_path`` names the asking sub-agent.
    The call of a question tool carries its ``question`` (JSON key ``question``, after
    ``input``; absent otherwise, so an approval's JSON is the reference's).

    One read with :meth:`from_json` writes back the object it was read from, unknown keys
    included, so it signs as the reference signs it (R10.2: every own key).
    """

    approval_id: str
    tool_call_id: str
    tool_name: str
    input: Any
    agent_path: tuple[str, ...] | None = None
    token: str | None = None
    question: Question | None = None
    _json: dict[str, Any] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def to_json(self) -> dict[str, Any]:
        """The JSON form, keys in the reference's order (the signer's payload depends on it)."""
        if self._json is not None:
            return dict(self._json)
        out: dict[str, Any] = {
            "approvalId": self.approval_id,
            "toolCallId": self.tool_call_id,
            "toolName": self.tool_name,
            "input": self.input,
        }
        if self.question is not None:
            out["question"] = self.question.to_json()
        if self.agent_path:
            out["agentPath"] = list(self.agent_path)
        if self.token is not None:
            out["token"] = self.token
        return out

    @classmethod
    def from_json(cls, data: Any, *, path: str = "approval") -> ToolApprovalRequest:
        if isinstance(data, ToolApprovalRequest):
            return data
        if not isinstance(data, dict):
            raise InvalidInputError(f"{path}: expected an object")
        for key in ("approvalId", "toolCallId", "toolName"):
            if not isinstance(data.get(key), str):
                raise InvalidInputError(f"{path}.{key}: expected a string")
        agent_path = data.get("agentPath")
        if agent_path is not None and (
            not isinstance(agent_path, list)
            or not all(isinstance(p, str) for p in agent_path)
        ):
            raise InvalidInputError(f"{path}.agentPath: expected a list of strings")
        token = data.get("token")
        if token is not None and not isinstance(token, str):
            raise InvalidInputError(f"{path}.token: expected a string")
        question = data.get("question")
        request = cls(
            approval_id=data["approvalId"],
            tool_call_id=data["toolCallId"],
            tool_name=data["toolName"],
            input=data.get("input"),
            agent_path=tuple(agent_path) if agent_path else None,
            token=token,
            question=None
            if question is None
            else Question.from_json(question, path=f"{path}.question"),
        )
        return keep(request, dict(data))


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolApprovalResponse:
    """A verdict on one approval; an approving verdict echoes the request's signed token.

    ``edited_input`` (only when approving a call of an ``editable`` tool) is the input a
    person changed the call to: the token still pins the model's call, the tool runs with
    the edited input, and its result tells the model so (:func:`edited_result`).
    ``answer`` (only when approving the call of a question tool) is a person's answer:
    checked against the question on resume, it becomes the call's result.
    ``decision_id`` names the recorded decision behind the verdict (JSON ``decisionId``;
    an extension of ours, absent from the reference's JSON): the call it approves runs
    on that decision, and a step journal that keeps decisions lets each authorize one
    execution only (:class:`~deuz_django.core.durable.Authorization`).
    ``agent_path`` (JSON ``agentPath``, also ours) names the sub-agent whose call the
    verdict answers (``()``: the root's): a verdict that names one settles only that
    agent's calls, so two agents that both number a call ``call_0`` are never confused.
    Without it a verdict answers its id wherever it stands, as the reference's does.
    """

    approval_id: str
    approved: bool
    reason: str | None = None
    token: str | None = None
    edited_input: dict[str, Any] | None = None
    answer: Any = None
    decision_id: str | None = None
    agent_path: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "approvalId": self.approval_id,
            "approved": self.approved,
        }
        if self.reason is not None:
            out["reason"] = self.reason
        if self.token is not None:
            out["token"] = self.token
        if self.edited_input is not None:
            out["editedInput"] = self.edited_input
        if self.answer is not None:
            out["answer"] = self.answer
        if self.decision_id is not None:
            out["decisionId"] = self.decision_id
        if self.agent_path is not None:
            out["agentPath"] = list(self.agent_path)
        return out

    def answers_agent(self, agent_path: tuple[str, ...]) -> bool:
        """Whether the verdict may settle a call of the agent at ``agent_path``."""
        return self.agent_path is None or self.agent_path == agent_path

    @classmethod
    def from_json(
        cls, data: Any, *, path: str = "approval_response"
    ) -> ToolApprovalResponse:
        """Accept the JSON form (``approvalId``) or Python keywords (``approval_id``)."""
        if isinstance(data, ToolApprovalResponse):
            return data
        if not isinstance(data, dict):
            raise InvalidInputError(f"{path}: expected an object")
        approval_id = data.get("approvalId", data.get("approval_id"))
        if not isinstance(approval_id, str) or not approval_id:
            raise InvalidInputError(f"{path}.approvalId: expected a non-empty string")
        approved = data.get("approved")
        if not isinstance(approved, bool):
            raise InvalidInputError(f"{path}.approved: expected a boolean")
        reason = data.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise InvalidInputError(f"{path}.reason: expected a string")
        token = data.get("token")
        if token is not None and not isinstance(token, str):
            # The token's value is never echoed back (R12.1).
            raise InvalidInputError(f"{path}.token: expected a string")
        edited = data.get("editedInput", data.get("edited_input"))
        if edited is not None and not isinstance(edited, dict):
            raise InvalidInputError(f"{path}.editedInput: expected an object")
        decision = data.get("decisionId", data.get("decision_id"))
        if decision is not None and not isinstance(decision, str):
            raise InvalidInputError(f"{path}.decisionId: expected a string")
        agent_path = data.get("agentPath", data.get("agent_path"))
        if agent_path is not None and (
            not isinstance(agent_path, list | tuple)
            or not all(isinstance(p, str) for p in agent_path)
        ):
            raise InvalidInputError(f"{path}.agentPath: expected a list of strings")
        return cls(
            approval_id=approval_id,
            approved=approved,
            reason=reason,
            token=token,
            edited_input=edited,
            answer=data.get("answer"),
            decision_id=decision,
            agent_path=None if agent_path is None else tuple(agent_path),
        )


def input_digest(value: Any) -> str:
    """The SHA-256 of a call's input as canonical JSON — keys sorted, numbers as
    JavaScript writes them, so ``5.0`` and ``5`` (what a checkpoint's round trip makes
    of it) are one input: what a decision records of the input a person saw, and what a
    call about to run is compared with."""
    return hashlib.sha256(jsjson.dumps(_sorted(value)).encode()).hexdigest()


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sorted(value[key]) for key in sorted(value)}
    if isinstance(value, list | tuple):
        return [_sorted(item) for item in value]
    return value


EDITED_NOTE = (
    "A person changed this call's arguments before approving it; it ran with "
    "editedInput instead of the arguments you gave."
)


def edited_result(value: Any, edited_input: dict[str, Any]) -> dict[str, Any]:
    """What the model is told of a call a person edited: the tool's result, the input it
    really ran with, and a note saying so — the conversation stays truthful."""
    return {"result": value, "editedInput": edited_input, "note": EDITED_NOTE}


def coerce_approval_responses(
    responses: Iterable[ToolApprovalResponse | dict[str, Any]] | None,
) -> tuple[ToolApprovalResponse, ...] | None:
    if responses is None:
        return None
    if isinstance(responses, dict | str):
        raise InvalidInputError("approval_responses: expected a list of verdicts")
    return tuple(
        ToolApprovalResponse.from_json(item, path=f"approval_responses[{i}]")
        for i, item in enumerate(responses)
    )


class ApprovalSignerLike(Protocol):
    """What the loop needs of a signer (see ``durable.create_approval_signer``)."""

    def sign(self, request: ToolApprovalRequest, run_id: str | None = None) -> str: ...

    def verify(
        self, token: object, max_age_ms: float | None = None
    ) -> dict[str, Any] | None: ...
