"""A recorded verdict in the audit trail (:mod:`deuz_django.audit`), written by
:mod:`.verdicts` in the verdict's own transaction: a *decision* (approved, denied, or
expired because it came too late), an *edit* (approved with an edited input), an
*answer* (a question or client tool's call answered), a *timeout* (nobody decided in
time), or a *vote* on a call that needs several approvals (:mod:`deuz_django.quorum`).
The record is read from the row as written, so it says what was recorded."""

from __future__ import annotations

from typing import Any

from .. import audit
from ..models import Approval, ApprovalKind, ApprovalStatus, ApprovalVote
from ..models.audit import AuditAction
from ..models.visibility import Person

_ANSWERED = (ApprovalKind.QUESTION, ApprovalKind.CLIENT_TOOL)


def audit_verdict(approval: Approval, user: Person | None, *, timeout: bool) -> None:
    """Append the verdict just written on ``approval`` (re-read in this transaction)
    by ``user`` — nobody's when it expired or timed out."""
    by_system = timeout or approval.status == ApprovalStatus.EXPIRED
    audit.append(
        _action(approval, timeout),
        user=None if by_system else user,
        operator=approval.operator,
        run_id=approval.run.run_id,
        approval_id=approval.approval_id,
        details=_details(approval),
    )


def _action(approval: Approval, timeout: bool) -> str:
    if timeout:
        return AuditAction.TIMEOUT
    if approval.status != ApprovalStatus.APPROVED:
        return AuditAction.DECISION
    if approval.kind in _ANSWERED:
        return AuditAction.ANSWER
    if approval.kind == ApprovalKind.APPROVAL and approval.edited_input is not None:
        return AuditAction.EDIT
    return AuditAction.DECISION


def _details(approval: Approval) -> dict[str, Any]:
    details: dict[str, Any] = {
        "tool": approval.tool_name,
        "kind": approval.kind,
        "status": approval.status,
        "reason": approval.reason,
    }
    if approval.agent_path:
        details["agentPath"] = list(approval.agent_path)
    if approval.edited_input is not None:
        details["input"] = approval.input
        details["editedInput"] = approval.edited_input
    if approval.answer is not None:
        details["answer"] = approval.answer
    if approval.decided_by_rule_id is not None:
        details["rule"] = approval.decided_by_rule_id
    if approval.decided_by_grant_id is not None:
        details["grant"] = approval.decided_by_grant_id
    if approval.decided_on_behalf_of is not None:
        details["onBehalfOf"] = approval.decided_on_behalf_of.get_username()
        details["delegation"] = approval.delegation_id
    return details


def audit_vote(approval: Approval, vote: ApprovalVote) -> None:
    """Append a vote that left the call pending (it needs more approvals, or a next
    stage); the vote that decides the call is its decision's record."""
    details: dict[str, Any] = {
        "tool": approval.tool_name,
        "stage": vote.stage + 1,
        "approved": vote.approved,
        "reason": vote.reason,
    }
    if vote.on_behalf_of is not None:
        details["onBehalfOf"] = vote.on_behalf_of.get_username()
    audit.append(
        AuditAction.VOTE,
        user=vote.voter,
        run_id=approval.run.run_id,
        approval_id=approval.approval_id,
        details=details,
    )
