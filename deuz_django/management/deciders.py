"""Who decides when ``deuz resume`` records verdicts: a user named with ``--as``, under the
permission rules every other surface applies, or an operator override (``--operator``),
which skips the user rules — never the token check — and is recorded as such."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from .. import services
from ..exceptions import ApprovalNotFound, NotPermitted
from ..models import Approval
from ..models.visibility import Person
from ..quorum.progress import progress_of
from .output import BAD_ARGUMENTS, NOT_PERMITTED


class ShellDecider:
    """Records the verdicts of one ``resume``: as a user under the permission rules, or
    as an operator override. A refusal ends the command, and the caller's transaction
    takes back what was recorded before it."""

    def __init__(self, user: Person | None, operator: str) -> None:
        self.user = user
        self.operator = operator.strip()
        # Calls that need more approvals than this one (deuz_django.quorum): how far
        # each has got, for the command to say instead of resuming.
        self.votes: list[str] = []

    @classmethod
    def named(
        cls, *, as_user: str | None, operator: str | None, recorded: str
    ) -> ShellDecider:
        """The decider ``--as USERNAME`` or ``--operator NAME`` names; a blank NAME is
        bad arguments (``recorded`` says where the name would have been kept)."""
        if operator is not None and not operator.strip():
            raise CommandError(
                f"--operator needs a name, {recorded}.", returncode=BAD_ARGUMENTS
            )
        return cls(_get_user(as_user) if as_user else None, operator or "")

    def decide(self, approval: Approval, approved: bool, reason: str) -> None:
        if self.user is None:
            services.record_operator_verdict(
                approval, operator=self.operator, approved=approved, reason=reason
            )
            return
        name = self.user.get_username()
        call = f"{approval.tool_name} ({approval.approval_id})"
        try:
            decision = services.decide_approval(
                approval, user=self.user, approved=approved, reason=reason
            )
        except ApprovalNotFound:
            refused = f"{name} may not see run '{approval.run.run_id}'."
        except NotPermitted as error:
            refused = (
                f"{name} may not {'approve' if approved else 'deny'} {call}: {error}"
            )
        else:
            progress = progress_of(decision.approval)
            if progress is not None:
                self.votes.append(f"{call}: {progress.summary}")
            return
        raise CommandError(f"{refused} Nothing was recorded.", returncode=NOT_PERMITTED)


def _get_user(username: str) -> Any:
    model = get_user_model()
    user = model._default_manager.filter(**{model.USERNAME_FIELD: username}).first()
    if user is None:
        raise CommandError(f"No user '{username}'.", returncode=BAD_ARGUMENTS)
    if not user.is_active:
        raise CommandError(
            f"User '{username}' is not active; inactive users decide nothing.",
            returncode=NOT_PERMITTED,
        )
    return user
