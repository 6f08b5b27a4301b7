"""Approvals at organization scale: a call that needs M approvals from distinct people
(a quorum), in ordered stages (team lead, then finance), each stage with its own
approvers, quorum and deadline.

    refunds = ApprovalChain(
        Stage("group:Team leads"),
        Stage("perm:shop.approve_refund", quorum=2, deadline=Deadline(after=timedelta(hours=4))),
    )
    AgentSpec(model=model, tools=[issue_refund], approval_chains={"issue_refund": refunds})

Stage 2 is asked only once stage 1 has its approvals; a denial at any stage denies the
call (``veto=False``: a stage denies only with ``quorum`` denials); one person approves
once in a chain. The votes are :class:`~deuz_django.models.ApprovalVote` rows, recorded
by :mod:`deuz_django.quorum.voting`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..deadlines import Deadline
from ..exceptions import InvalidApprovalChain

APPROVERS = re.compile(r"perm:\w+\.\w+|group:\S.*")


@dataclass(frozen=True, slots=True)
class Stage:
    """One stage of a chain: ``quorum`` approvals from distinct people among
    ``approvers`` (``"perm:<app_label.codename>"`` or ``"group:<name>"``), within
    ``deadline`` of the stage being asked (the call's own deadline when ``None``)."""

    approvers: str
    quorum: int = 1
    deadline: Deadline | None = None
    veto: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.approvers, str) or not APPROVERS.fullmatch(
            self.approvers
        ):
            raise InvalidApprovalChain(
                "Stage.approvers: expected 'perm:<app_label.codename>' or "
                f"'group:<name>', got {self.approvers!r}"
            )
        if not isinstance(self.quorum, int) or isinstance(self.quorum, bool):
            raise InvalidApprovalChain(
                f"Stage.quorum: expected a whole number, got {self.quorum!r}"
            )
        if self.quorum < 1:
            raise InvalidApprovalChain(
                f"Stage.quorum: expected at least 1, got {self.quorum}"
            )
        if self.deadline is not None and not isinstance(self.deadline, Deadline):
            raise InvalidApprovalChain(
                f"Stage.deadline: expected a Deadline, got {self.deadline!r}"
            )

    @property
    def label(self) -> str:
        """``Team leads`` for ``group:Team leads``; the permission otherwise."""
        return self.approvers.split(":", 1)[1]


class ApprovalChain:
    """Ordered stages; a call is approved when its last stage is."""

    __slots__ = ("stages",)

    def __init__(self, *stages: Stage) -> None:
        if not stages:
            raise InvalidApprovalChain("ApprovalChain: give at least one Stage")
        if not all(isinstance(stage, Stage) for stage in stages):
            raise InvalidApprovalChain("ApprovalChain: expected Stage objects")
        self.stages: Sequence[Stage] = stages

    def __repr__(self) -> str:
        return f"ApprovalChain{tuple(self.stages)!r}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ApprovalChain) and self.stages == other.stages

    def __hash__(self) -> int:
        return hash(tuple(self.stages))

    def stage(self, index: int) -> Stage:
        return self.stages[min(index, len(self.stages) - 1)]


__all__ = ["ApprovalChain", "Stage"]
