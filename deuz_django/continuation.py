"""One way a run continues: claim it, then run its next leg here or in a worker.

Everything that moves a run on — the WebSocket and SSE after a verdict or a crash, the
REST API, the admin, the ``deuz`` command, recovery — calls :func:`acontinue_run` or
:func:`continue_run`. The claim is the same for all of them (:func:`deuz_django.claims.claim`): the
caller's permission (when a user asks), the run's lease taken by compare-and-set, the
run checked resumable and its verdicts gathered. So the caller learns at once that the run is busy
(:class:`RunBusy`), finished or still waiting for a verdict (:class:`RunNotResumable`),
unknown (:class:`RunNotFound`) or not theirs to resume (:class:`NotPermitted`). Only
where the leg then runs differs:

- ``in_process=True``: in this process's event loop, as a background task (a socket may
  come and go meanwhile) — or, from sync code, to its end before returning;
- ``in_process=False``: queued through ``django.tasks``; the task takes the lease over
  (:func:`deuz_django.tasks.enqueue_claimed_leg`). If the task is lost, the lease lapses
  and recovery continues the run.

Either way a leg that leaves the run waiting on nothing undecided — standing rules or
grants decided every call it suspended on — is followed at once by the next leg, claimed
the same way once the previous one released the lease (:func:`deuz_django.claims.run_legs`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async

from . import draining
from .claims import claim, run_legs
from .core import AbortController
from .exceptions import RunBusy, RunNotResumable
from .leases import Lease
from .legs import LegOutcome, PartObserver
from .tasks import enqueue_claimed_leg

logger = logging.getLogger("deuz_django")

_running: dict[str, asyncio.Task[LegOutcome]] = {}  # legs this process runs right now
_home_loop: asyncio.AbstractEventLoop | None = None


@dataclass(frozen=True, slots=True)
class Continuation:
    """A claimed run whose next leg runs here (``leg``) or was queued (``task``)."""

    run_id: str
    leg: asyncio.Task[LegOutcome] | None = None
    task: Any = None  # the django.tasks TaskResult
    finished: LegOutcome | None = None  # a leg already run to its end

    @property
    def outcome(self) -> LegOutcome | None:
        """How the leg ended, when that is known already (``None`` while it runs)."""
        if self.finished is not None:
            return self.finished
        if self.leg is not None and self.leg.done() and not self.leg.cancelled():
            return self.leg.result()
        if self.task is not None and self.task.is_finished:
            value = self.task.return_value
            # busy: the claim was taken over; stopping: the worker left it to another
            if value and value.get("status") not in ("busy", "stopping"):
                return LegOutcome.from_json(value)
        return None

    async def wait(self) -> LegOutcome | None:
        """The leg's outcome once it ended here; a queued leg is not waited for.

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


async def acontinue_run(
    run_id: str,
    *,
    in_process: bool,
    user: Any = None,
    deny_remaining: bool = False,
    observer: PartObserver | None = None,
    controller: AbortController | None = None,
) -> Continuation:
    """Claim ``run_id`` and start its next leg: a task of this event loop, or queued.

    ``observer`` (every canonical part, after it was journaled) and ``controller`` (to
    abort the leg) apply to a leg run here.
    """
    if in_process:
        draining.refuse_if_stopping(run_id)
    lease = await sync_to_async(claim)(run_id, user=user, deny_remaining=deny_remaining)
    if not in_process:
        return Continuation(
            run_id, task=await sync_to_async(enqueue_claimed_leg)(lease)
        )
    return run_here(lease, observer=observer, controller=controller)


def run_here(
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
    recovery continues runs too, beside the readers that follow them."""
    loop = _home_loop
    return loop if loop is not None and loop.is_running() else None


def continue_run(
    run_id: str,
    *,
    in_process: bool,
    user: Any = None,
    deny_remaining: bool = False,
    observer: PartObserver | None = None,
) -> Continuation:
    """:func:`acontinue_run` for sync callers; a leg run here has ended on return."""
    if not in_process:
        return Continuation(
            run_id,
            task=enqueue_claimed_leg(
                claim(run_id, user=user, deny_remaining=deny_remaining)
            ),
        )

    async def to_the_end() -> LegOutcome | None:
        continuation = await acontinue_run(
            run_id,
            in_process=True,
            user=user,
            deny_remaining=deny_remaining,
            observer=observer,
        )
        return await continuation.wait()

    return Continuation(run_id, finished=async_to_sync(to_the_end)())


async def acontinue_quietly(run_id: str) -> Continuation | None:
    """Continue the run here unless another leg has it or it cannot move on — what a
    reader does after a verdict or on finding its run abandoned. Never raises."""
    try:
        return await acontinue_run(run_id, in_process=True)
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
