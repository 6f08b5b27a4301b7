"""How far a call of an approval chain has got, for people: "1 of 2 approvals" at which
stage, who approved, and who may still — what the queue, the API and the chat show."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Q
from django.utils.translation import gettext as _

from ..models import Approval, ApprovalStatus
from .voting import chain_of

# Who may still approve is listed up to this many people (a big group says "and more").
MAY_STILL_LISTED = 10


@dataclass(frozen=True, slots=True)
class Progress:
    """A chained call's votes at its current stage (``stage`` from 1)."""

    stage: int
    stages: int
    needed: int
    approvals: tuple[tuple[str, str | None], ...]  # (voter, on behalf of)
    approvers: str
    may_still: tuple[str, ...]

    @property
    def summary(self) -> str:
        """``1 of 2 approvals`` (``· stage 2 of 2`` for a chain of stages)."""
        text = _("%(got)d of %(needed)d approvals") % {
            "got": len(self.approvals),
            "needed": self.needed,
        }
        if self.stages > 1:
            text += " · " + _("stage %(stage)d of %(stages)d") % {
                "stage": self.stage,
                "stages": self.stages,
            }
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "stages": self.stages,
            "needed": self.needed,
            "approvals": [
                {"by": by, "onBehalfOf": behalf} for by, behalf in self.approvals
            ],
            "approvers": self.approvers,
            "mayStill": list(self.may_still),
            "summary": self.summary,
        }


def progress_of(approval: Approval) -> Progress | None:
    """The chained call's progress while it is pending (``None``: not chained, or
    decided — its decider says the rest)."""
    if approval.status != ApprovalStatus.PENDING:
        return None
    chain = chain_of(approval)
    if chain is None:
        return None
    stage = chain.stage(approval.stage)
    votes = approval.votes.filter(stage=approval.stage, approved=True).select_related(
        "voter", "on_behalf_of"
    )
    approvals = tuple(
        (
            vote.voter.get_username(),
            vote.on_behalf_of.get_username() if vote.on_behalf_of else None,
        )
        for vote in votes
    )
    return Progress(
        stage=approval.stage + 1,
        stages=len(chain.stages),
        needed=stage.quorum,
        approvals=approvals,
        approvers=stage.label,
        may_still=_may_still(approval, stage.approvers),
    )


def _may_still(approval: Approval, approvers: str) -> tuple[str, ...]:
    """Active people among the stage's approvers who have not voted on the call."""
    kind, name = approvers.split(":", 1)
    users = get_user_model()._default_manager.filter(is_active=True)
    if kind == "group":
        users = users.filter(groups__name=name)
    else:
        app_label, codename = name.split(".", 1)
        held = Q(
            user_permissions__content_type__app_label=app_label,
            user_permissions__codename=codename,
        ) | Q(
            groups__permissions__content_type__app_label=app_label,
            groups__permissions__codename=codename,
        )
        users = users.filter(held | Q(is_superuser=True))
    voted = approval.votes.values("voter_id")
    names = users.exclude(pk__in=voted).distinct().order_by("pk")
    field = get_user_model().USERNAME_FIELD
    return tuple(str(n) for n in names.values_list(field, flat=True)[:MAY_STILL_LISTED])
