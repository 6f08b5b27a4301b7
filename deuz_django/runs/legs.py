"""One leg of a run, under its lease: gather the verdicts, run the loop from the latest
checkpoint, journal every part, renew the lease while it runs, and say how it ended.

The run service (:mod:`deuz_django.services`) takes or receives the lease and calls
:func:`run_leg`; everything a leg does between taking its lease and releasing it is here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from asgiref.sync import sync_to_async
from django.db import DatabaseError
from django.db.models import F
from django.utils import timezone

from ..approvals.asking import record_suspension
from ..approvals.settling import close_undecided, collect_verdicts, settle_max_age_ms
from ..approvals.signing import approval_signer
from ..core import (
    AbortController,
    Deps,
    ErrorPart,
    ReplayDiverged,
    StreamPart,
    TurnInterrupter,
    tracing,
)
from ..core.durable import resume_stream_from_checkpoint
from ..core.generate import StreamChatResult
from ..exceptions import (
    CheckpointSaveFailed,
    LeaseLost,
    ProcessStopping,
    RunNotFound,
    RunNotResumable,
    RunStopped,
)
from ..models import Run, RunStatus
from ..models.visibility import Person
from ..registry import AgentSpec, agent_pricer, load_agent
from ..storage import leases
from ..storage.db import discard_if_broken
from ..storage.leases import Lease
from ..storage.step_journal import ExecutionCounts
from ..storage.store import DjangoSessionStore
from ..streaming.live import LegStream
from . import draining, stopping
from .lease_renewal import keep_lease
from .outcomes import (
    ABORTED,
    LegOutcome,
    leg_outcome,
    record_error,
    sentence,
    stopped_outcome,
)
from .replays import replay_spec
from .threads import with_django_threads

logger = logging.getLogger("deuz_django")

PartObserver = Callable[[StreamPart], Awaitable[None]]


def check_may_continue(
    run_id: str, *, deny_remaining: bool = False, user: Person | None = None
) -> Run:
    """Under the lease, before a leg: the run exists, is not completed, was not asked to
    stop (:class:`RunStopped`: the lease holder applies it), and every call it waits on
    is decided — with ``deny_remaining`` the undecided ones are denied now, on
    ``user``'s behalf (:func:`~deuz_django.approvals.settling.close_undecided`)."""
    run = Run.objects.named(run_id).first()
    if run is None:
        raise RunNotFound(f"No run '{run_id}'.")
    if run.status == RunStatus.COMPLETED:
        raise RunNotResumable(f"Run '{run_id}' is completed.")
    if run.status == RunStatus.STOPPED or run.stop_requested_at is not None:
        raise RunStopped(f"Run '{run_id}' was asked to stop; nothing continues it.")
    close_undecided(run, deny_remaining=deny_remaining, user=user)
    return run


def _prepare(
    run_id: str,
) -> tuple[Run, AgentSpec, list[dict[str, Any]], float | None]:
    """The run, its agent, the verdicts the leg settles with, and the token age they
    pass at; :class:`RunStopped` when the run may not start another leg."""
    run = check_may_continue(run_id)
    verdicts = collect_verdicts(run)
    spec = replay_spec(run, load_agent(run.agent))
    problem = spec.run_limits.legs_problem(run.legs + 1)
    if problem is not None:
        raise RunStopped(f"Stopped by the system: {problem}.", limit=problem)
    return run, spec, verdicts, settle_max_age_ms(verdicts, run)


async def _open_stream(
    lease: Lease,
    controller: AbortController,
    interrupter: TurnInterrupter | None = None,
) -> LegStream | None:
    """The leg's journal and its listener for cancels (and interrupts, for an agent
    whose ``steering`` is ``"interrupt"``); a journal that cannot open is logged, and
    the leg runs without it (a run never depends on its readers). The run is marked
    ``journal_open`` until the leg's end is journaled, so that if this process dies
    first, recovery closes the journal for the readers."""
    try:
        await _database(_mark_journal_open, lease)
        return await LegStream.open(
            lease.run_id, controller, fence=lease, interrupter=interrupter
        )
    except Exception:
        logger.exception(
            "deuz: the stream journal of run %s did not open", lease.run_id
        )
        return None


async def _drain(
    leg: StreamChatResult,
    run_id: str,
    stream: LegStream | None,
    observer: PartObserver | None,
    trace: tracing.RunTrace,
) -> None:
    """Pull every part into the journal, then to ``observer``; a failing observer is
    logged and dropped, never the leg. The leg runs in this task (``drive``). Once the
    run's first leg started its trace, the trace context is stored for later legs."""
    untraced = not trace.traceparent
    async for part in leg.drive():
        if untraced and trace.started:
            untraced = False
            await sync_to_async(_store_trace)(run_id, trace.traceparent)
        if stream is not None:
            stream.add(part)
        if observer is None:
            continue
        try:
            await observer(part)
        except Exception:
            logger.exception(
                "deuz: the part observer of run %s failed; the leg goes on without it",
                run_id,
            )
            observer = None


async def _finish_after_cancel(
    draining: asyncio.Future[None], controller: AbortController
) -> None:
    """The caller was cancelled: abort the leg and wait until it really stopped, so the
    lease is never released while a tool of this leg still runs."""
    controller.abort(asyncio.CancelledError("the leg's caller was cancelled"))
    while not draining.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(draining)


async def run_leg(
    lease: Lease,
    *,
    observer: PartObserver | None = None,
    controller: AbortController | None = None,
) -> LegOutcome:
    """The leg itself, under ``lease`` (a claim's: the verdicts are gathered already),
    which it renews while it runs and releases after.

    A checkpoint save that fails stops the leg at once (nothing more runs with nothing
    durable recorded) and leaves the run to recovery; so does a lease found lapsed (the
    process was held up past it: a GC pause, a stopped VM) and a shutdown (SIGTERM), at
    the leg's next boundary. Either way the lease is released for another process.
    """
    run_id = lease.run_id
    controller = controller or AbortController()
    draining.install()
    # Registered until the lease is released: a shutdown waits for that.
    with draining.leg_running(run_id, controller):
        renewer = asyncio.ensure_future(keep_lease(lease, controller))
        released: dict[str, Any] = {}
        try:
            try:
                run, leg, stream = await _start(lease, controller)
            except RunStopped as stop:
                return await _database(stopped_outcome, lease, stop)
            except Exception as failure:  # e.g. no approval secret under a bare daphne
                return await _failed_to_start(lease, controller, failure, released)
            logger.info(
                "deuz: run %s %s (leg %d)",
                run_id,
                "resumed" if run.legs else "started",
                run.legs + 1,
            )
            # The leg's task starts inside the run's trace, so its spans join the
            # trace of the run's earlier legs.
            with tracing.run_trace(run.trace_context, agent=run.agent) as trace:
                draining_task = asyncio.ensure_future(
                    _drain(leg, run_id, stream, observer, trace)
                )
            try:
                # The leg runs in a task of its own, shielded: cancelling the caller
                # aborts the leg cooperatively instead of tearing it down mid-tool.
                await asyncio.shield(draining_task)
            except asyncio.CancelledError:
                await _finish_after_cancel(draining_task, controller)
                raise
            finally:
                if stream is not None and await _close_stream(stream):
                    released["journal_open"] = False
            return await _ending(lease, leg, controller, released)
        finally:
            renewer.cancel()
            await asyncio.gather(renewer, return_exceptions=True)
            try:
                await _database(leases.release, lease, **released)
            except DatabaseError:
                logger.exception(
                    "deuz: releasing the lease on run %s failed; it lapses", run_id
                )


async def _ending(
    lease: Lease,
    leg: StreamChatResult,
    controller: AbortController,
    released: dict[str, Any],
) -> LegOutcome:
    """How a leg that ran ended, and what its release records on the run (``released``):
    a stop is not a failure, nor is a replay that diverged (it stops); a lost lease or
    a failed save leaves the run to recovery; a shutdown hands it over; a failed or
    aborted leg keeps its error for the admin."""
    run_id = lease.run_id
    error: str | None = None
    finish_reason: str | None = None
    failed = False
    reason = controller.signal.reason
    try:
        finish_reason = (await leg.result()).finish_reason
    except (RunStopped, ReplayDiverged) as stop:  # a limit; a replay that diverged
        reason = stop
    except Exception as exc:
        error = str(exc) or type(exc).__name__
    if isinstance(reason, RunStopped):
        error = None  # a stop is not a failure: the outcome says stopped
        if reason.limit:
            await _database(stopping.stop_by_system, run_id, sentence(reason.limit))
    elif isinstance(reason, ReplayDiverged):  # the replay stops where it diverged
        await _database(stopping.stop_by_system, run_id, str(reason))
    elif isinstance(reason, (LeaseLost, CheckpointSaveFailed)):
        # Not the run's failure: recovery continues it from its last boundary (the
        # database may be back; a lease that lapsed while this leg was held up is
        # free). A lease taken over is the new holder's: this release, fenced by
        # generation, leaves its row alone.
        error = str(reason)
        released.update(last_error=error[:2000], recover_after=timezone.now())
    elif isinstance(reason, ProcessStopping):
        pass  # handed over: another process continues the run at once
    elif error is not None or finish_reason == "aborted":
        # Recovery leaves a failed or aborted run alone; an explicit resume continues it.
        failed = await _database(record_error, lease, error or ABORTED)
    elif reason is None:
        released.update(recovery_attempts=0, recover_after=None)
    return await _outcome_or_unknown(lease, finish_reason, error, failed)


async def _start(
    lease: Lease, controller: AbortController
) -> tuple[Run, StreamChatResult, LegStream | None]:
    """The run, its leg from the latest checkpoint, and the leg's stream journal."""
    run_id = lease.run_id
    run, spec, verdicts, max_age_ms = await sync_to_async(_prepare)(run_id)
    options = spec.call_options()
    limits = spec.run_limits
    options["deps"] = replace(
        with_django_threads(options.get("deps") or Deps(logger=logger)),
        fence=leases.lease_fence(
            lease, controller.abort, limits=limits, price=agent_pricer(run.agent)
        ),
    )
    interrupter = TurnInterrupter() if spec.steering == "interrupt" else None
    options.update(
        approval_responses=verdicts,
        approval_signer=approval_signer(),
        approval_max_age_ms=max_age_ms,
        signal=controller.signal,
        interrupt=interrupter,
    )

    def save_failed(error: BaseException) -> None:
        controller.abort(CheckpointSaveFailed(f"A checkpoint save failed: {error}"))

    store = DjangoSessionStore(
        lease=lease,
        on_lease_lost=controller.abort,
        on_save_failed=save_failed,
        on_saved=lambda: draining.stop_at_boundary(run_id, controller),
        on_suspended=record_suspension,
        run=run,
    )
    store.step_journal.executions = ExecutionCounts(run, limits)
    leg = resume_stream_from_checkpoint(store, run_id, **options)
    return run, leg, await _open_stream(lease, controller, interrupter)


async def _database[T](function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``function`` in the ORM's thread; a connection it found broken is discarded."""

    def call() -> T:
        try:
            return function(*args, **kwargs)
        except DatabaseError:
            discard_if_broken()
            raise

    return await sync_to_async(call)()


async def _outcome_or_unknown(
    lease: Lease, finish_reason: str | None, error: str | None, failed: bool
) -> LegOutcome:
    """How the leg ended; when the database cannot say (it went away after the last
    save), the outcome says that instead of raising the driver's error."""
    run_id = lease.run_id
    try:
        return await _database(leg_outcome, lease, finish_reason, error, failed)
    except DatabaseError as db_error:
        logger.exception("deuz: reading how run %s's leg ended failed", run_id)
        return LegOutcome(
            run_id=run_id,
            status="unknown",
            finish_reason=finish_reason,
            pending_approvals=0,
            error=error
            or f"The leg ended, but the database could not confirm it: {db_error}",
        )


async def _close_stream(stream: LegStream) -> bool:
    """Journal the leg's end; ``False`` (logged) when that failed."""
    try:
        await stream.close()
    except Exception:
        logger.exception(
            "deuz: closing the stream journal of run %s failed", stream.run_id
        )
        return False
    return True


def _mark_journal_open(lease: Lease) -> None:
    """The leg's journal is open; and the leg is counted (``Run.legs``), in the same
    update."""
    Run.objects.held_by(lease).update(journal_open=True, legs=F("legs") + 1)


def _store_trace(run_id: str, traceparent: str) -> None:
    """Keep the trace the run's first leg started; a failure costs the trace, not the leg."""
    try:
        Run.objects.filter(run_id=run_id, trace_context="").update(
            trace_context=traceparent
        )
    except Exception:
        logger.exception("deuz: storing the trace context of run %s failed", run_id)


async def _failed_to_start(
    lease: Lease,
    controller: AbortController,
    error: Exception,
    released: dict[str, Any],
) -> LegOutcome:
    """The leg could not start (a misconfiguration the system checks could not see,
    such as an approval secret missing under a server that skips them): its readers get
    the error and the leg's end — never a silent wait — and the run keeps the error,
    as a failed leg does."""
    reason = str(error) or type(error).__name__
    failed = await _database(record_error, lease, reason)  # before readers hear it
    stream = await _open_stream(lease, controller)
    if stream is not None:
        stream.add(ErrorPart(error))
        if await _close_stream(stream):
            released["journal_open"] = False
    return await _outcome_or_unknown(lease, None, reason, failed)
