"""The run service: the one module the admin, REST API, WebSocket consumer and the ``deuz``
command call to start runs, decide approvals, resume runs and recover crashed ones.

Every leg — the first one too — is a resume from the run's latest checkpoint, taken under
the run's lease (:mod:`deuz_django.leases`), so exactly one process drives a run at a time
and a crash anywhere is recovered by resuming again.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from . import leases
from .conf import deuz_settings
from .core import AbortController, Deps, Message, StreamPart, ToolApprovalResponse
from .core._approval import token_authorizes
from .core.durable import (
    AgentCheckpoint,
    ApprovalSigner,
    create_approval_signer,
    resume_stream_from_checkpoint,
)
from .core.durable.codec import decode_json
from .core.messages import coerce_messages
from .core.tools import ToolCall
from .core.usage import EMPTY_USAGE
from .exceptions import (
    ApprovalAlreadyDecided,
    ApprovalNotFound,
    InvalidVerdict,
    LeaseLost,
    NotPermitted,
    RunNotFound,
    RunNotResumable,
)
from .models import Approval, ApprovalStatus, Run, RunStatus
from .permissions import can_resume_run, decide_refusal
from .registry import AgentSpec, load_agent
from .store import DjangoSessionStore, Lease

logger = logging.getLogger("deuz_django")

EXPIRED_REASON = "Approval expired."
RESUMED_WITHOUT_VERDICT = "Denied: the run was resumed without a verdict."
PartObserver = Callable[[StreamPart], Awaitable[None]]


def approval_signer() -> ApprovalSigner:
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
            owner=owner if getattr(owner, "is_authenticated", False) else None,
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


@dataclass(frozen=True, slots=True)
class Decision:
    """A recorded verdict, and whether it was the run's last pending one."""

    approval: Approval
    run_ready: bool


def _token_error(approval: Approval, token: str) -> str | None:
    """Why ``token`` does not authorize exactly this approval's call on this run."""
    signer = approval_signer()
    verdict = ToolApprovalResponse(
        approval_id=approval.approval_id, approved=True, token=token
    )
    call = ToolCall(approval.tool_call_id, approval.tool_name, approval.input)
    if not token:
        return "an approving verdict needs the approval's token"
    if signer.verify(token) is None:
        return "the token is forged, tampered with or garbled"
    if not token_authorizes(verdict, call, signer, None, approval.run.run_id):
        return "the token was minted for another call or another run"
    return None


def decide_approval(
    approval: Approval | int,
    *,
    user: Any,
    approved: bool,
    reason: str = "",
    token: str | None = None,
) -> Decision:
    """Record one verdict, atomically and once; the caller resumes when ``run_ready``.

    ``token`` is what an untrusted client echoed; without it (the admin) the approval's own
    stored token is verified — every path passes the same signer check. An approval older
    than ``APPROVAL_MAX_AGE`` is recorded as ``expired`` instead.
    """
    if not isinstance(approval, Approval):
        found = Approval.objects.select_related("run").filter(pk=approval).first()
        if found is None:
            raise ApprovalNotFound(f"No approval with id {approval}.")
        approval = found
    if not approval.is_pending:
        raise ApprovalAlreadyDecided(
            f"Approval {approval.approval_id} was already {approval.status}."
        )
    refusal = decide_refusal(user, approval, approving=approved)
    if refusal is not None:
        raise NotPermitted(refusal)
    return _record_verdict(
        approval, user, approved=approved, reason=reason, token=token
    )


adecide_approval = sync_to_async(decide_approval)


def record_operator_verdict(
    approval: Approval, *, approved: bool, reason: str = ""
) -> Decision:
    """A verdict from someone with shell access (``manage.py deuz resume --approve``).

    No user permission applies, but an approval still needs its token to verify.
    """
    if not approval.is_pending:
        raise ApprovalAlreadyDecided(
            f"Approval {approval.approval_id} was already {approval.status}."
        )
    return _record_verdict(approval, None, approved=approved, reason=reason, token=None)


def _record_verdict(
    approval: Approval, user: Any, *, approved: bool, reason: str, token: str | None
) -> Decision:
    status, final_reason = (
        ApprovalStatus.APPROVED if approved else ApprovalStatus.DENIED,
        reason,
    )
    max_age = _max_age()
    if max_age is not None and timezone.now() - approval.created_at >= max_age:
        status, final_reason = ApprovalStatus.EXPIRED, EXPIRED_REASON
    elif approved:
        problem = _token_error(approval, approval.token if token is None else token)
        if problem is not None:
            raise InvalidVerdict(f"Approval {approval.approval_id}: {problem}.")
    now = timezone.now()
    updated = Approval.objects.filter(
        pk=approval.pk, status=ApprovalStatus.PENDING
    ).update(
        status=status,
        decided_by=user if getattr(user, "is_authenticated", False) else None,
        decided_at=now,
        reason=final_reason,
    )
    if updated != 1:
        raise ApprovalAlreadyDecided(
            f"Approval {approval.approval_id} was already decided."
        )
    approval.refresh_from_db()
    return Decision(approval, run_ready=not current_pending(approval.run).exists())


def current_pending(run: Run) -> Any:
    """The undecided approvals the run is suspended on."""
    ids = _pending_ids(run)
    return run.approvals.filter(approval_id__in=ids, status=ApprovalStatus.PENDING)


def _pending_ids(run: Run) -> list[str]:
    if run.status != RunStatus.SUSPENDED or not run.pending_approvals:
        return []
    return [item["approvalId"] for item in decode_json(run.pending_approvals)]


# -- resuming -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LegOutcome:
    """How a leg ended: the run's status afterwards, and the error if the leg failed."""

    run_id: str
    status: str
    finish_reason: str | None
    pending_approvals: int
    error: str | None = None


def _collect_verdicts(
    run: Run, *, deny_remaining: bool, user: Any
) -> list[dict[str, Any]]:
    """The verdicts that settle the run's pending calls, from the approval rows."""
    ids = _pending_ids(run)
    if not ids:
        return []
    rows = {a.approval_id: a for a in run.approvals.filter(approval_id__in=ids)}
    max_age = _max_age()
    now = timezone.now()
    verdicts = []
    for approval_id in ids:
        row = rows.get(approval_id)
        if row is not None and row.is_pending:
            if max_age is not None and now - row.created_at >= max_age:
                row.status, row.reason = ApprovalStatus.EXPIRED, EXPIRED_REASON
            elif deny_remaining:
                row.status, row.reason = ApprovalStatus.DENIED, RESUMED_WITHOUT_VERDICT
                row.decided_by = (
                    user if getattr(user, "is_authenticated", False) else None
                )
            else:
                raise RunNotResumable(
                    f"Run '{run.run_id}' still waits for a verdict on {approval_id}; decide "
                    "it first, or resume with deny_remaining to deny what is undecided."
                )
            row.decided_at = now
            row.save(update_fields=["status", "reason", "decided_by", "decided_at"])
        if row is None or row.status != ApprovalStatus.APPROVED:
            reason = row.reason if row is not None else RESUMED_WITHOUT_VERDICT
            verdicts.append(
                {"approvalId": approval_id, "approved": False, "reason": reason}
            )
        else:
            verdicts.append(
                {"approvalId": approval_id, "approved": True, "token": row.token}
            )
    return verdicts


def _prepare_leg(
    run_id: str, *, deny_remaining: bool, user: Any
) -> tuple[AgentSpec, list[dict[str, Any]]]:
    """Under the lease: check the run may resume, and gather its verdicts."""
    run = Run.objects.select_related("owner").filter(run_id=run_id).first()
    if run is None:
        raise RunNotFound(f"No run '{run_id}'.")
    if run.status == RunStatus.COMPLETED:
        raise RunNotResumable(f"Run '{run_id}' is completed.")
    with transaction.atomic():
        verdicts = _collect_verdicts(run, deny_remaining=deny_remaining, user=user)
    return load_agent(run.agent), verdicts


async def _renew_until_cancelled(lease: Lease, controller: AbortController) -> None:
    interval = max(0.05, float(deuz_settings.LEASE_SECONDS) / 3)
    while True:
        await asyncio.sleep(interval)
        if not await sync_to_async(leases.renew)(lease):
            logger.error(
                "deuz: lease on run %s was taken over; aborting this leg", lease.run_id
            )
            controller.abort(
                LeaseLost(f"Lease on run '{lease.run_id}' was taken over.")
            )
            return


async def arun_leg(
    run_id: str,
    *,
    user: Any = None,
    deny_remaining: bool = False,
    observer: PartObserver | None = None,
    controller: AbortController | None = None,
) -> LegOutcome:
    """Run one leg of ``run_id`` under its lease; raises ``RunBusy`` if another leg holds it.

    ``observer`` sees every canonical part (the WebSocket journal hooks in here);
    ``controller`` lets the caller cancel the leg.
    """
    lease = await sync_to_async(leases.acquire)(run_id)
    controller = controller or AbortController()
    renewer = asyncio.ensure_future(_renew_until_cancelled(lease, controller))
    try:
        spec, verdicts = await sync_to_async(_prepare_leg)(
            run_id, deny_remaining=deny_remaining, user=user
        )
        store = DjangoSessionStore(lease=lease, on_lease_lost=controller.abort)
        options = spec.call_options()
        options.setdefault("deps", Deps(logger=logger))
        options.update(
            approval_responses=verdicts,
            approval_signer=approval_signer(),
            signal=controller.signal,
        )
        leg = resume_stream_from_checkpoint(store, run_id, **options)
        async for part in leg.full_stream:
            if observer is not None:
                await observer(part)
        error: str | None = None
        finish_reason = None
        try:
            finish_reason = (await leg.result()).finish_reason
        except Exception as exc:
            error = str(exc) or type(exc).__name__
            await sync_to_async(_record_error)(run_id, lease, error)
        return await sync_to_async(_outcome)(run_id, finish_reason, error)
    finally:
        renewer.cancel()
        await asyncio.gather(renewer, return_exceptions=True)
        await sync_to_async(leases.release)(lease)


def _record_error(run_id: str, lease: Lease, error: str) -> None:
    Run.objects.filter(run_id=run_id, lease_generation=lease.generation).update(
        last_error=error[:2000]
    )


def _outcome(run_id: str, finish_reason: str | None, error: str | None) -> LegOutcome:
    run = Run.objects.get(run_id=run_id)
    return LegOutcome(
        run_id=run_id,
        status=run.status,
        finish_reason=finish_reason,
        pending_approvals=current_pending(run).count(),
        error=error,
    )


async def aresume_run(
    run_id: str,
    *,
    user: Any = None,
    deny_remaining: bool = False,
    observer: PartObserver | None = None,
) -> LegOutcome:
    """Resume a run on behalf of ``user`` (``None`` for system callers: tasks, recovery)."""
    if user is not None:
        run = await Run.objects.filter(run_id=run_id).select_related("owner").afirst()
        if run is None or not await sync_to_async(can_resume_run)(user, run):
            raise RunNotFound(f"No run '{run_id}'.")
    return await arun_leg(
        run_id, user=user, deny_remaining=deny_remaining, observer=observer
    )


resume_run = async_to_sync(aresume_run)


# -- recovering -----------------------------------------------------------------------------


def recoverable_runs(older_than: float) -> list[str]:
    """Root runs a dead process left behind: mid-run with a lapsed lease, or suspended with
    every approval decided but never resumed."""
    now = timezone.now()
    idle = Q(updated_at__lt=now - timedelta(seconds=older_than))
    lease_free = Q(lease_owner="") | Q(lease_expires_at__lt=now)
    candidates = Run.objects.roots().filter(idle, lease_free)
    running = candidates.filter(status=RunStatus.RUNNING, last_error="")
    suspended = [
        run
        for run in candidates.filter(status=RunStatus.SUSPENDED)
        if not current_pending(run).exists()
    ]
    return [*running.values_list("run_id", flat=True), *(r.run_id for r in suspended)]


def delete_run(run_id: str) -> None:
    """Remove a run with its history, approvals, journal and sub-agent runs."""
    DjangoSessionStore().delete(run_id)
