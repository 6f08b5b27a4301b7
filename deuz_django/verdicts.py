"""Verdicts on approval rows: recording one (atomically, once) and turning a suspended run's
rows into the approval responses its next leg settles with.

Who may decide is :mod:`deuz_django.permissions`' question and is asked by the run service
before it calls in here. A decided row never changes again: every write is an ``UPDATE``
conditional on the row still being ``pending``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db.models import QuerySet
from django.utils import timezone

from .conf import deuz_settings
from .core import ToolApprovalResponse
from .core._approval import token_authorizes
from .core.durable import ApprovalSigner, create_approval_signer
from .core.durable.codec import decode_json
from .core.tools import ToolCall
from .exceptions import ApprovalAlreadyDecided, InvalidVerdict, RunNotResumable
from .models import Approval, ApprovalStatus, Run, RunStatus

EXPIRED_REASON = "Approval expired."
RESUMED_WITHOUT_VERDICT = "Denied: the run was resumed without a verdict."


def approval_signer() -> ApprovalSigner:
    """The signer for ``DEUZ["APPROVAL_SECRET"]`` (and its fallback secrets)."""
    secret = deuz_settings.APPROVAL_SECRET
    if not secret:
        raise ImproperlyConfigured(
            "DEUZ['APPROVAL_SECRET'] is not set (check deuz_django.E001)."
        )
    return create_approval_signer(
        secret=secret, fallback_secrets=tuple(deuz_settings.APPROVAL_FALLBACK_SECRETS)
    )


def _max_age() -> timedelta | None:
    seconds = deuz_settings.APPROVAL_MAX_AGE
    return None if seconds is None else timedelta(seconds=float(seconds))


def expiry_cutoff(now: datetime | None = None) -> datetime | None:
    """Approvals created before this moment are too old to decide (``None``: no expiry)."""
    max_age = _max_age()
    return None if max_age is None else (now or timezone.now()) - max_age


def is_expired(approval: Approval, now: datetime | None = None) -> bool:
    cutoff = expiry_cutoff(now)
    return cutoff is not None and approval.created_at <= cutoff


def _user_or_none(user: Any) -> Any:
    return user if getattr(user, "is_authenticated", False) else None


@dataclass(frozen=True, slots=True)
class Decision:
    """A recorded verdict, and whether it was the run's last undecided one."""

    approval: Approval
    run_ready: bool

    @property
    def expired(self) -> bool:
        """The approval was too old: recorded as ``expired``, whatever the verdict was."""
        return self.approval.status == ApprovalStatus.EXPIRED


def token_error(approval: Approval, token: str) -> str | None:
    """Why ``token`` does not authorize exactly this approval's call on this run."""
    if not token:
        return "an approving verdict needs the approval's token"
    signer = approval_signer()
    if signer.verify(token) is None:
        return "the token is forged, tampered with or garbled"
    verdict = ToolApprovalResponse(
        approval_id=approval.approval_id, approved=True, token=token
    )
    call = ToolCall(approval.tool_call_id, approval.tool_name, approval.input)
    if not token_authorizes(verdict, call, signer, None, approval.run.run_id):
        return "the token was minted for another call or another run"
    return None


def verdict_problem(
    approval: Approval, *, approved: bool, token: str | None
) -> str | None:
    """Why an untrusted client's verdict must be refused (``None``: it may be recorded).

    Records nothing, so a caller (the REST API) can check a whole batch before recording
    any of it. The signer check of :func:`record_verdict`, with a precise reason, and
    stricter on age: an expired approval or token is refused, not recorded as expired.
    A denial needs no token.
    """
    if not approved:
        return None
    if is_expired(approval):
        return "the approval has expired"
    problem = token_error(approval, token or "")
    signer = approval_signer()
    payload = signer.verify(token) if token else None
    if payload is None:
        return problem
    if payload.get("runId") != approval.run.run_id:
        return "the token was minted for another run"
    if problem is not None:
        return "the token was minted for another call"
    max_age = _max_age()
    if (
        max_age is not None
        and signer.verify(token, max_age / timedelta(milliseconds=1)) is None
    ):
        return "the token has expired"
    return None


def record_verdict(
    approval: Approval, user: Any, *, approved: bool, reason: str, token: str | None
) -> Decision:
    """Record one verdict; an approval past ``APPROVAL_MAX_AGE`` is recorded ``expired``.

    ``token`` is what an untrusted client echoed; ``None`` verifies the approval's own
    stored token, so every path passes the same signer check.
    """
    if is_expired(approval):
        status, reason = ApprovalStatus.EXPIRED, EXPIRED_REASON
    elif approved:
        status = ApprovalStatus.APPROVED
        problem = token_error(approval, approval.token if token is None else token)
        if problem is not None:
            raise InvalidVerdict(f"Approval {approval.approval_id}: {problem}.")
    else:
        status = ApprovalStatus.DENIED
    updated = Approval.objects.filter(
        pk=approval.pk, status=ApprovalStatus.PENDING
    ).update(
        status=status,
        decided_by=_user_or_none(user),
        decided_at=timezone.now(),
        reason=reason,
    )
    approval.refresh_from_db()
    if updated != 1:
        raise ApprovalAlreadyDecided(
            f"Approval {approval.approval_id} was already {approval.status}."
        )
    return Decision(approval, run_ready=not current_pending(approval.run).exists())


def pending_ids(run: Run) -> list[str]:
    """The approval ids the run's latest checkpoint is suspended on."""
    if run.status != RunStatus.SUSPENDED or not run.pending_approvals:
        return []
    return [item["approvalId"] for item in decode_json(run.pending_approvals)]


def current_pending(run: Run) -> QuerySet[Approval]:
    """The approvals the run still waits for: undecided and not yet too old to decide."""
    pending = run.approvals.filter(
        approval_id__in=pending_ids(run), status=ApprovalStatus.PENDING
    )
    cutoff = expiry_cutoff()
    return pending if cutoff is None else pending.filter(created_at__gt=cutoff)


def collect_verdicts(
    run: Run, *, deny_remaining: bool, user: Any
) -> list[dict[str, Any]]:
    """The verdicts that settle the run's pending calls, read from the approval rows.

    Rows too old to decide are recorded ``expired``; with ``deny_remaining`` ("resume
    now") the undecided rest are recorded ``denied``. Without it an undecided row makes
    the run not resumable yet, and nothing is written.
    """
    ids = pending_ids(run)
    if not ids:
        return []
    rows = {a.approval_id: a for a in run.approvals.filter(approval_id__in=ids)}
    now = timezone.now()
    undecided = [
        approval_id
        for approval_id in ids
        if approval_id not in rows
        or (rows[approval_id].is_pending and not is_expired(rows[approval_id], now))
    ]
    if undecided and not deny_remaining:
        raise RunNotResumable(
            f"Run '{run.run_id}' still waits for a verdict on {', '.join(undecided)}; "
            "decide it first, or resume now to deny what is undecided."
        )
    for row in rows.values():
        if row.is_pending:
            expired = is_expired(row, now)
            Approval.objects.filter(pk=row.pk, status=ApprovalStatus.PENDING).update(
                status=ApprovalStatus.EXPIRED if expired else ApprovalStatus.DENIED,
                reason=EXPIRED_REASON if expired else RESUMED_WITHOUT_VERDICT,
                decided_by=None if expired else _user_or_none(user),
                decided_at=now,
            )
            row.refresh_from_db()  # a verdict recorded concurrently wins
    verdicts: list[dict[str, Any]] = []
    for approval_id in ids:
        row = rows.get(approval_id)
        if row is not None and row.status == ApprovalStatus.APPROVED:
            verdicts.append(
                {"approvalId": approval_id, "approved": True, "token": row.token}
            )
        else:
            reason = row.reason if row is not None else RESUMED_WITHOUT_VERDICT
            verdicts.append(
                {"approvalId": approval_id, "approved": False, "reason": reason}
            )
    return verdicts
