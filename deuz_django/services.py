"""The run service: the one module the admin, REST API, WebSocket consumer and the ``deuz``
command call to start runs, decide approvals, continue, fork (:func:`fork_run`), steer
(``send_input``, :mod:`deuz_django.runs.steering`) and stop runs and recover crashed ones.

Every leg — the first one too — is a resume from the run's latest checkpoint, taken
under the run's lease (:mod:`deuz_django.storage.leases`), so exactly one process drives
a run at a time and a crash anywhere is recovered by resuming again. Every surface
continues a run the same way, one verb per act (:mod:`deuz_django.runs.continuing`):
:func:`enqueue_run` in the background, :func:`aresume_run` / :func:`resume_run` here,
returning how its leg ended.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.db import IntegrityError

from .approvals.expiry import EXPIRED_REASON
from .approvals.pending import current_pending
from .approvals.signing import approval_signer
from .approvals.verdicts import (
    RESUMED_WITHOUT_VERDICT,
    Decision,
    RecordedResult,
    Refusal,
    Verdict,
    check_verdict,
    record_verdict,
    state_refusal,
)
from .audit import held_to_the_end
from .core import Message
from .core.exceptions import DeuzError
from .core.messages import coerce_messages
from .exceptions import (
    ApprovalExpired,
    ApprovalNotFound,
    NotPermitted,
    ProcessStopping,
    RunBusy,
    RunExists,
    RunNotResumable,
)
from .models import Approval, Run
from .models.visibility import Person
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
    run_here_to_end,
)
from .runs.forking import afork_run, fork_run
from .runs.outcomes import ABORTED, LegOutcome
from .runs.recoverable import recoverable_runs
from .runs.recovery import who_continues
from .runs.replays import create_replay
from .runs.steering import asend_input, send_input
from .runs.stopping import request_stop
from .storage.db import bounded_atomic
from .storage.store import DjangoSessionStore
from .storage.stream_journal import get_journal

__all__ = [
    "ABORTED",
    "EXPIRED_REASON",
    "RESUMED_WITHOUT_VERDICT",
    "Continuation",
    "Decision",
    "LegOutcome",
    "Recorded",
    "adecide_approval",
    "aenqueue_run",
    "afork_run",
    "approval_signer",
    "arecord_verdicts",
    "areplay_run",
    "aresume_run",
    "asend_input",
    "astart_run",
    "astop_run",
    "current_pending",
    "decide_approval",
    "delete_run",
    "enqueue_run",
    "fork_run",
    "record_checked_verdicts",
    "record_operator_verdict",
    "record_verdicts",
    "recoverable_runs",
    "replay_run",
    "resume_run",
    "send_input",
    "start_run",
    "stop_run",
    "verdict_refusals",
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

    The input becomes the run's first checkpoint (``DjangoSessionStore.start``).
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
        return DjangoSessionStore().start(
            run_id,
            history,
            agent=agent,
            owner=owner if is_signed_in(owner) else None,
            title=title or first_user_text[:200],
        )
    except IntegrityError:
        if Run.objects.filter(run_id=run_id).exists():  # the same id, started before
            raise RunExists(run_id) from None
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


@dataclass(frozen=True, slots=True)
class Recorded:
    """Verdicts on one run recorded by :func:`record_verdicts`, and what became of it:
    ``continued`` when it was continued, ``not_continued`` the error that said why not
    when nothing was left undecided (:class:`ProcessStopping`, :class:`RunBusy`,
    :class:`RunNotResumable`)."""

    decisions: list[Decision]
    continued: Continuation | None = None
    not_continued: DeuzError | None = None

    @property
    def run_ready(self) -> bool:
        """Nothing is left undecided: the run may continue."""
        return self.decisions[-1].run_ready

    @property
    def expired(self) -> list[Approval]:
        """The approvals that were too old to decide: recorded ``expired``."""
        return [d.approval for d in self.decisions if d.expired]

    @property
    def next_step(self) -> str:
        """What happens to the run now, said as it is."""
        if self.continued is not None:
            return f"the run resumes: {who_continues(self.continued)}"
        if isinstance(self.not_continued, ProcessStopping):
            return "this server is shutting down; a server or worker continues the run"
        if isinstance(self.not_continued, (RunBusy, RunNotResumable)):
            return "another request is resuming the run"
        if self.run_ready:
            return "resume the run to continue"
        return "the run still waits for its other approvals"


def verdict_refusals(
    user: Person | None,
    verdicts: Sequence[tuple[Approval, Verdict]],
    *,
    operator: str = "",
) -> list[tuple[int, Refusal]]:
    """Why any of ``verdicts`` may not be recorded, by index (``[]``: all may be).

    ``operator`` names who overrides the user rules from a shell (no user permission
    applies, but the approval must be pending and an approving token still good). An
    approval too old to decide is not refused: every surface records it ``expired``, by
    the system, and its call never runs."""
    refusals = []
    for index, (approval, verdict) in enumerate(verdicts):
        refusal = (
            state_refusal(approval, verdict)
            if operator
            else check_verdict(user, approval, verdict)
        )
        if refusal is not None and not isinstance(refusal.error, ApprovalExpired):
            refusals.append((index, refusal))
    return refusals


def record_verdicts(
    user: Person | None,
    verdicts: Sequence[tuple[Approval, Verdict]],
    *,
    operator: str = "",
    resume: bool = True,
) -> Recorded:
    """The one way a verdict is recorded, whatever the surface (the admin queue and run
    page, action links, REST, the WebSocket, the command): every verdict checked first
    (:func:`verdict_refusals`; the first refusal raises its error and nothing is
    recorded), all recorded in one transaction, then — ``resume`` — the run continued
    in the background once nothing is left undecided (:func:`enqueue_run`).

    The verdicts are on one run. ``resume=False`` leaves continuing to the caller (``deuz
    resume`` runs the leg itself).
    """
    if len({approval.run_id for approval, _verdict in verdicts}) != 1:
        raise ValueError("verdicts: record the verdicts of one run at a time")
    refusals = verdict_refusals(user, verdicts, operator=operator)
    if refusals:
        raise refusals[0][1].error
    return record_checked_verdicts(user, verdicts, operator=operator, resume=resume)


def record_checked_verdicts(
    user: Person | None,
    verdicts: Sequence[tuple[Approval, Verdict]],
    *,
    operator: str = "",
    resume: bool = True,
) -> Recorded:
    """:func:`record_verdicts` for verdicts :func:`verdict_refusals` accepted already
    (the REST API checks a batch itself, to answer with every refusal at once)."""
    with bounded_atomic(), held_to_the_end():
        decisions = [
            record_verdict(approval, user, verdict, operator=operator)
            for approval, verdict in verdicts
        ]
    recorded = Recorded(decisions)
    if not (resume and recorded.run_ready):
        return recorded
    run_id = decisions[-1].approval.run.run_id
    try:
        return replace(recorded, continued=enqueue_run(run_id))
    except (RunBusy, RunNotResumable) as error:  # ProcessStopping is a RunBusy
        return replace(recorded, not_continued=error)


arecord_verdicts = sync_to_async(record_verdicts)


def decide_approval(
    approval: Approval | int,
    *,
    user: Person | None,
    approved: bool,
    reason: str = "",
    token: str | None = None,
    result: RecordedResult | None = None,
    edited_input: dict[str, Any] | None = None,
    allow: Allow | None = None,
    answer: Any = None,
) -> Decision:
    """Record one verdict (:func:`record_verdicts`, without continuing the run: the
    caller continues it when ``decision.run_ready``, e.g. with :func:`enqueue_run`).

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
    verdict = Verdict(
        approved=approved,
        reason=reason,
        token=token,
        result=result,
        edited_input=edited_input,
        allow=allow,
        answer=answer,
    )
    recorded = record_verdicts(user, [(_approval_row(approval), verdict)], resume=False)
    return recorded.decisions[0]


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
    recorded = record_verdicts(
        None, [(approval, verdict)], operator=operator.strip(), resume=False
    )
    return recorded.decisions[0]


# -- continuing -----------------------------------------------------------------------------


# Run the next leg here and wait for its outcome (the command, scripts, tests).
aresume_run = arun_here
resume_run = run_here_to_end


# -- replaying -----------------------------------------------------------------------------


def replay_run(
    run_id: str,
    *,
    user: Person | None,
    agent: str | None = None,
    system: str | None = None,
    operator: str = "",
) -> Run:
    """Replay the completed or stopped run ``run_id`` — with another registered
    ``agent`` and/or ``system`` prompt — feeding its recorded tool outcomes back instead
    of executing any tool, as a new run of ``user``'s started in the background
    (:mod:`deuz_django.runs.replays`). The same rule as resuming it, with
    ``deuz_django.replay_run`` for other users' runs; ``operator`` replays from a shell
    without the user rules."""
    replay = create_replay(
        run_id, user=user, agent=agent, system=system, operator=operator
    )
    enqueue_run(replay.run_id)
    return replay


areplay_run = sync_to_async(replay_run)


# -- stopping -------------------------------------------------------------------------------


def stop_run(
    run_id: str, *, user: Person | None = None, operator: str = "", reason: str = ""
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


def delete_run(run_id: str) -> None:
    """Remove a run with its history, approvals, journal and sub-agent runs."""
    delete_journal(run_id)
    DjangoSessionStore().delete(run_id)


def delete_journal(run_id: str) -> None:
    """Remove a run's stream journal (kept for ``STREAM_RETENTION_DAYS``), not its history."""
    async_to_sync(get_journal().delete)(run_id)
