"""Verdicts on approval rows: the one check that says whether a verdict may be recorded,
and the one write that records it (:mod:`deuz_django.approvals.settling` turns the rows into the
approval responses a run's next leg settles with).

Every surface — the admin, the REST API, the WebSocket consumer, the ``deuz`` command —
asks :func:`check_verdict` (the REST API for a whole batch before it records any of it)
and records with :func:`record_verdict`; :func:`decide` does both for one verdict. The
check, in order: a signed-in user who may see the run, who may decide this call (the
permission and separation-of-duties rules of :mod:`deuz_django.permissions`), an
approval still pending and not too old, and — for an approval — a token that verifies,
pins exactly this call on this run and is young enough (:func:`token_refusal`, the same
check the resume-time settle makes). A decided row never changes again: every write is
an ``UPDATE`` conditional on the row still being ``pending`` — a call whose deadline
passed too (:func:`record_timeout`), so a verdict racing the deadline either wins or
is refused.

An ``outcome_unknown`` approval (a call a crash left in doubt) takes one of three
answers through the same check and write: approving with a ``result`` ("it happened")
records that result as the call's outcome in the step journal, so the next leg uses it
without executing the call; approving without one ("run it again") clears the call's
start, so it runs; denying ("mark it failed") answers it with an error.

Edit, then approve: an approving verdict on a call of an ``editable`` tool may carry an
``edited_input``. It needs the edit permission (:func:`~deuz_django.permissions.
edit_refusal`) and must pass the tool's schema; the token still pins the model's call, so
an edit never changes which tool runs. The row keeps both inputs; the next leg runs the
tool with the edited one and tells the model so.

Questions for a person: an approving verdict on a ``question`` row carries the
``answer``, checked against the row's question (:mod:`deuz_django.approvals.questions`) before
anything is written; the row keeps it, and the next leg makes it the call's result.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q
from django.utils import timezone

from ..core.durable.codec import encode_json
from ..core.exceptions import DeuzError
from ..exceptions import (
    ApprovalAlreadyDecided,
    ApprovalExpired,
    ApprovalNotFound,
    InvalidVerdict,
    NotPermitted,
)
from ..models import Approval, ApprovalKind, ApprovalStatus, Grant
from ..models.rules import StandingRule
from ..models.visibility import Person
from ..permissions import (
    can_view_run,
    decide_refusal,
    edit_refusal,
    is_signed_in,
    lent_rights,
)
from ..quorum.voting import cast, chain_of, chain_refusal
from ..rules.grants import Allow, allow_problem, audit_grant, record_grant
from ..storage.db import bounded_atomic
from ..storage.step_journal import calls_in_doubt
from .announcing import announce_verdict
from .audit_trail import audit_verdict
from .delegated import delegation_used, hold_in_force
from .edits import edit_problem, edited_input
from .expiry import EXPIRED_REASON, is_expired
from .pending import current_pending
from .questions import answer_problem, recorded_answer
from .signing import token_refusal
from .tool_versions import definition_digest_now

# isort: split
# The 0.1 names of this module that its split moved (deuz_django.verdicts is this module):
# code written against them keeps working.
from .announcing import trace_verdict  # noqa: F401
from .expiry import expiry_cutoff, max_age  # noqa: F401
from .pending import pending_ids, waiting_ids  # noqa: F401
from .signing import approval_signer  # noqa: F401
from .tool_versions import (  # noqa: F401
    current_definition,
    definition_changed_since_verdict,
    definition_changes,
)

RESUMED_WITHOUT_VERDICT = "Denied: the run was resumed without a verdict."


def user_or_none(user: Person | None) -> Any:
    return user if getattr(user, "is_authenticated", False) else None


@dataclass(frozen=True, slots=True)
class Verdict:
    """One answer to one pending call, as a surface received it.

    ``token`` is what an untrusted client echoed (the REST API, the WebSocket); ``None``
    on a surface whose user never sees tokens (the admin, the command), where the
    approval's own stored token is checked instead — so every path passes the signer.
    """

    approved: bool
    reason: str = ""
    token: str | None = None
    # "It happened": the result a person saw, for an ``outcome_unknown`` approval.
    result: RecordedResult | None = None
    # "Edit, then approve": the input the call runs with instead of the model's.
    edited_input: dict[str, Any] | None = None
    # "Approve, and allow this tool": the grant the approval makes (deuz_django.rules.grants).
    allow: Allow | None = None
    # Questions for a person: the answer an approving verdict gives (None: no answer).
    answer: Any = None


@dataclass(frozen=True, slots=True)
class RecordedResult:
    """A call's outcome as a person recorded it (any JSON value; ``None`` is a value)."""

    value: Any
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a verdict may not be recorded: the error to answer with, the bare reason (for
    per-item API errors) and the input it is about."""

    error: DeuzError | NotPermitted
    problem: str
    field: str


@dataclass(frozen=True, slots=True)
class Decision:
    """A recorded verdict, and whether it was the run's last undecided one."""

    approval: Approval
    run_ready: bool

    @property
    def expired(self) -> bool:
        """The approval was too old: recorded as ``expired``, whatever the verdict was."""
        return self.approval.status == ApprovalStatus.EXPIRED


def check_verdict(
    user: Person | None,
    approval: Approval,
    verdict: Verdict,
    *,
    now: datetime | None = None,
) -> Refusal | None:
    """Whether ``user`` may record ``verdict`` on ``approval`` now (``None``: they may).

    Records nothing. An approval too old to decide is refused with
    :class:`ApprovalExpired` (:func:`decide` records it as expired instead).
    """
    problem: str | None
    if not is_signed_in(user):
        problem = "Sign in to decide approvals."
        return Refusal(NotPermitted(problem), problem, "approvalId")
    run = approval.run
    if not can_view_run(user, run):
        problem = "no approval with this id on this run"
        return Refusal(
            ApprovalNotFound(f"No approval with id {approval.pk}."),
            problem,
            "approvalId",
        )
    problem = decide_refusal(user, approval, approving=verdict.approved)
    lent = lent_rights(user, approval, approving=verdict.approved) if problem else None
    if problem is not None and lent is None:
        return Refusal(NotPermitted(problem), problem, "approvalId")
    problem = chain_refusal(user, approval, verdict, lent=lent)
    if problem is not None:
        return Refusal(NotPermitted(problem), problem, "approvalId")
    if verdict.edited_input is not None and verdict.approved:
        problem = edit_refusal(user, approval)
        if problem is not None:
            return Refusal(NotPermitted(problem), problem, "editedInput")
    return state_refusal(approval, verdict, now=now)


def state_refusal(
    approval: Approval, verdict: Verdict, *, now: datetime | None = None
) -> Refusal | None:
    """The part of :func:`check_verdict` that holds for anyone, operators included: the
    approval is still pending and decidable, what the verdict carries fits the call, and
    an approving verdict's token is good."""
    if not approval.is_pending:
        return Refusal(
            ApprovalAlreadyDecided(
                f"Approval {approval.approval_id} was already {approval.status}."
            ),
            f"was already {approval.status}",
            "approvalId",
        )
    if is_expired(approval, now):
        problem = "the approval has expired"
        return Refusal(
            ApprovalExpired(f"Approval {approval.approval_id}: {problem}."),
            problem,
            "token",
        )
    return _content_refusal(approval, verdict) or _token_refusal(approval, verdict)


def _content_refusal(approval: Approval, verdict: Verdict) -> Refusal | None:
    """What the verdict carries must fit the call: a result only for "it happened", an
    edit only as :func:`~.edits.edit_problem` allows, an answer only to a question, a grant only
    as :func:`~deuz_django.rules.grants.allow_problem` allows."""
    if verdict.result is not None and (
        approval.kind != ApprovalKind.OUTCOME_UNKNOWN or not verdict.approved
    ):
        return _invalid(
            approval,
            "result",
            "only approving an outcome-unknown call records a result",
        )
    if verdict.edited_input is not None:
        problem = edit_problem(approval, verdict.approved, verdict.edited_input)
        if problem is not None:
            return _invalid(approval, "editedInput", problem)
    problem = answer_problem(approval, verdict.approved, verdict.answer)
    if problem is not None:
        return _invalid(approval, "answer", problem)
    if verdict.allow is not None:
        refused = allow_problem(approval, verdict.approved, verdict.allow)
        if refused is not None:
            field, problem = refused
            return _invalid(approval, field, problem, named=True)
    return None


def _token_refusal(approval: Approval, verdict: Verdict) -> Refusal | None:
    """An approving verdict's token must authorize exactly this ask of this call (a denial
    needs none, nor does a client tool's call: D11)."""
    if not verdict.approved or approval.kind == ApprovalKind.CLIENT_TOOL:
        return None
    token = approval.token if verdict.token is None else verdict.token
    problem = token_refusal(approval, token)
    if (
        problem is None
        and approval.token
        and not hmac.compare_digest(token, approval.token)
    ):
        # Signed for the same call as asked before (a re-used call id, a replayed
        # turn): a verdict approves the ask whose token it echoes, never a later one.
        problem = "the token was issued for an earlier request of this call"
    return None if problem is None else _invalid(approval, "token", problem)


def _invalid(
    approval: Approval, field: str, problem: str, *, named: bool = False
) -> Refusal:
    where = f"Approval {approval.approval_id}" + (f", {field}" if named else "")
    return Refusal(InvalidVerdict(f"{where}: {problem}."), problem, field)


def decide(user: Person | None, approval: Approval, verdict: Verdict) -> Decision:
    """Check and record one verdict (raising the refusal's error); an approval past
    ``APPROVAL_MAX_AGE`` is recorded as ``expired`` and its call will not run."""
    refusal = check_verdict(user, approval, verdict)
    if refusal is not None and not isinstance(refusal.error, ApprovalExpired):
        raise refusal.error
    return record_verdict(approval, user, verdict)


def record_verdict(
    approval: Approval,
    user: Person | None,
    verdict: Verdict,
    *,
    operator: str = "",
    automatic: StandingRule | Grant | None = None,
) -> Decision:
    """Write a verdict that :func:`check_verdict` accepted (an expired approval is
    written ``expired``); raises :class:`ApprovalAlreadyDecided` when another verdict
    was recorded in between. ``operator`` names who overrode the user rules from a
    shell (``deuz resume --operator``), ``automatic`` the standing rule or grant that
    decided (:mod:`deuz_django.rules.automatic`), recorded in the same write — as are the
    grant an approving verdict's ``allow`` makes and the verdict's audit record."""
    status, reason = _status(approval, verdict)
    lent = chain = None
    if status != ApprovalStatus.EXPIRED and not operator and automatic is None:
        lent = delegation_used(approval, user, approving=verdict.approved)
        chain = chain_of(approval) if is_signed_in(user) else None
    with bounded_atomic():
        if lent is not None:
            hold_in_force(lent)
        if chain is not None and not cast(approval, user, chain, verdict, lent):
            approval.refresh_from_db()  # a vote is in: it waits for more (or a stage)
            return Decision(approval, run_ready=False)
        updated = _write(
            approval,
            Q(),
            status=status,
            # Too late: the system records the expiry, not the verdict's giver.
            decided_by=None if status == ApprovalStatus.EXPIRED else user_or_none(user),
            decided_on_behalf_of=None if lent is None else lent.delegator,
            delegation=lent,
            reason=reason,
            operator="" if status == ApprovalStatus.EXPIRED else operator,
            edited_input=edited_input(approval, verdict.edited_input, status),
            answer=recorded_answer(approval, status, verdict.answer),
            decided_by_rule=automatic if isinstance(automatic, StandingRule) else None,
            decided_by_grant=automatic if isinstance(automatic, Grant) else None,
            decided_on_definition=definition_digest_now(approval)
            if status == ApprovalStatus.APPROVED
            else "",
        )
        approved = updated and status == ApprovalStatus.APPROVED
        grant = _approved(approval, user, verdict) if approved else None
        approval.refresh_from_db()
        if updated:  # the audit records last (audit.append says why)
            audit_verdict(approval, user, timeout=False)
            if grant is not None:
                audit_grant(grant, approval, user)
    if not updated:
        raise ApprovalAlreadyDecided(
            f"Approval {approval.approval_id} was already {approval.status}."
        )
    return _recorded(approval)


def _status(approval: Approval, verdict: Verdict) -> tuple[str, str]:
    """The status and reason a verdict records (``expired``: it came too late)."""
    if is_expired(approval):
        return ApprovalStatus.EXPIRED, EXPIRED_REASON
    if verdict.approved:
        return ApprovalStatus.APPROVED, verdict.reason
    return ApprovalStatus.DENIED, verdict.reason


def _approved(
    approval: Approval, user: Person | None, verdict: Verdict
) -> Grant | None:
    """What an approval writes besides its row: a call in doubt's recorded result, the
    grant its ``allow`` makes (returned, for the audit record)."""
    if approval.kind == ApprovalKind.OUTCOME_UNKNOWN:
        _settle_in_doubt(approval, verdict.result)
    if verdict.allow is None:
        return None
    return record_grant(approval, user, verdict.allow)


def record_timeout(approval: Approval, reason: str, *, due: Q) -> Decision | None:
    """Record a call nobody decided in time as ``expired``, by the system, with
    ``reason`` (:mod:`deuz_django.deadlines.rows`) — only while it is pending and ``due``
    still holds for its row (an escalation may have moved its deadline meanwhile).
    ``None`` when it did not (a verdict or another sweep came first): one write wins."""
    with bounded_atomic():
        if not _write(approval, due, status=ApprovalStatus.EXPIRED, reason=reason):
            return None
        approval.refresh_from_db()
        audit_verdict(approval, None, timeout=True)
    return _recorded(approval)


def _write(approval: Approval, condition: Q, **values: Any) -> bool:
    """The one write of a verdict: conditional on the row still being pending."""
    rows = Approval.objects.filter(condition, pk=approval.pk)
    return bool(
        rows.filter(status=ApprovalStatus.PENDING).update(
            decided_at=timezone.now(), **values
        )
    )


def _recorded(approval: Approval) -> Decision:
    announce_verdict(approval)
    return Decision(approval, run_ready=not current_pending(approval.run).exists())


def _settle_in_doubt(approval: Approval, result: RecordedResult | None) -> None:
    """Write a person's answer to an in-doubt call into the step journal: its outcome
    ("it happened"), or no record at all ("run it again")."""
    run = approval.run
    calls = calls_in_doubt(run.pk, run.run_id, [approval.tool_call_id])
    if result is None:
        calls.delete()
    else:
        calls.update(
            finished=True, result=encode_json(result.value), is_error=result.is_error
        )
