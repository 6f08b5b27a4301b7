"""The run service: the one module the admin, REST API, WebSocket consumer and the ``deuz``
command call to start runs, decide approvals, resume runs and recover crashed ones.

Every leg — the first one too — is a resume from the run's latest checkpoint, taken under
the run's lease (:mod:`deuz_django.leases`), so exactly one process drives a run at a time
and a crash anywhere is recovered by resuming again.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from . import leases
from .core import AbortController, Message
from .core.durable import AgentCheckpoint
from .core.messages import coerce_messages
from .core.usage import EMPTY_USAGE
from .exceptions import ApprovalNotFound, NotPermitted, RunBusy, RunNotFound
from .journal import get_journal
from .legs import ABORTED, LegOutcome, PartObserver, prepare_leg, run_leg
from .models import Approval, ApprovalStatus, Run, RunStatus
from .permissions import can_resume_run, can_view_run, decide_refusal, is_signed_in
from .registry import load_agent
from .store import DjangoSessionStore, Lease
from .verdicts import (
    EXPIRED_REASON,
    RESUMED_WITHOUT_VERDICT,
    Decision,
    approval_signer,
    current_pending,
    expiry_cutoff,
    record_verdict,
)

__all__ = [
    "ABORTED",
    "EXPIRED_REASON",
    "RESUMED_WITHOUT_VERDICT",
    "Decision",
    "LegOutcome",
    "aclaim_resume",
    "adecide_approval",
    "approval_signer",
    "aresume_run",
    "arun_claimed_leg",
    "arun_leg",
    "astart_run",
    "claim_resume",
    "current_pending",
    "decide_approval",
    "delete_run",
    "record_operator_verdict",
    "recoverable_runs",
    "resume_run",
    "start_run",
]


# -- starting -------------------------------------------------------------------------------


def start_run(
    *,
    agent: str,
    messages: Sequence[Message | dict[str, Any]],
    owner: Any = None,
    run_id: str | None = None,
    title: str = "",
) -> Run:
    """Record an accepted run and its input before any model call.

    The input becomes the run's first checkpoint (step 0, ``running``), so a process that
    dies before the first step boundary leaves a run that ``recover`` can drive.
    """
    spec = load_agent(agent)
    history = coerce_messages(messages)
    if not history:
        raise ValueError("messages: a run needs at least one message")
    if spec.system is not None:
        history = (Message("system", spec.system), *history)
    run_id = run_id or uuid.uuid4().hex
    with transaction.atomic():
        if Run.objects.filter(run_id=run_id).exists():
            raise ValueError(f"runId: run '{run_id}' already exists")
        first_user_text = next(
            (m.text for m in history if m.role == "user" and m.text), ""
        )
        run = Run.objects.create(
            run_id=run_id,
            agent=agent,
            owner=owner if is_signed_in(owner) else None,
            title=title or first_user_text[:200],
        )
        DjangoSessionStore().save(
            AgentCheckpoint(
                run_id=run_id,
                step_id=f"{run_id}#0",
                step_index=0,
                status="running",
                messages=history,
                usage=EMPTY_USAGE,
                created_at=int(timezone.now().timestamp() * 1000),
            )
        )
    run.refresh_from_db()
    return run


astart_run = sync_to_async(start_run)


# -- deciding -------------------------------------------------------------------------------


def _approval_row(approval: Approval | int) -> Approval:
    if isinstance(approval, Approval):
        return approval
    found = Approval.objects.select_related("run").filter(pk=approval).first()
    if found is None:
        raise ApprovalNotFound(f"No approval with id {approval}.")
    return found


def decide_approval(
    approval: Approval | int,
    *,
    user: Any,
    approved: bool,
    reason: str = "",
    token: str | None = None,
) -> Decision:
    """Record one verdict, atomically and once; the caller resumes when ``run_ready``.

    Anonymous users get :class:`NotPermitted`; an approval on a run the user may not see
    is :class:`ApprovalNotFound` (never "forbidden", which would confirm it exists).
    ``token`` is what an untrusted client echoed; without it (the admin) the approval's
    own stored token is verified. An approval older than ``APPROVAL_MAX_AGE`` is recorded
    as ``expired`` instead (``decision.expired``).
    """
    approval = _approval_row(approval)
    if not is_signed_in(user):
        raise NotPermitted("Sign in to decide approvals.")
    if not can_view_run(user, approval.run):
        raise ApprovalNotFound(f"No approval with id {approval.pk}.")
    refusal = decide_refusal(user, approval, approving=approved)
    if refusal is not None:
        raise NotPermitted(refusal)
    return record_verdict(approval, user, approved=approved, reason=reason, token=token)


adecide_approval = sync_to_async(decide_approval)


def record_operator_verdict(
    approval: Approval, *, operator: str, approved: bool, reason: str = ""
) -> Decision:
    """An operator override: a verdict from someone with shell access (``manage.py deuz
    resume --operator NAME``), recorded as such with the name they gave.

    No user permission applies, but an approval still needs its token to verify.
    """
    if not operator.strip():
        raise ValueError("operator: an operator override names the operator")
    with transaction.atomic():
        decision = record_verdict(
            approval, None, approved=approved, reason=reason, token=None
        )
        Approval.objects.filter(pk=approval.pk).update(operator=operator.strip())
    approval.refresh_from_db()
    return decision


# -- resuming -------------------------------------------------------------------------------


async def arun_leg(
    run_id: str,
    *,
    user: Any = None,
    deny_remaining: bool = False,
    observer: PartObserver | None = None,
    controller: AbortController | None = None,
) -> LegOutcome:
    """Run one leg of ``run_id`` under its lease; raises ``RunBusy`` if another leg holds it.

    ``observer`` sees every canonical part after it was journaled; ``controller`` lets the
    caller cancel the leg. A leg whose lease was taken over stops writing at once and
    ends with ``outcome.error`` saying so.
    """
    lease = await sync_to_async(leases.acquire)(run_id)
    return await run_leg(
        lease,
        user=user,
        deny_remaining=deny_remaining,
        observer=observer,
        controller=controller,
    )


async def arun_claimed_leg(
    lease: Lease,
    *,
    observer: PartObserver | None = None,
    controller: AbortController | None = None,
) -> LegOutcome:
    """Run the leg of a run claimed with :func:`claim_resume`, under the lease handed over.

    Raises ``RunBusy`` when the claim lapsed and another leg took the run over meanwhile.
    """
    if not await sync_to_async(leases.renew)(lease):
        raise RunBusy(lease.run_id)
    return await run_leg(lease, observer=observer, controller=controller)


async def aresume_run(
    run_id: str,
    *,
    user: Any = None,
    deny_remaining: bool = False,
    observer: PartObserver | None = None,
) -> LegOutcome:
    """Resume a run on behalf of ``user`` (``None`` for system callers: tasks, recovery).

    A run the user may not see is :class:`RunNotFound`; one they see but may not resume,
    or an anonymous user, is :class:`NotPermitted`.
    """
    if user is not None:
        await sync_to_async(_check_may_resume)(run_id, user)
    return await arun_leg(
        run_id, user=user, deny_remaining=deny_remaining, observer=observer
    )


resume_run = async_to_sync(aresume_run)


def _check_may_resume(run_id: str, user: Any) -> None:
    if not is_signed_in(user):
        raise NotPermitted("Sign in to resume runs.")
    run = Run.objects.filter(run_id=run_id).select_related("owner").first()
    if run is None or not can_view_run(user, run):
        raise RunNotFound(f"No run '{run_id}'.")
    if not can_resume_run(user, run):
        raise NotPermitted("You may not resume this run.")


def claim_resume(
    run_id: str, *, user: Any = None, deny_remaining: bool = False
) -> Lease:
    """Take the run's lease now and check it may resume, so a request can answer at once
    (``RunBusy``, ``RunNotResumable``, ``RunNotFound``, ``NotPermitted``) and hand the
    leg to a background task: ``tasks.enqueue_claimed_leg(lease)``.

    With ``deny_remaining`` the undecided approvals are denied here, in the request.
    """
    if user is not None:
        _check_may_resume(run_id, user)
    lease = leases.acquire(run_id)
    try:
        prepare_leg(run_id, deny_remaining=deny_remaining, user=user)
    except BaseException:
        leases.release(lease)
        raise
    return lease


aclaim_resume = sync_to_async(claim_resume)


# -- recovering -----------------------------------------------------------------------------


def recoverable_runs(older_than: float, *, run_id: str | None = None) -> list[str]:
    """Root runs a dead process left behind, oldest first: mid-run with a lapsed lease, or
    suspended on approvals that are all decided (or too old to decide) but never resumed.

    A run whose last leg failed or was aborted is not recovered (it would fail again);
    ``deuz resume`` continues it explicitly. ``run_id`` asks about that one run (the
    WebSocket consumer's crash continuation).
    """
    now = timezone.now()
    idle = Q(updated_at__lt=now - timedelta(seconds=older_than))
    lease_free = (
        Q(lease_owner="") | Q(lease_expires_at__lt=now) | Q(lease_expires_at=None)
    )
    candidates = Run.objects.roots().filter(idle, lease_free).order_by("updated_at")
    if run_id is not None:
        candidates = candidates.filter(run_id=run_id)
    running = candidates.filter(status=RunStatus.RUNNING, last_error="")
    undecided = Approval.objects.filter(
        run=OuterRef("pk"), status=ApprovalStatus.PENDING
    )
    cutoff = expiry_cutoff(now)
    if cutoff is not None:
        undecided = undecided.filter(created_at__gt=cutoff)
    decided = (
        candidates.filter(status=RunStatus.SUSPENDED)
        .exclude(pending_approvals="")
        .exclude(Exists(undecided))
    )
    return [
        *running.values_list("run_id", flat=True),
        *decided.values_list("run_id", flat=True),
    ]


def delete_run(run_id: str) -> None:
    """Remove a run with its history, approvals, journal and sub-agent runs."""
    delete_journal(run_id)
    DjangoSessionStore().delete(run_id)


def delete_journal(run_id: str) -> None:
    """Remove a run's stream journal (kept for ``STREAM_RETENTION_DAYS``), not its history."""
    async_to_sync(get_journal().delete)(run_id)
