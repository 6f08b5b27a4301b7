"""The audit trail: one append-only row for every decision, edit, answer, grant, rule
change, stop, fork, replay, input and recovery, hash-chained per tenant
(:mod:`deuz_django.audit` appends and verifies).

Each record's ``digest`` is the SHA-256 of its fields and the ``previous_digest`` (the
digest of the record before it in its tenant's chain), so changing, deleting or
reordering a row breaks the chain where it happened. The rows name their run, approval
and actor as text — never a foreign key — so pruning a run or deleting a user changes
nothing in them. :class:`AuditChainHead` is the chain's end per tenant: the row an
append locks, so two appends at the same instant still make one line.
"""

from __future__ import annotations

from typing import Any, NoReturn

from django.db import models
from django.utils.translation import gettext_lazy as _

GENESIS = "0" * 64  # the "previous digest" of a tenant's first record


class AuditAction(models.TextChoices):
    DECISION = "decision", _("decision")
    EDIT = "edit", _("edit")
    ANSWER = "answer", _("answer")
    TIMEOUT = "timeout", _("timeout")
    GRANT = "grant", _("grant")
    GRANT_REVOKED = "grant_revoked", _("grant revoked")
    RULE_CHANGE = "rule_change", _("rule change")
    STOP = "stop", _("stop")
    FORK = "fork", _("fork")
    REPLAY = "replay", _("replay")
    INPUT = "input", _("input")
    RECOVERY = "recovery", _("recovery")
    VOTE = "vote", _("vote")
    DELEGATION = "delegation", _("delegation")


class AppendOnly(Exception):
    """An audit record was about to be changed or deleted."""


class AuditRecordQuerySet(models.QuerySet["AuditRecord"]):
    """Reads only: a bulk ``update`` or ``delete`` of audit records is refused."""

    def update(self, **kwargs: Any) -> NoReturn:
        raise AppendOnly("Audit records are append-only: they are never updated.")

    def delete(self) -> NoReturn:
        raise AppendOnly("Audit records are append-only: they are never deleted.")

    def in_chain_order(self) -> AuditRecordQuerySet:
        return self.order_by("tenant", "sequence")


class AuditRecord(models.Model):
    """One audited act: its place in its tenant's chain, what happened, who did it (a
    user, kept by id and name, or an ``operator`` named in a shell; neither: the
    system), on which run and approval, the details, and the chain's two digests."""

    # Tenants come later (the default tenant is ""): each has a chain of its own.
    tenant = models.CharField(_("tenant"), max_length=100, blank=True, default="")
    sequence = models.PositiveBigIntegerField(_("sequence"))
    created_at = models.DateTimeField(_("when"))
    action = models.CharField(_("action"), max_length=20, choices=AuditAction.choices)
    # The user's primary key as text (whatever the user model's key is).
    actor_id = models.CharField(_("actor id"), max_length=255, blank=True)
    actor_name = models.CharField(_("actor"), max_length=150, blank=True)
    operator = models.CharField(_("operator"), max_length=150, blank=True)
    run_id = models.CharField(_("run"), max_length=255, blank=True, db_index=True)
    approval_id = models.CharField(_("approval"), max_length=255, blank=True)
    details = models.JSONField(_("details"), default=dict, blank=True)
    previous_digest = models.CharField(_("previous digest"), max_length=64)
    digest = models.CharField(_("digest"), max_length=64)

    objects = AuditRecordQuerySet.as_manager()

    class Meta:
        ordering = ["tenant", "sequence"]
        default_permissions = ("view",)
        verbose_name = _("audit record")
        verbose_name_plural = _("audit records")
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "sequence"], name="deuz_audit_position"
            )
        ]
        indexes = [models.Index(fields=["created_at"], name="deuz_audit_when")]

    def __str__(self) -> str:
        where = f"{self.tenant}#" if self.tenant else "#"
        return f"{where}{self.sequence} {self.action}"

    @property
    def actor(self) -> str:
        """Who acted, for people: the user's name, an operator, or the system."""
        if self.operator:
            return f"{self.operator} (operator)"
        return self.actor_name or str(_("the system"))

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise AppendOnly(
                f"Audit record {self} is append-only: it is never saved again."
            )
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise AppendOnly(f"Audit record {self} is append-only: it is never deleted.")


class AuditChainHead(models.Model):
    """The end of one tenant's chain: its last sequence and digest. Every append
    updates it first, which locks it until the append's transaction ends."""

    tenant = models.CharField(max_length=100, unique=True, blank=True, default="")
    sequence = models.PositiveBigIntegerField(default=0)
    digest = models.CharField(max_length=64, default=GENESIS)

    class Meta:
        default_permissions = ()

    def __str__(self) -> str:
        return f"audit chain {self.tenant or '(default)'} at {self.sequence}"
