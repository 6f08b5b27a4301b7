"""How a leg ended: the run's status afterwards, and what the leg's end tells the world —
a log line per run event, and the signals (``run_suspended``, ``run_completed``,
``run_failed``) once the leg's transaction commits."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from ..approvals.pending import current_pending
from ..exceptions import RunStopped
from ..models import Run, RunStatus
from ..signals import run_completed, run_failed, run_suspended, send_on_commit
from ..storage.leases import Lease
from . import stopping

logger = logging.getLogger("deuz_django")


ABORTED = "The leg was aborted."


@dataclass(frozen=True, slots=True)
class LegOutcome:
    """How a leg ended: the run's status afterwards, and the error if the leg failed."""

    run_id: str
    status: str
    finish_reason: str | None
    pending_approvals: int
    error: str | None = None

    @property
    def decided(self) -> bool:
        """The run suspended, but every call it waits on is decided already (standing
        rules or grants decided them as it suspended): it may continue at once."""
        return (
            self.status == RunStatus.SUSPENDED
            and self.pending_approvals == 0
            and self.error is None
        )

    def to_json(self) -> dict[str, Any]:
        """What a background task returns (task results are JSON)."""
        return {
            "runId": self.run_id,
            "status": self.status,
            "finishReason": self.finish_reason,
            "pendingApprovals": self.pending_approvals,
            "error": self.error,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LegOutcome:
        return cls(
            run_id=data["runId"],
            status=data["status"],
            finish_reason=data["finishReason"],
            pending_approvals=data["pendingApprovals"],
            error=data["error"],
        )


def record_error(lease: Lease, error: str) -> bool:
    """Keep the failed leg's error on the run; ``False`` when the lease was taken over
    (the run is another process's now, and did not fail)."""
    return Run.objects.held_by(lease).update(last_error=error[:2000]) == 1


def stopped_outcome(lease: Lease, stop: RunStopped) -> LegOutcome:
    """The run was asked to stop, or reached a run-wide limit, before the leg began:
    the stop takes effect, and no leg runs."""
    if stop.limit:
        stopping.stop_by_system(lease.run_id, sentence(stop.limit))
    return leg_outcome(lease, None, None, False)


def sentence(problem: str) -> str:
    return f"{problem[:1].upper()}{problem[1:]}."


def leg_outcome(
    lease: Lease, finish_reason: str | None, error: str | None, failed: bool
) -> LegOutcome:
    """How the leg ended — once a stop asked for meanwhile took effect (the leg still
    holds the lease)."""
    run_id = lease.run_id
    run = Run.objects.get(run_id=run_id)
    if run.stop_requested_at is not None and run.status != RunStatus.STOPPED:
        stopping.apply_requested_stop(lease)
        run.refresh_from_db()
    pending = list(current_pending(run))
    if failed:
        logger.warning("deuz: run %s failed: %s", run_id, error or ABORTED)
        send_on_commit(run_failed, Run, run=run, error=error or ABORTED)
    elif run.status == RunStatus.SUSPENDED:
        logger.info(
            "deuz: run %s suspended: waits for %d decision(s)", run_id, len(pending)
        )
        send_on_commit(run_suspended, Run, run=run, approvals=pending)
    elif run.status == RunStatus.COMPLETED and error is None:
        logger.info("deuz: run %s completed", run_id)
        send_on_commit(run_completed, Run, run=run)
    return LegOutcome(
        run_id=run_id,
        status=run.status,
        finish_reason=finish_reason,
        pending_approvals=len(pending),
        error=error,
    )
