"""Votes on a call that needs several approvals: who may vote at the stage being asked,
and the vote itself — written in the verdict's transaction, then counted under the
call's row lock, so of two approvers completing a quorum at the same instant exactly
one decides the call (and the run resumes once).

A vote that completes its stage moves the call to the next stage (its deadline then
counts from now) or, at the last stage, lets :func:`~deuz_django.approvals.verdicts.
record_verdict` write the approval; a denial vetoes at once unless the stage says
``veto=False`` (then a stage's ``quorum`` denials deny the call). An operator override
and a timeout decide the call outright; standing rules and grants never approve a call
of a chain (:mod:`deuz_django.rules.automatic`).
"""

from __future__ import annotations

from typing import Any, Protocol

from django.db.models import QuerySet
from django.utils import timezone

from ..approvals.audit_trail import audit_vote
from ..core.exceptions import DeuzError
from ..deadlines.rows import deadline_fields
from ..exceptions import ApprovalAlreadyDecided
from ..models import Approval, ApprovalKind, ApprovalStatus, ApprovalVote, Delegation
from ..models.visibility import Person, is_signed_in
from ..registry import agent_chains
from . import ApprovalChain, Stage


def chain_of(approval: Approval) -> ApprovalChain | None:
    """The chain ``approval`` is decided through (``None``: one verdict decides it)."""
    if approval.kind != ApprovalKind.APPROVAL:
        return None  # questions, client tools and calls in doubt: one person answers
    try:
        find = agent_chains(approval.run.agent)
    except (LookupError, DeuzError):
        return None
    return find(approval.tool_name, approval.agent_path or ())


def among_approvers(person: Person, stage: Stage) -> bool:
    """Whether ``person`` is one of the stage's approvers (a group member, or a
    holder of the permission)."""
    kind, name = stage.approvers.split(":", 1)
    if kind == "perm":
        return bool(person.has_perm(name))
    groups: Any = getattr(person, "groups", None)
    return groups is not None and groups.filter(name=name).exists()


def vote_refusal(
    user: Person, approval: Approval, chain: ApprovalChain, *, lent: Delegation | None
) -> str | None:
    """Why ``user`` may not vote on ``approval`` now (``None``: they may): the rights
    used (the delegator's, under a delegation) must be among the stage's approvers,
    and one person votes once on a call, whatever its stages."""
    stage = chain.stage(approval.stage)
    rights = lent.delegator if lent is not None else user
    if not among_approvers(rights, stage):
        return (
            f"Stage {approval.stage + 1} of {len(chain.stages)} of this call is "
            f"decided by {stage.label}."
        )
    if approval.votes.filter(voter_id=user.pk).exists():
        return "You have voted on this call already; it needs someone else."
    return None


class Ballot(Protocol):
    """What a vote carries (a verdict's fields)."""

    @property
    def approved(self) -> bool: ...

    @property
    def reason(self) -> str: ...

    @property
    def edited_input(self) -> Any: ...


def chain_refusal(
    user: Person | None,
    approval: Approval,
    ballot: Ballot,
    *,
    lent: Delegation | None,
) -> str | None:
    """Why ``user`` may not give this verdict on a call of a chain (``None``: they
    may, or the call has no chain). The run's owner may always deny their own call;
    an approval is given on the call as asked (an edit would bind only its voter)."""
    chain = chain_of(approval)
    if chain is None or not is_signed_in(user):
        return None
    if not ballot.approved and approval.run.owner_id == user.pk:
        return None
    if ballot.approved and ballot.edited_input is not None:
        return "A call that needs several approvals is approved as asked, not edited."
    return vote_refusal(user, approval, chain, lent=lent)


def cast(
    approval: Approval,
    user: Person | None,
    chain: ApprovalChain,
    ballot: Ballot,
    lent: Delegation | None = None,
) -> bool:
    """Record ``user``'s vote (inside the verdict's transaction) and say whether it
    decides the call: ``True`` when the last stage's quorum is reached or a veto
    denies it; otherwise the call stays pending (at its next stage, if this vote
    completed one). Raises :class:`ApprovalAlreadyDecided` when the call was decided,
    or moved on to another stage, since it was read."""
    assert is_signed_in(user)  # a chain is only for a person's verdict
    stage_index = approval.stage
    vote = ApprovalVote.objects.create(
        approval=approval,
        stage=stage_index,
        voter_id=user.pk,
        on_behalf_of=None if lent is None else lent.delegator,
        approved=ballot.approved,
        reason=ballot.reason,
        edited_input=ballot.edited_input,
    )
    approved = ballot.approved
    row = Approval.objects.select_for_update().get(pk=approval.pk)
    if row.status != ApprovalStatus.PENDING or row.stage != stage_index:
        raise ApprovalAlreadyDecided(
            f"Approval {row.approval_id} moved on ({row.status}, stage "
            f"{row.stage + 1}) while this vote was given; decide it again."
        )
    stage = chain.stage(stage_index)
    if not approved and stage.veto:
        return True
    if _votes(row, stage_index, approved).count() >= stage.quorum:
        if not approved or stage_index + 1 >= len(chain.stages):
            return True  # the call's decision is recorded (and audited) next
        _ask_next_stage(row, chain.stage(stage_index + 1))
        approval.stage = row.stage
    audit_vote(row, vote)  # the last write of the act (deuz_django.audit)
    return False


def _votes(row: Approval, stage: int, approved: bool) -> QuerySet[ApprovalVote]:
    return row.votes.filter(stage=stage, approved=approved)


def _ask_next_stage(row: Approval, stage: Stage) -> None:
    """Move the call on to ``stage``: its deadline (when it has one) counts from now,
    its reminder and escalation are to come again."""
    row.stage += 1
    fields = ["stage"]
    if stage.deadline is not None:
        for name, value in deadline_fields(stage.deadline, timezone.now()).items():
            setattr(row, name, value)
            fields.append(name)
        row.reminded_at = row.escalated_at = None
        fields += ["reminded_at", "escalated_at"]
    row.save(update_fields=fields)
