"""One way a run continues: claim it, then run its next leg — one verb per act.

Everything that moves a run on — the WebSocket and SSE after a verdict or a crash, the
REST API, the admin, the ``deuz`` command, recovery — claims it the same way
(:func:`deuz_django.runs.claims.claim`): the caller's permission (when a user asks), the
run's lease taken by compare-and-set, the run checked resumable. So the caller learns at
once that the run is busy (:class:`RunBusy`), finished or still waiting for a verdict
(:class:`RunNotResumable`), unknown (:class:`RunNotFound`) or not theirs to resume
(:class:`NotPermitted`). Then one of three verbs says where the leg runs:

- :func:`enqueue_run` (:func:`aenqueue_run`): in the background, the caller never waits
  (:func:`hand_off`): queued through ``django.tasks`` for a worker, the task taking the
  lease over (:func:`deuz_django.runs.tasks.enqueue_claimed_leg`) — or, when the backend
  would run the task inside the caller (the immediate backend), run by this process: on
  its server's event loop (:func:`home_loop`), else in a thread of its own. If the leg is
  lost (a task purged, a process killed), the lease lapses and recovery continues the run;
- :func:`astart_here`: as a task of the running event loop, returned at once (a socket
  may come and go while it runs);
- :func:`arun_here` (:func:`run_here_to_end` from sync code): here, returning the leg's
  outcome once it ended.

Whichever it is, a leg that leaves the run waiting on nothing undecided — standing rules
or grants decided every call it suspended on, or a person did while the leg still held
the lease (their resume found the run busy) — is followed at once by the next leg,
claimed the same way once the previous one released the lease
(:func:`deuz_django.runs.claims.run_legs`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import warnings
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from asgiref.sync import SyncToAsync, async_to_sync, sync_to_async
from django.db import transaction

from ..core import AbortController
from ..exceptions import ProcessStopping, RunBusy, RunNotResumable
from ..models.visibility import Person
from ..storage import leases
from ..storage.leases import Lease
from . import draining, handed_off
from .claims import claim, run_legs
from .legs import PartObserver
from .outcomes import LegOutcome
from .tasks import enqueue_claimed_leg, runs_in_caller

# isort: split
# Moved to .handed_off; the 0.1 path (deuz_django.continuation.join_handed_off) and tests
# import them from here.
from .handed_off import ajoin_handed_off, join_handed_off  # noqa: F401

logger = logging.getLogger("deuz_django")

_running: dict[str, asyncio.Task[LegOutcome]] = {}  # legs this process runs right now
_home_loop: asyncio.AbstractEventLoop | None = None


@dataclass(frozen=True, slots=True)
class Continuation:
    """A claimed run whose next leg runs on the caller's event loop (``leg``), in this
    process's background (``handed_off``) or in a worker (``task``)."""

    run_id: str
    leg: asyncio.Task[LegOutcome] | None = None
    task: Any = None  # the django.tasks TaskResult
    handed_off: Future[LegOutcome] | None = None
    finished: LegOutcome | None = None  # a leg already run to its end

    @property
    def outcome(self) -> LegOutcome | None:
        """How the leg ended, when that is known already (``None`` while it runs)."""
        if self.finished is not None:
            return self.finished
        if self.leg is not None and self.leg.done() and not self.leg.cancelled():
            return self.leg.result()
        background = self.handed_off
        if background is not None and background.done() and not background.cancelled():
            return background.result() if background.exception() is None else None
        if self.task is not None and self.task.is_finished:
            value = self.task.return_value
            # busy: the claim was taken over; stopping: the worker left it to another
            if value and value.get("status") not in ("busy", "stopping"):
                return LegOutcome.from_json(value)
        return None

    async def wait(self) -> LegOutcome | None:
        """The leg's outcome once it ended on this event loop; a leg queued or handed
        off is not waited for.

        Cancelling the waiter cancels the leg, which aborts cooperatively: this returns
        (re-raising the cancellation) only once the leg really stopped and released its
        lease, so a tool of it still running is never raced by a new leg.
        """
        leg = self.leg
        if leg is None:
            return self.outcome
        try:
            return await asyncio.shield(leg)
        except asyncio.CancelledError:
            leg.cancel()
            while not leg.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.shield(leg)
            raise


def enqueue_run(
    run_id: str, *, user: Person | None = None, deny_remaining: bool = False
) -> Continuation:
    """Claim ``run_id`` and continue it in the background (:func:`hand_off`): what a
    surface does once a verdict left nothing undecided. The caller never waits."""
    return hand_off(claim(run_id, user=user, deny_remaining=deny_remaining))


aenqueue_run = sync_to_async(enqueue_run)


async def astart_here(
    run_id: str,
    *,
    user: Person | None = None,
    deny_remaining: bool = False,
    observer: PartObserver | None = None,
    controller: AbortController | None = None,
) -> Continuation:
    """Claim ``run_id`` and start its next leg as a task of this event loop, returned at
    once. ``observer`` sees every canonical part after it was journaled; ``controller``
    aborts the leg."""
    draining.refuse_if_stopping(run_id)
    lease = await sync_to_async(claim)(run_id, user=user, deny_remaining=deny_remaining)
    return start_claimed_here(lease, observer=observer, controller=controller)


async def arun_here(
    run_id: str,
    *,
    user: Person | None = None,
    deny_remaining: bool = False,
    observer: PartObserver | None = None,
    controller: AbortController | None = None,
) -> LegOutcome:
    """Claim ``run_id``, run its next leg here and return how it ended (the command,
    scripts, tests).

    ``user`` is who asks (``None`` for system callers); a run they may not see is
    :class:`RunNotFound`, one they see but may not resume :class:`NotPermitted`.
    """
    continuation = await astart_here(
        run_id,
        user=user,
        deny_remaining=deny_remaining,
        observer=observer,
        controller=controller,
    )
    outcome = await continuation.wait()
    assert outcome is not None  # a leg run here always has one
    return outcome


run_here_to_end = async_to_sync(arun_here)


def start_claimed_here(
    lease: Lease,
    *,
    observer: PartObserver | None = None,
    controller: AbortController | None = None,
) -> Continuation:
    """Start the leg of a claimed run as a task of the running event loop."""
    global _home_loop
    _home_loop = asyncio.get_running_loop()
    run_id = lease.run_id
    leg = asyncio.ensure_future(
        run_legs(lease, observer=observer, controller=controller)
    )
    _running[run_id] = leg
    leg.add_done_callback(lambda done: _forget(run_id, done))
    return Continuation(run_id, leg=leg)


def home_loop() -> asyncio.AbstractEventLoop | None:
    """The running event loop this process runs legs on (a server's), if any: where
    recovery continues runs too, beside the readers that follow them.

    In a thread the server's loop handed a sync call to (a sync view under an ASGI
    server, run through asgiref's ``sync_to_async``), that loop is the home, before any
    leg ran on it; asgiref records it in the thread for ``async_to_sync``.
    """
    for loop in (_calling_loop(), _home_loop):
        if loop is not None and loop.is_running():
            return loop
    return None


def _calling_loop() -> asyncio.AbstractEventLoop | None:
    called = SyncToAsync.threadlocal
    if getattr(called, "main_event_loop_pid", None) != os.getpid():  # forked since
        return None
    loop: asyncio.AbstractEventLoop | None = getattr(called, "main_event_loop", None)
    return loop


def hand_off(lease: Lease) -> Continuation:
    """Start the leg of a claimed run in the background; the caller never waits for it.

    With a worker backend the leg is queued through ``django.tasks``. A backend that
    would run the task inside the caller (the immediate backend:
    :func:`~deuz_django.runs.tasks.runs_in_caller`) would make a web request wait for the
    whole leg, so this process runs it instead, once the caller's transaction commits
    (at once outside one): the leg reads the verdicts and the claim on connections of
    its own. It runs on the server's event loop when there is one (:func:`home_loop`),
    beside the readers that follow the run, else in a thread of its own that ends with
    it. Either way :mod:`deuz_django.runs.draining` knows the leg while it runs, so a SIGTERM
    lets it reach a boundary; a process already stopping takes no leg
    (:class:`ProcessStopping`, the lease given back).
    """
    if not runs_in_caller():
        return Continuation(lease.run_id, task=enqueue_claimed_leg(lease))
    if draining.stopping():
        leases.release(lease)
        raise ProcessStopping(lease.run_id)
    ended: Future[LegOutcome] = Future()

    def start() -> None:
        handed_off.track(ended)
        loop = home_loop()
        if loop is not None:
            _start_on_loop(loop, lease, ended)
        else:
            handed_off.start_in_thread(lease, ended)

    transaction.on_commit(start)
    return Continuation(lease.run_id, handed_off=ended)


def _start_on_loop(
    loop: asyncio.AbstractEventLoop, lease: Lease, ended: Future[LegOutcome]
) -> None:
    def start() -> None:
        leg = start_claimed_here(lease).leg
        assert leg is not None
        leg.add_done_callback(lambda done: _settle(ended, done))

    # A context of its own: the leg must not inherit the request's (asgiref's
    # per-request thread, which ends with the request).
    loop.call_soon_threadsafe(start, context=contextvars.Context())


def _settle(ended: Future[LegOutcome], leg: asyncio.Task[LegOutcome]) -> None:
    if leg.cancelled():
        ended.cancel()
        return
    error = leg.exception()
    if error is not None:
        ended.set_exception(error)
    else:
        ended.set_result(leg.result())


async def acontinue_quietly(run_id: str) -> Continuation | None:
    """Continue the run here unless another leg has it or it cannot move on — what a
    reader does after a verdict or on finding its run abandoned. Never raises."""
    try:
        return await astart_here(run_id)
    except (RunBusy, RunNotResumable, LookupError) as error:  # LookupError: gone,
        # or its agent is unknown
        logger.info("deuz: run %s not continued here: %s", run_id, error)
    except Exception:
        logger.exception("deuz: continuing run %s failed", run_id)
    return None


def _forget(run_id: str, leg: asyncio.Task[LegOutcome]) -> None:
    if _running.get(run_id) is leg:
        del _running[run_id]
    if not leg.cancelled() and leg.exception() is not None:
        logger.error("deuz: leg of run %s failed", run_id, exc_info=leg.exception())


# -- the 0.1 names -------------------------------------------------------------------------
# One function with an ``in_process`` flag meant "block" in its sync form and "return a
# running task" in its async one; each act has its own verb now. The old names stay for
# the code written against 0.1, and say which verb to use.


def continue_run(
    run_id: str,
    *,
    in_process: bool,
    user: Person | None = None,
    deny_remaining: bool = False,
    observer: PartObserver | None = None,
) -> Continuation:
    """Deprecated (0.1): :func:`enqueue_run`, or :func:`run_here_to_end`."""
    _deprecated("continue_run", "run_here_to_end" if in_process else "enqueue_run")
    if not in_process:
        return enqueue_run(run_id, user=user, deny_remaining=deny_remaining)
    outcome = run_here_to_end(
        run_id, user=user, deny_remaining=deny_remaining, observer=observer
    )
    return Continuation(run_id, finished=outcome)


async def acontinue_run(
    run_id: str,
    *,
    in_process: bool,
    user: Person | None = None,
    deny_remaining: bool = False,
    observer: PartObserver | None = None,
    controller: AbortController | None = None,
) -> Continuation:
    """Deprecated (0.1): :func:`astart_here`, or :func:`aenqueue_run`."""
    _deprecated("acontinue_run", "astart_here" if in_process else "aenqueue_run")
    if not in_process:
        return await aenqueue_run(run_id, user=user, deny_remaining=deny_remaining)
    return await astart_here(
        run_id,
        user=user,
        deny_remaining=deny_remaining,
        observer=observer,
        controller=controller,
    )


def run_here(
    lease: Lease,
    *,
    observer: PartObserver | None = None,
    controller: AbortController | None = None,
) -> Continuation:
    """Deprecated (0.1): :func:`start_claimed_here`."""
    _deprecated("run_here", "start_claimed_here")
    return start_claimed_here(lease, observer=observer, controller=controller)


def _deprecated(old: str, new: str) -> None:
    warnings.warn(
        f"deuz_django: {old}() is deprecated; use {new}() "
        "(deuz_django.runs.continuing).",
        DeprecationWarning,
        stacklevel=3,
    )
