"""Delegations made and revoked, and the verdicts given under one: which delegation a
verdict uses, held in force while the verdict is written
(:mod:`deuz_django.approvals.verdicts` records them)."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Q, QuerySet
from django.utils import timezone

from .. import audit
from ..exceptions import NotPermitted
from ..models import Approval, Delegation
from ..models.audit import AuditAction
from ..models.visibility import Person
from ..permissions import decide_refusal, is_signed_in, lent_rights
from ..storage.db import bounded_atomic

CHANGE_DELEGATION = "deuz_django.change_delegation"


def delegation_used(
    approval: Approval, user: Person | None, *, approving: bool
) -> Delegation | None:
    """The delegation a verdict is given under: ``None`` when the user's own rights
    let them decide (or nobody's do, and the verdict's check refused it already)."""
    if not is_signed_in(user):
        return None
    if decide_refusal(user, approval, approving=approving) is None:
        return None
    return lent_rights(user, approval, approving=approving)


def hold_in_force(lent: Delegation) -> None:
    """In the verdict's transaction: the delegation is still in force, and stays so
    until the verdict is written (its row locked: a revocation waits for the verdict,
    or the verdict sees the revocation and is refused)."""
    if not Delegation.objects.select_for_update().active().filter(pk=lent.pk).exists():
        raise NotPermitted(
            f"The delegation from {lent.delegator.get_username()} was revoked or "
            "has ended; this verdict was not recorded."
        )


def delegate(
    delegator: Person,
    to: Person,
    *,
    ends_at: datetime,
    starts_at: datetime | None = None,
    note: str = "",
    made_by: Person | None = None,
    operator: str = "",
) -> Delegation:
    """Lend ``delegator``'s approval rights to ``to`` from ``starts_at`` (now) until
    ``ends_at`` — made by ``made_by`` (the delegator by default) or ``operator``, as the
    audit trail records. Raises :class:`ValueError` naming what is wrong: lending to oneself, to
    an inactive user, or a period that ends before it starts or is over already."""
    starts = starts_at or timezone.now()
    if to.pk == delegator.pk:
        raise ValueError("delegate: you cannot delegate to yourself")
    if not getattr(to, "is_active", False):
        raise ValueError("delegate: this user is not active")
    if ends_at <= timezone.now():
        raise ValueError("endsAt: this moment has passed")
    if ends_at <= starts:
        raise ValueError("endsAt: must be after startsAt")
    with bounded_atomic():
        made = Delegation.objects.create(
            delegator_id=delegator.pk,
            delegate_id=to.pk,
            starts_at=starts,
            ends_at=ends_at,
            note=note,
        )
        audit_delegation(made, "made", user=made_by or delegator, operator=operator)
    return made


def revoke(
    delegation: Delegation, *, by: Person | None = None, operator: str = ""
) -> bool:
    """Revoke ``delegation`` now (``False``: it was revoked already). The update locks
    its row, so a verdict holding it in force finishes first; every later one sees it
    revoked."""
    with bounded_atomic():
        revoked = Delegation.objects.filter(
            pk=delegation.pk, revoked_at__isnull=True
        ).update(revoked_at=timezone.now())
        delegation.refresh_from_db()
        if revoked:
            audit_delegation(delegation, "revoked", user=by, operator=operator)
    return bool(revoked)


def audit_delegation(
    delegation: Delegation, change: str, *, user: Person | None, operator: str = ""
) -> None:
    """A delegation made or revoked, in the audit trail (:mod:`deuz_django.audit`)."""
    audit.append(
        AuditAction.DELEGATION,
        user=user,
        operator=operator,
        details={
            "change": change,
            "delegation": delegation.pk,
            "delegator": delegation.delegator.get_username(),
            "delegate": delegation.delegate.get_username(),
            "startsAt": delegation.starts_at.isoformat(),
            "endsAt": delegation.ends_at.isoformat(),
            "note": delegation.note,
        },
    )


def may_revoke(user: Person | None, delegation: Delegation) -> bool:
    """Its delegator, or a user holding ``deuz_django.change_delegation``."""
    if not is_signed_in(user):
        return False
    return delegation.delegator_id == user.pk or user.has_perm(CHANGE_DELEGATION)


def delegations_of(user: Person) -> QuerySet[Delegation]:
    """The delegations ``user`` gave or received."""
    return Delegation.objects.filter(
        Q(delegator_id=user.pk) | Q(delegate_id=user.pk)
    ).select_related("delegator", "delegate")
