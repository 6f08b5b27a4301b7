"""The votes of a call that needs several approvals (:mod:`deuz_django.quorum`): one row
a person's approval or denial at a stage; the call's own row is decided once a stage's
quorum — or a veto — says so."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from .approvals import Approval


class ApprovalVote(models.Model):
    """``voter`` approved (or denied) ``approval`` at ``stage``; ``on_behalf_of`` when a
    delegation lent the rights. One vote a person and call: a person approves once in a
    chain, however many stages it has."""

    approval = models.ForeignKey(
        Approval, on_delete=models.CASCADE, related_name="votes"
    )
    stage = models.PositiveSmallIntegerField()
    voter = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    on_behalf_of = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    approved = models.BooleanField()
    reason = models.TextField(blank=True)
    edited_input = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("created_at", "pk")
        verbose_name = _("approval vote")
        constraints = (
            models.UniqueConstraint(
                fields=("approval", "voter"), name="deuz_one_vote_a_person_and_call"
            ),
        )

    def __str__(self) -> str:
        verb = _("approved") if self.approved else _("denied")
        return f"{self.voter} {verb} ({self.stage + 1})"
