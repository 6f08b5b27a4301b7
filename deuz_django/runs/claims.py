"""Claiming a run to move it on, and moving it on for as long as nobody must be asked.

:func:`claim` is the claim every continuation makes (:mod:`deuz_django.runs.continuing`,
recovery): the caller's permission, the run's lease, the run checked resumable (its
verdicts are gathered by the leg, once). :func:`run_legs` runs a claimed run's leg
wherever the continuation put it — this process's event loop, or a worker's task — and,
when the leg leaves the run waiting only on calls that are decided already (a standing
rule or a grant decided each one as the run suspended,
:mod:`deuz_django.rules.automatic`), claims the run again once the leg released its
lease and runs the next leg there too. So a run that standing rules carry completes with
no person, and no process is ever told it is busy by its own previous leg.
"""

from __future__ import annotations

import logging

from asgiref.sync import sync_to_async

from ..approvals.pending import current_pending
from ..core import AbortController
from ..exceptions import NotPermitted, RunBusy, RunNotResumable, RunStopped
from ..models import Run, RunStatus
from ..models.visibility import Person
from ..permissions import can_resume_run, is_signed_in
from ..registry import agent_tools
from ..storage import leases
from ..storage.leases import Lease
from . import draining, stopping
from .legs import PartObserver, check_may_continue, run_leg
from .outcomes import LegOutcome

logger = logging.getLogger("deuz_django")


def claim(
    run_id: str, *, user: Person | None = None, deny_remaining: bool = False
) -> Lease:
    """Take the run's lease and check it may continue.

    ``user`` is who asks (``None`` for the system: verdicts that left nothing undecided,
    tasks, recovery). With ``deny_remaining`` the undecided approvals are denied now, in
    the caller, recorded as ``user``'s.
    """
    if user is not None:
        _check_may_resume(run_id, user)
    lease = leases.acquire(run_id)
    try:
        run = check_may_continue(run_id, deny_remaining=deny_remaining, user=user)
        agent_tools(run.agent)  # an agent that cannot be built fails the claim
    except RunStopped:
        # Asked to stop while no leg held it (its leg died first): the claim applies it.
        stopping.apply_requested_stop(lease)
        leases.release(lease)
        stopped = Run.objects.select_related("stopped_by").named(run_id).get()
        raise RunNotResumable(
            f"Run '{run_id}' is stopped. {stopped.stop_description}"
        ) from None
    except BaseException:
        leases.release(lease)
        raise
    return lease


def _check_may_resume(run_id: str, user: Person | None) -> None:
    if not is_signed_in(user):
        raise NotPermitted("Sign in to resume runs.")
    run = Run.objects.visible(user, run_id)
    if not can_resume_run(user, run):
        raise NotPermitted("You may not resume this run.")


async def run_legs(
    lease: Lease,
    *,
    observer: PartObserver | None = None,
    controller: AbortController | None = None,
) -> LegOutcome:
    """The claimed run's leg, then its next ones while each leaves the run waiting on
    nothing undecided; the last leg's outcome. A run another process claims in between,
    or a process that is stopping, ends the chain: the claimant, or recovery, goes on."""
    while True:
        outcome = await run_leg(lease, observer=observer, controller=controller)
        if draining.stopping():
            return outcome
        if not outcome.decided and not await sync_to_async(_decided_meanwhile)(outcome):
            return outcome
        try:
            lease = await sync_to_async(claim)(lease.run_id)
        except (RunBusy, RunNotResumable, LookupError) as error:
            logger.info("deuz: run %s not continued here: %s", lease.run_id, error)
            return outcome


def _decided_meanwhile(outcome: LegOutcome) -> bool:
    """Whether every call the leg suspended on was decided before it released the lease:
    the verdict's own resume then found the run busy, and left continuing it to this
    leg (else the run would wait for the recovery sweep)."""
    if outcome.status != RunStatus.SUSPENDED or outcome.error is not None:
        return False
    run = Run.objects.filter(run_id=outcome.run_id).first()
    return (
        run is not None
        and run.status == RunStatus.SUSPENDED
        and not current_pending(run).exists()
    )
