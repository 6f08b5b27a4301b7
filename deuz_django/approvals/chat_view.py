"""The one JSON question the chat component (``<deuz-chat>``) asks the server: which
approvals of a run are there, and which may the signed-in user decide?

``GET <approvals-url>`` (``deuz_django:chat-approvals``, ``runs/<run_id>/approvals/`` in
``deuz_django.urls``)::

    {"runId": "9f3c…", "approvals": [
      {"approvalId": "toolu_1", "kind": "approval", "toolName": "send_email",
       "status": "pending", "mayDecide": true, "refusal": null, "editable": false,
       "deadline": null, "secondsLeft": null, "escalateTo": null, "escalatedTo": null,
       "automatic": null}]}

The chat offers Approve / Deny (and "Approve and allow for this chat", and "Edit, then
approve" where ``editable``: the tool is, and the user holds the edit permission) only
where ``mayDecide`` is true; elsewhere (a
call only an approver with a permission may decide) it says the call waits for staff. An
approval of ``kind`` ``outcome_unknown`` is answered with "it happened", "run it again"
or "mark it failed"; one of ``kind`` ``question`` with the form its question asks for.
``automatic`` names the standing rule or grant that decided a call (``by``: ``rule`` or
``grant``), with a reason a customer can read: a grant is named without its run's id. A
pending call with a deadline says when (``secondsLeft``, by the server's clock) and what
then happens: ``escalateTo`` someone, or it times out.

Nobody signed in: 401; a run the user may not see: 404 (never "forbidden").
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.http import require_GET

from ..deadlines import escalation_label
from ..models import Approval, Grant, GrantScope, Run
from ..models.visibility import Person
from ..permissions import decide_refusal, edit_refusal, is_editable, is_signed_in


@require_GET
def run_approvals(request: HttpRequest, run_id: str) -> JsonResponse:
    """Each approval of a run the user sees, and whether the user may approve it."""
    if not is_signed_in(request.user):
        return JsonResponse(
            {"detail": "Sign in first.", "code": "not_authenticated"}, status=401
        )
    run = Run.objects.for_user(request.user).filter(run_id=run_id).first()
    if run is None:
        return JsonResponse({"detail": "No such run.", "code": "not_found"}, status=404)
    now = timezone.now()
    rows = run.approvals.select_related(
        "run", "decided_by_rule", "decided_by_grant__run", "decided_by_grant__owner"
    )
    approvals = []
    for approval in rows:
        refusal = decide_refusal(request.user, approval, approving=True)
        approvals.append(
            {
                "approvalId": approval.approval_id,
                "kind": approval.kind,
                "toolName": approval.tool_name,
                "status": approval.status,
                "mayDecide": refusal is None,
                "refusal": refusal,
                "editable": refusal is None and _editable(request.user, approval),
                **_deadline(approval, now),
                "automatic": _automatic(approval),
            }
        )
    return JsonResponse({"runId": run.run_id, "approvals": approvals})


def _editable(user: Person | None, approval: Approval) -> bool:
    """Whether ``user`` may approve the pending call with an input of their own."""
    return (
        approval.is_pending
        and is_editable(approval)
        and edit_refusal(user, approval) is None
    )


def _automatic(approval: Approval) -> dict[str, str] | None:
    """The rule or grant that decided the call. A grant's stored reason names its run by
    id (for the audit trail); the chat names the grant once, in words."""
    automatic = approval.automatic
    if automatic is None:
        return None
    if isinstance(automatic, Grant):
        label = grant_label(automatic)
        return {"by": "grant", "decider": label, "reason": f"Allowed by {label}."}
    return {"by": "rule", "decider": str(automatic), "reason": approval.reason}


def grant_label(grant: Grant) -> str:
    """``grant #3: send_email in this conversation`` — as a customer reads it."""
    if grant.scope == GrantScope.RUN:
        return f"grant #{grant.pk}: {grant.tool_name} in this conversation"
    return str(grant)


def _deadline(approval: Approval, now: datetime) -> dict[str, Any]:
    moment = approval.deadline_at if approval.is_pending else None
    return {
        "deadline": None if moment is None else moment.isoformat(),
        "secondsLeft": None
        if moment is None
        else max(0.0, (moment - now).total_seconds()),
        "escalateTo": escalation_label(approval.escalate_to)
        if approval.escalates
        else None,
        "escalatedTo": approval.escalated_to or None,
    }
