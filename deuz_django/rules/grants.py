""" "Approve, and allow this tool": the grant an approving verdict may carry.

``{"scope": "run"}`` allows the tool's later calls (at the same agent path) for the rest
of the run; ``{"scope": "owner", "hours": 8}`` in the run owner's runs of the same agent
for that many hours (at most ``DEUZ["GRANT_MAX_HOURS"]``). The grant is written with the
verdict, in its transaction, and decides later calls with its maker's rights
(:mod:`deuz_django.rules.automatic`). A tool the run's owner may not approve
(``approval_by_owner=False``) is never allowed for the owner's runs: that would let the
owner's own runs approve themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from .. import audit
from ..conf import deuz_settings
from ..core.exceptions import DeuzError
from ..models import Approval, ApprovalKind, Grant
from ..models.audit import AuditAction
from ..models.rules import GrantScope
from ..models.visibility import Person
from ..permissions import approval_tool


@dataclass(frozen=True, slots=True)
class Allow:
    """What an approving verdict allows beyond its own call."""

    scope: str  # a GrantScope
    hours: int | None = None


def max_hours() -> int:
    return int(deuz_settings.GRANT_MAX_HOURS)


def allow_problem(
    approval: Approval, approved: bool, allow: Allow
) -> tuple[str, str] | None:
    """Why ``allow`` may not go with this verdict, as the field at fault (``allow`` or
    ``allow.hours``) and the problem; ``None`` when it may."""
    if not approved:
        return "allow", "only an approving verdict may allow further calls"
    if approval.kind != ApprovalKind.APPROVAL:
        return "allow", "only a gated call's approval may allow further calls"
    if allow.scope == GrantScope.RUN:
        if allow.hours is not None:
            return (
                "allow.hours",
                "only with the owner scope (a run's grant lasts the run)",
            )
        return None
    if allow.hours is None or not 1 <= allow.hours <= max_hours():
        return "allow.hours", f"give a whole number of hours from 1 to {max_hours()}"
    if approval.run.owner_id is None:
        return "allow", "the run has no owner whose runs could be allowed"
    try:
        tool = approval_tool(approval)
    except DeuzError as error:
        problem = (
            f"the rules for {approval.tool_name} calls cannot be read now: {error}"
        )
        return "allow", problem
    if tool is not None and not tool.approval_by_owner:
        return "allow", (
            f"{approval.tool_name} calls may not be allowed for the owner's runs: "
            "the owner may not approve them (separation of duties); allow them for "
            "this run instead"
        )
    return None


def record_grant(approval: Approval, user: Person | None, allow: Allow) -> Grant:
    """The grant an accepted ``allow`` makes, attributed to ``user`` and ``approval``
    (:func:`audit_grant` records it, after the verdict)."""
    run = approval.run
    owner_wide = allow.scope == GrantScope.OWNER
    grant = Grant.objects.create(
        tool_name=approval.tool_name,
        agent=run.agent,
        agent_path=list(approval.agent_path or []),
        scope=allow.scope,
        run=None if owner_wide else run,
        owner_id=run.owner_id if owner_wide else None,
        approval=approval,
        created_by_id=None if user is None else user.pk,
        expires_at=timezone.now() + timedelta(hours=allow.hours or 0)
        if owner_wide
        else None,
    )
    return grant


def audit_grant(grant: Grant, approval: Approval, user: Person | None) -> None:
    """The grant made with ``approval``'s verdict, in the audit trail."""
    audit.append(
        AuditAction.GRANT,
        user=user,
        run_id=approval.run.run_id,
        approval_id=approval.approval_id,
        details={
            "grant": grant.pk,
            "tool": grant.tool_name,
            "agent": grant.agent,
            "scope": grant.scope,
            "expiresAt": None
            if grant.expires_at is None
            else grant.expires_at.isoformat(),
        },
    )
