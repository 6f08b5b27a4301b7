"""Pending approvals as AG-UI interrupts, and a resume's entries as our verdicts.

A suspended run ends its AG-UI run with ``RUN_FINISHED`` and an ``interrupt`` outcome
carrying one :class:`~ag_ui.core.Interrupt` per call it waits on. The interrupt's ``id``
is the approval id, ``toolCallId`` the call's, ``reason`` what is asked (``tool_call``:
may this call run; ``input_required``: a question's answer or a client tool's result;
``confirmation``: did a call a crash left in doubt happen), ``responseSchema`` the
payload a ``resolved`` answer carries, ``expiresAt`` the earlier of the row's deadline
and ``APPROVAL_MAX_AGE``, and ``metadata.deuz.token`` the call's signed token, which
the answer echoes in its own ``metadata.deuz.token``.

:func:`read_resume` holds the spec's contract for the next ``RunAgentInput``: every
open interrupt answered, nothing unknown or repeated, each payload valid against its
schema. The verdicts it returns go through the one verdict service
(:func:`deuz_django.services.record_verdicts`): permissions, token, audit trail.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import jsonschema
from ag_ui.core import Interrupt, ResumeEntry
from django.utils import timezone
from jsonschema.validators import validator_for

from ...api.exceptions import Conflict, InvalidRequest
from ...approvals.expiry import is_expired, max_age
from ...approvals.questions import question_of
from ...approvals.verdicts import RecordedResult, Verdict
from ...models import Approval, ApprovalKind, ApprovalStatus, Run
from ...permissions import is_editable
from ...services import current_pending

NAMESPACE = "deuz"  # our key in AG-UI metadata ("ag-ui" is the protocol's own)
CANCELLED_REASON = "Cancelled through AG-UI."
REASONS = {
    ApprovalKind.APPROVAL: "tool_call",
    ApprovalKind.QUESTION: "input_required",
    ApprovalKind.CLIENT_TOOL: "input_required",
    ApprovalKind.OUTCOME_UNKNOWN: "confirmation",
}
_DECISION = {
    "approved": {"type": "boolean"},
    "reason": {"type": "string", "maxLength": 2000},
}


def response_schema(approval: Approval) -> dict[str, Any]:
    """The JSON Schema of a ``resolved`` answer's payload for ``approval``."""
    properties: dict[str, Any]
    if approval.kind == ApprovalKind.QUESTION:
        question = question_of(approval)
        answer: dict[str, Any] = {"type": "string", "minLength": 1}
        if question is not None and question.choices is not None:
            answer = {"enum": list(question.choices)}
        elif question is not None and question.schema is not None:
            answer = question.schema
        properties, required = {"answer": answer}, ["answer"]
    elif approval.kind == ApprovalKind.CLIENT_TOOL:
        properties, required = {"result": {}}, ["result"]
    elif approval.kind == ApprovalKind.OUTCOME_UNKNOWN:
        properties, required = {**_DECISION, "result": {}}, ["approved"]
    else:
        properties, required = dict(_DECISION), ["approved"]
        if is_editable(approval):
            properties["editedArguments"] = {"type": "object"}
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def expires_at(approval: Approval) -> datetime | None:
    """When the call stops being decidable: its deadline or its maximum age."""
    age = max_age()
    moments = [approval.deadline_at, None if age is None else approval.created_at + age]
    return min((m for m in moments if m is not None), default=None)


def has_expired(approval: Approval) -> bool:
    moment = expires_at(approval)
    return is_expired(approval) or (moment is not None and moment <= timezone.now())


def interrupt_for(approval: Approval) -> Interrupt:
    question = question_of(approval)
    message = question.text if question is not None else None
    if message is None:
        message = f"May {approval.tool_name} run with this input?"
    moment = expires_at(approval)
    return Interrupt(
        id=approval.approval_id,
        reason=REASONS.get(ApprovalKind(approval.kind), "tool_call"),
        message=message,
        tool_call_id=approval.tool_call_id,
        response_schema=response_schema(approval),
        expires_at=None if moment is None else moment.isoformat(),
        metadata={
            NAMESPACE: {
                "token": approval.token,
                "toolName": approval.tool_name,
                "input": approval.input,
                "agentPath": approval.agent_path or [],
            }
        },
    )


def pending_interrupts(run: Run) -> list[Interrupt]:
    return [interrupt_for(a) for a in current_pending(run).order_by("id")]


@dataclass(frozen=True, slots=True)
class Resume:
    """What a resume asks: verdicts to record, or — the same resume again, every
    entry already recorded as it says — nothing to record (``replay``)."""

    verdicts: list[tuple[Approval, Verdict]]
    replay: bool = False

    @property
    def expired(self) -> list[Approval]:
        """Approvals answered ``resolved`` after they stopped being decidable."""
        return [a for a, v in self.verdicts if v.approved and has_expired(a)]


def read_resume(run: Run, entries: list[ResumeEntry]) -> Resume:
    """The verdicts ``entries`` give, once the spec's contract holds (else an API
    error naming the entry): each names an interrupt of this thread once, every open
    interrupt is answered, each payload matches its schema."""
    ids = [entry.interrupt_id for entry in entries]
    rows: dict[str, Approval] = {}
    for row in run.approvals.filter(approval_id__in=ids).newest_first():
        rows.setdefault(row.approval_id, row)
    for index, entry in enumerate(entries):
        if ids.index(entry.interrupt_id) != index:
            raise _invalid(index, "interruptId", "answers the same interrupt twice")
        if entry.interrupt_id not in rows:
            raise _invalid(index, "interruptId", "no interrupt with this id here")
    pending = {a.approval_id for a in current_pending(run)}
    verdicts = [
        (rows[entry.interrupt_id], _verdict(index, rows[entry.interrupt_id], entry))
        for index, entry in enumerate(entries)
    ]
    if not pending and all(_recorded_as(a, v) for a, v in verdicts):
        return Resume(verdicts, replay=True)
    unanswered = sorted(pending - set(ids))
    if unanswered:
        raise InvalidRequest(
            f"resume: every open interrupt needs an answer; {', '.join(unanswered)} "
            "has none. Nothing was recorded.",
            code="interrupts_unanswered",
            errors=[
                {"field": "resume", "message": f"no answer to {i}"} for i in unanswered
            ],
        )
    # Rows too old to decide are no longer pending, but still undecided: answering
    # one is the run error of an expired interrupt (Resume.expired), not a conflict.
    decided = [a.approval_id for a, _v in verdicts if not a.is_pending]
    if decided:
        raise Conflict(
            f"resume: {', '.join(decided)} was already decided otherwise. "
            "Nothing was recorded.",
            code="approval_already_decided",
        )
    return Resume(verdicts)


def _verdict(index: int, approval: Approval, entry: ResumeEntry) -> Verdict:
    token = _token(entry)
    if entry.status == "cancelled":
        return Verdict(approved=False, reason=CANCELLED_REASON, token=token)
    payload = entry.payload
    problem = _schema_problem(response_schema(approval), payload)
    if problem is not None:
        raise _invalid(index, "payload" + problem[0], problem[1])
    assert isinstance(payload, dict)  # the schema says so
    if approval.kind == ApprovalKind.QUESTION:
        return Verdict(approved=True, token=token, answer=payload["answer"])
    if approval.kind == ApprovalKind.CLIENT_TOOL:
        return Verdict(approved=True, token=token, answer=payload["result"])
    approved = payload["approved"]
    return Verdict(
        approved=approved,
        reason=payload.get("reason", ""),
        token=token,
        result=RecordedResult(payload["result"])
        if approved and "result" in payload
        else None,
        edited_input=payload.get("editedArguments") if approved else None,
    )


def _token(entry: ResumeEntry) -> str:
    envelope = (entry.metadata or {}).get(NAMESPACE)
    token = envelope.get("token") if isinstance(envelope, dict) else None
    return token if isinstance(token, str) else ""


def _schema_problem(schema: dict[str, Any], payload: Any) -> tuple[str, str] | None:
    validator = validator_for(schema)(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(payload))
    if error is None:
        return None
    where = "".join(f".{p}" for p in error.absolute_path)
    return where, error.message


def _recorded_as(approval: Approval, verdict: Verdict) -> bool:
    """Whether ``approval`` was decided as ``verdict`` says (an idempotent replay)."""
    wanted = ApprovalStatus.APPROVED if verdict.approved else ApprovalStatus.DENIED
    return approval.status in (wanted, ApprovalStatus.EXPIRED) and (
        not verdict.approved or approval.token == verdict.token
    )


def _invalid(index: int, field: str, problem: str) -> InvalidRequest:
    return InvalidRequest(
        f"resume[{index}].{field}: {problem}. Nothing was recorded.",
        code="invalid_resume",
        errors=[{"field": f"resume[{index}].{field}", "message": problem}],
    )
