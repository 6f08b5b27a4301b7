"""The run service: the one module the admin, REST API, WebSocket consumer and the ``deuz``
command call to start runs, decide approvals, continue runs and recover crashed ones.

Every leg — the first one too — is a resume from the run's latest checkpoint, taken under
the run's lease (:mod:`deuz_django.storage.leases`), so exactly one process drives a run at a time
and a crash anywhere is recovered by resuming again. Every surface continues a run the
same way, with one verb per act (:mod:`deuz_django.runs.continuing`): :func:`enqueue_run`
continues it in the background, :func:`aresume_run` / :func:`resume_run` runs its leg here
and returns how it ended.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.db import IntegrityError
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from .approvals.verdicts import (
    EXPIRED_REASON,
    RESUMED_WITHOUT_VERDICT,
    Decision,
    RecordedResult,
    Verdict,
    approval_signer,
    current_pending,
    decide,
    expiry_cutoff,
    record_verdict,
    state_refusal,
)
from .core import AbortController, Message
from .core.durable import AgentCheckpoint
from .core.messages import coerce_messages
from .core.usage import EMPTY_USAGE
from .exceptions import ApprovalExpired, ApprovalNotFound, NotPermitted, RunExists
from .models import Approval, ApprovalStatus, Run, RunStatus
from .permissions import can_stop_run, is_signed_in
from .registry import load_agent
from .rules.grants import Allow
from .runs.continuing import (
    Continuation,
    acontinue_run,  # noqa: F401  (0.1's name, deprecated)
    aenqueue_run,
    arun_here,
    continue_run,  # noqa: F401  (0.1's name, deprecated)
    enqueue_run,
)
from .runs.legs import ABORTED, LegOutcome, PartObserver
from .runs.stopping import request_stop
from .storage.store import DjangoSessionStore
from .storage.stream_journal import get_journal

__all__ = [
    "ABORTED",
    "EXPIRED_REASON",
    "RESUMED_WITHOUT_VERDICT",
    "Continuation",
    "Decision",
    "LegOutcome",
    "adecide_approval",
    "aenqueue_run",
    "approval_signer",
    "aresume_run",
    "astart_run",
    "astop_run",
    "current_pending",
    "decide_approval",
    "delete_run",
    "enqueue_run",
    "record_operator_verdict",
    "recoverable_runs",
    "resume_run",
    "start_run",
    "stop_run",
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
    first_user_text = next((m.text for m in history if m.role == "user" and m.text), "")
    try:
        return DjangoSessionStore().create(
            AgentCheckpoint(
                run_id=run_id,
                step_id=f"{run_id}#0",
                step_index=0,
                status="running",
                messages=history,
                usage=EMPTY_USAGE,
                created_at=int(timezone.now().timestamp() * 1000),
            ),
            agent=agent,
            owner=owner if is_signed_in(owner) else None,
            title=title or first_user_text[:200],
        )
    except IntegrityError:
        if Run.objects.filter(run_id=run_id).exists():  # the same id, started before
            raise RunExists(f"Run '{run_id}' already exists.") from None
        raise


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
    result: RecordedResult | None = None,
    edited_input: dict[str, Any] | None = None,
    allow: Allow | None = None,
    answer: Any = None,
) -> Decision:
    """Record one verdict, atomically and once; the caller continues the run when
    ``decision.run_ready`` (:func:`enqueue_run`).

    ``result`` answers an ``outcome_unknown`` approval with "it happened, and this was
    its outcome" (only with ``approved=True``; see :mod:`deuz_django.approvals.verdicts`).
    ``edited_input`` approves a call of an ``editable`` tool with that input instead;
    ``allow`` approves and allows the tool's later calls (:mod:`deuz_django.rules.grants`).
    ``answer`` (with ``approved=True``) answers a question (:mod:`deuz_django.approvals.questions`).

    The checks of :func:`deuz_django.approvals.verdicts.check_verdict`: anonymous users get
    :class:`NotPermitted`; an approval on a run the user may not see is
    :class:`ApprovalNotFound` (never "forbidden", which would confirm it exists).
    ``token`` is what an untrusted client echoed; without it (the admin) the approval's
    own stored token is verified. An approval older than ``APPROVAL_MAX_AGE`` is recorded
    as ``expired`` instead (``decision.expired``).
    """
    return decide(
        user,
        _approval_row(approval),
        Verdict(
            approved=approved,
            reason=reason,
            token=token,
            result=result,
            edited_input=edited_input,
            allow=allow,
            answer=answer,
        ),
    )


adecide_approval = sync_to_async(decide_approval)


def record_operator_verdict(
    approval: Approval, *, operator: str, approved: bool, reason: str = ""
) -> Decision:
    """An operator override: a verdict from someone with shell access (``manage.py deuz
    resume --operator NAME``), recorded as such with the name they gave.

    No user permission applies, but the approval must still be pending and decidable,
    and an approval's stored token must still verify.
    """
    if not operator.strip():
        raise ValueError("operator: an operator override names the operator")
    verdict = Verdict(approved=approved, reason=reason)
    refusal = state_refusal(approval, verdict)
    if refusal is not None and not isinstance(refusal.error, ApprovalExpired):
        raise refusal.error
    return record_verdict(approval, None, verdict, operator=operator.strip())


# -- continuing -----------------------------------------------------------------------------


async def aresume_run(
    run_id: str,
    *,
    user: Any = None,
    deny_remaining: bool = False,
    observer: PartObserver | None = None,
    controller: AbortController | None = None,
) -> LegOutcome:
    """Continue ``run_id`` here and wait for the leg's outcome (for callers that want
    the result: the command, scripts, tests).

    ``user`` is who asks (``None`` for system callers); a run they may not see is
    :class:`RunNotFound`, one they see but may not resume :class:`NotPermitted`.
    """
    return await arun_here(
        run_id,
        user=user,
        deny_remaining=deny_remaining,
        observer=observer,
        controller=controller,
    )


resume_run = async_to_sync(aresume_run)


# -- stopping -------------------------------------------------------------------------------


def stop_run(
    run_id: str, *, user: Any = None, operator: str = "", reason: str = ""
) -> Run:
    """Stop ``run_id`` on behalf of ``user`` — now if no leg holds it, else at that
    leg's next fence (:mod:`deuz_django.runs.stopping`). A run the user may not see is
    :class:`RunNotFound`; one they see but may not stop :class:`NotPermitted`; one
    completed or stopped already :class:`RunNotStoppable`. ``operator`` (a name given
    in a shell) stops without the user rules, as ``deuz resume --operator`` decides."""
    if not operator:
        if not is_signed_in(user):
            raise NotPermitted("Sign in to stop runs.")
        run = Run.objects.visible(user, run_id)
        if not can_stop_run(user, run):
            raise NotPermitted("You may not stop this run.")
    return request_stop(run_id, user=user, operator=operator, reason=reason.strip())


astop_run = sync_to_async(stop_run)


# -- recovering -----------------------------------------------------------------------------


def recoverable_runs(
    older_than: float, *, run_id: str | None = None, due: bool = False
) -> list[str]:
    """Root runs a dead process left behind, oldest first: mid-run with a lapsed lease, or
    suspended on approvals that are all decided (or too old to decide) but never resumed.

    A run whose last leg failed or was aborted is not recovered (it would fail again);
    ``deuz resume`` continues it explicitly — unless the failure is one recovery retries
    (a checkpoint save failed: ``recover_after`` is set). ``due`` keeps only the runs
    whose backoff has passed (the automatic sweep; operators and readers do not wait).
    ``run_id`` asks about that one run (a reader's crash continuation).
    """
    now = timezone.now()
    idle = Q(updated_at__lt=now - timedelta(seconds=older_than))
    candidates = Run.objects.roots().lease_free(now).filter(idle).order_by("updated_at")
    if run_id is not None:
        candidates = candidates.filter(run_id=run_id)
    if due:
        candidates = candidates.filter(
            Q(recover_after=None) | Q(recover_after__lte=now)
        )
    running = candidates.filter(status=RunStatus.RUNNING).filter(
        Q(last_error="") | Q(recover_after__isnull=False)
    )
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
