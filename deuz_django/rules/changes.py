"""Changing standing rules and revoking grants, each with its audit record in the same
transaction (:mod:`deuz_django.audit`): a rule saved (made or changed), switched off or
deleted is a *rule change*, a grant revoked a *grant revoked*. The admin changes rules
and grants only through these."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from .. import audit
from ..models.audit import AuditAction
from ..models.rules import Grant, StandingRule
from ..models.visibility import Person
from ..storage.db import bounded_atomic


def save_rule(rule: StandingRule, user: Person, *, created: bool) -> None:
    """Save ``rule`` as ``user``'s: it decides with their rights from now on."""
    with bounded_atomic():
        rule.created_by = user  # type: ignore[assignment]  # a user of the user model
        rule.save()
        _audit_rule(rule, user, "created" if created else "changed")


def switch_off_rules(rules: QuerySet[StandingRule], user: Person) -> int:
    """Switch the active ones of ``rules`` off; how many."""
    with bounded_atomic():
        chosen = StandingRule.objects.filter(pk__in=_pks(rules), active=True)
        active = list(chosen.select_for_update())
        StandingRule.objects.filter(pk__in=[r.pk for r in active]).update(
            active=False, updated_at=timezone.now()
        )
        for rule in active:
            rule.active = False
            _audit_rule(rule, user, "switched off")
    return len(active)


def delete_rules(rules: QuerySet[StandingRule], user: Person) -> None:
    """Delete ``rules``; each deletion is recorded with what the rule was."""
    with bounded_atomic():
        deleted = list(rules)
        StandingRule.objects.filter(pk__in=[r.pk for r in deleted]).delete()
        for rule in deleted:  # the audit records last (audit.append says why)
            _audit_rule(rule, user, "deleted")


def revoke_grants(grants: QuerySet[Grant], user: Person) -> int:
    """Revoke the grants of ``grants`` still unrevoked; how many."""
    with bounded_atomic():
        chosen = Grant.objects.filter(pk__in=_pks(grants), revoked_at=None)
        live = list(chosen.select_for_update(of=("self",)).select_related("run"))
        Grant.objects.filter(pk__in=[g.pk for g in live]).update(
            revoked_at=timezone.now(), revoked_by=user
        )
        for grant in live:
            audit.append(
                AuditAction.GRANT_REVOKED,
                user=user,
                run_id=grant.run.run_id if grant.run else "",
                details={
                    "grant": grant.pk,
                    "tool": grant.tool_name,
                    "scope": grant.scope,
                },
            )
    return len(live)


def _pks(rows: QuerySet[Any]) -> list[Any]:
    """The rows' keys (the admin's querysets are annotated: no ``FOR UPDATE`` there)."""
    return list(rows.values_list("pk", flat=True))


def _audit_rule(rule: StandingRule, user: Person, change: str) -> None:
    audit.append(
        AuditAction.RULE_CHANGE,
        user=user,
        details={"change": change, "rule": rule.pk, **_rule_fields(rule)},
    )


def _rule_fields(rule: StandingRule) -> dict[str, Any]:
    return {
        "tool": rule.tool_name,
        "agent": rule.agent,
        "condition": rule.condition,
        "action": rule.action,
        "reason": rule.reason,
        "active": rule.active,
        "expiresAt": None if rule.expires_at is None else rule.expires_at.isoformat(),
    }
