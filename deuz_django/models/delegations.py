"""Delegation: a person lends their approval rights to another for a period (out of
office). The rules that use it are in :mod:`deuz_django.permissions`; a decision made
on one records it (``Approval.decided_on_behalf_of``, ``Approval.delegation``)."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class DelegationQuerySet(models.QuerySet["Delegation"]):
    def active(self, at: datetime | None = None) -> DelegationQuerySet:
        """Delegations in force at ``at`` (now): started, not ended, not revoked."""
        moment = at or timezone.now()
        return self.filter(
            revoked_at__isnull=True, starts_at__lte=moment, ends_at__gt=moment
        )


class Delegation(models.Model):
    """``delegator`` lends ``delegate`` their own right to decide approvals from
    ``starts_at`` until ``ends_at`` — or until it is revoked, which takes effect at
    once. Only the delegator's own rights pass: what others delegated to them does not
    (a delegate cannot re-delegate), and the delegate still sees only the runs they may
    see."""

    delegator = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="deuz_delegations_given",
    )
    delegate = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="deuz_delegations_received",
    )
    starts_at = models.DateTimeField(default=timezone.now)
    ends_at = models.DateTimeField()
    note = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = DelegationQuerySet.as_manager()

    class Meta:
        ordering = ("-created_at", "-pk")
        verbose_name = _("delegation")
        constraints = (
            models.CheckConstraint(
                condition=~Q(delegator=F("delegate")),
                name="deuz_delegation_not_to_oneself",
            ),
            models.CheckConstraint(
                condition=Q(ends_at__gt=F("starts_at")),
                name="deuz_delegation_ends_after_it_starts",
            ),
        )
        indexes = (
            models.Index(
                fields=("delegate", "ends_at"), name="deuz_delegation_in_force"
            ),
        )

    def __str__(self) -> str:
        return str(
            _("%(delegator)s → %(delegate)s")
            % {
                "delegator": self.delegator.get_username(),
                "delegate": self.delegate.get_username(),
            }
        )

    @property
    def in_force(self) -> bool:
        now = timezone.now()
        return self.revoked_at is None and self.starts_at <= now < self.ends_at
