"""Steering a run: what a person says to it while it runs or waits.

Every surface — REST, the WebSocket, ``deuz input`` — sends input through
:func:`send_input`. An accepted input is durable at once (a ``RunInput`` row) and is
delivered at the run's next step boundary, as a user message, in the order accepted
(:mod:`deuz_django.core.durable.inputs` has the rules, and what a crash does). The run's
agent says what happens to input sent while a leg runs (``AgentSpec.steering``):

- ``"enqueue"`` (the default): it waits for the next boundary — after the tools of the
  step in progress, or before the next model call;
- ``"interrupt"``: as ``enqueue``, and the leg's model turn in progress, if any, is cut
  short and discarded, in whichever process it runs (:func:`~deuz_django.streaming.live.interrupt`),
  so the model answers the input at once; a tool that is executing is never
  interrupted — the input waits for its result;
- ``"reject"``: refused (:class:`InputRejected`) while a leg holds the run; accepted
  while the run waits for a person.

A suspended run keeps its input queued until a verdict continues it: input never
resumes a run by itself. A run whose leg died keeps it for the leg recovery starts.
Completed and stopped runs take no input (:class:`RunNotSteerable`). Who may steer a run
is who may resume it (:func:`~deuz_django.permissions.can_resume_run`); an ``operator``
(a name given in a shell) needs no permission.
"""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync, sync_to_async
from django.utils import timezone

from ..core.durable import CheckpointNotFoundError, QueuedInput, RunCompletedError
from ..exceptions import InputRejected, NotPermitted, RunNotFound, RunNotSteerable
from ..models import Run, RunStatus
from ..models.visibility import Person
from ..permissions import can_resume_run, is_signed_in
from ..registry import agent_steering
from ..storage.inputs import DjangoInputQueue
from ..streaming import live

logger = logging.getLogger("deuz_django")


def send_input(
    run_id: str,
    text: str,
    *,
    user: Person | None = None,
    operator: str = "",
    input_id: str | None = None,
) -> QueuedInput:
    """Queue ``text`` for ``run_id`` on behalf of ``user`` (or ``operator``); returns the
    input once it is durable. An ``input_id`` sent again returns the input accepted
    under it (a client's retry). Raises :class:`RunNotFound` for a run the user may not
    see, :class:`NotPermitted` for one they may not resume, :class:`RunNotSteerable`
    for a completed or stopped run and :class:`InputRejected` as the agent's policy
    says."""
    run = _steerable_run(run_id, user, operator.strip())
    policy = agent_steering(run.agent)
    if policy == "reject" and _leg_holds(run):
        raise InputRejected(run_id)
    try:
        queued = DjangoInputQueue().put(
            run_id, text, input_id=input_id, user=user, operator=operator.strip()
        )
    except CheckpointNotFoundError:
        raise RunNotFound(f"No run '{run_id}'.") from None
    except RunCompletedError:
        refreshed = Run.objects.named(run_id).first()
        raise _closed(refreshed or run) from None
    logger.info("deuz: run %s: input %d queued", run_id, queued.seq)
    if policy == "interrupt" and run.status == RunStatus.RUNNING:
        async_to_sync(live.interrupt)(run_id)
    return queued


asend_input = sync_to_async(send_input)


def _steerable_run(run_id: str, user: Person | None, operator: str) -> Run:
    """The root run ``user`` may steer (an ``operator`` may steer any), still open."""
    if operator:
        run = Run.objects.roots().named(run_id).first()
        if run is None:
            raise RunNotFound(f"No run '{run_id}'.")
    else:
        if not is_signed_in(user):
            raise NotPermitted("Sign in to send input to runs.")
        run = Run.objects.visible(user, run_id)
        if not can_resume_run(user, run):
            raise NotPermitted("You may not send input to this run.")
    if run.status in (RunStatus.COMPLETED, RunStatus.STOPPED):
        raise _closed(run)
    return run


def _closed(run: Run) -> RunNotSteerable:
    if run.status == RunStatus.STOPPED:
        return RunNotSteerable(
            f"Run '{run.run_id}' was stopped; start a new one or fork it."
        )
    return RunNotSteerable(
        f"Run '{run.run_id}' has completed; start a new one or fork it."
    )


def _leg_holds(run: Run) -> bool:
    """Whether a leg holds the run now (or a claim waits for a worker to run one)."""
    expires = run.lease_expires_at
    return bool(run.lease_owner) and expires is not None and expires > timezone.now()
