"""The approval rows turned into the approval responses a run's next leg settles with:
approved rows (with their token, an edited input when a person changed it, the answer to
a question), the rest
denied or expired — and the token age that settle accepts for them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import OperationalError
from django.utils import timezone

from ..exceptions import RunBusy, RunNotResumable
from ..models import Approval, ApprovalStatus, Run
from ..models.visibility import Person
from ..storage.db import bounded_atomic, locked
from .announcing import announce_verdict
from .expiry import EXPIRED_REASON, is_expired, max_age
from .pending import waiting_ids
from .tool_versions import definition_changed_since_verdict
from .verdicts import RESUMED_WITHOUT_VERDICT, user_or_none


def close_undecided(run: Run, *, deny_remaining: bool, user: Person | None) -> None:
    """What a claim settles before a leg may start: rows too old to decide are recorded
    ``expired``; with ``deny_remaining`` ("resume now") the undecided rest are recorded
    ``denied``. Without it an undecided row makes the run not resumable yet
    (:class:`RunNotResumable`), and nothing is written. The claim makes this write, so it
    never waits behind another transaction holding one of the rows (a verdict being
    recorded, or a stalled process's): the run is :class:`RunBusy` instead."""
    _closed_rows(run, waiting_ids(run), deny_remaining=deny_remaining, user=user)


def collect_verdicts(run: Run) -> list[dict[str, Any]]:
    """The verdicts that settle the run's pending calls, read from the approval rows —
    gathered once per leg, by the leg (its claim closed the undecided rows; one that
    expired since is closed here the same way)."""
    ids = waiting_ids(run)
    rows = _closed_rows(run, ids, deny_remaining=False, user=None)
    return [_verdict(approval_id, rows.get(approval_id)) for approval_id in ids]


def _closed_rows(
    run: Run, ids: list[str], *, deny_remaining: bool, user: Person | None
) -> dict[str, Approval]:
    if not ids:
        return {}
    try:
        # The rows marked expired or denied: all, or none.
        with bounded_atomic(wait_for_locks=False):
            return _close(run, ids, deny_remaining=deny_remaining, user=user)
    except OperationalError as error:
        if not locked(error):
            raise
        raise RunBusy(run.run_id) from error


def _close(
    run: Run, ids: list[str], *, deny_remaining: bool, user: Person | None
) -> dict[str, Approval]:
    rows = {
        a.approval_id: a
        for a in Approval.objects.asked_at(run).filter(approval_id__in=ids)
    }
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
            updated = Approval.objects.filter(
                pk=row.pk, status=ApprovalStatus.PENDING
            ).update(
                status=ApprovalStatus.EXPIRED if expired else ApprovalStatus.DENIED,
                reason=EXPIRED_REASON if expired else RESUMED_WITHOUT_VERDICT,
                decided_by=None if expired else user_or_none(user),
                decided_at=now,
            )
            row.refresh_from_db()  # a verdict recorded concurrently wins
            if updated:
                announce_verdict(row)
    return rows


def _verdict(approval_id: str, row: Approval | None) -> dict[str, Any]:
    """The approval response a row gives its call: an approved row's carries the row as
    the decision the call runs on (and its agent path, so it settles that agent's call
    only); a verdict given on another definition of the tool than the deployed one
    denies the call instead of running the new one."""
    if row is None:
        return {
            "approvalId": approval_id,
            "approved": False,
            "reason": RESUMED_WITHOUT_VERDICT,
        }
    path = list(row.agent_path or [])
    if row.status != ApprovalStatus.APPROVED:
        return {
            "approvalId": approval_id,
            "approved": False,
            "reason": row.reason,
            "agentPath": path,
        }
    changed = definition_changed_since_verdict(row)
    if changed is not None:
        return {
            "approvalId": approval_id,
            "approved": False,
            "reason": changed,
            "agentPath": path,
        }
    approved = {
        "approvalId": approval_id,
        "approved": True,
        "token": row.token,
        "decisionId": str(row.pk),
        "agentPath": path,
    }
    if row.edited_input is not None:
        approved["editedInput"] = row.edited_input
    if row.answer is not None:
        approved["answer"] = row.answer
    return approved


def settle_max_age_ms(verdicts: list[dict[str, Any]], run: Run) -> float | None:
    """The token age the resume-time settle accepts: ``APPROVAL_MAX_AGE`` as of the
    moment each approval was decided (a leg that starts late must not deny what was
    approved in time), so settle makes the same age check the decision did."""
    age = max_age()
    if age is None:
        return None
    approved = [v["approvalId"] for v in verdicts if v["approved"]]
    if not approved:
        return age / timedelta(milliseconds=1)
    decided = (
        Approval.objects.asked_at(run)
        .filter(approval_id__in=approved)
        .values_list("decided_at", flat=True)
    )
    now = timezone.now()
    late = max(((now - at) for at in decided if at is not None), default=timedelta())
    return (age + max(late, timedelta())) / timedelta(milliseconds=1)
