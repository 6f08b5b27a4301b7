"""Deadlines onto approval rows: when a suspended run's gated calls are recorded, each
gets the deadline its agent sets (:mod:`deuz_django.deadlines`) as plain row state —
when a reminder is due, when the call times out or escalates, whom to and by how much —
which the deadline sweep (:mod:`deuz_django.deadlines.sweep`) acts on without building
the agent again.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from ..core.exceptions import DeuzError
from ..models import Approval, ApprovalKind, ApprovalStatus
from ..registry import agent_chains, agent_deadlines
from . import Deadline

logger = logging.getLogger("deuz_django")


def schedule_deadlines(
    run_pk: int, step_index: int, approval_ids: Sequence[str]
) -> None:
    """Give the gated calls just recorded for the run's ask at ``step_index`` the
    deadlines their agent sets (in the suspension's transaction, before anyone is told
    of them). Deadlines that cannot be read leave the calls waiting for a person, as
    without one (logged)."""
    rows = list(
        Approval.objects.filter(
            run_id=run_pk,
            step_index=step_index,
            approval_id__in=approval_ids,
            kind__in=[ApprovalKind.APPROVAL, ApprovalKind.QUESTION],
            status=ApprovalStatus.PENDING,
            remind_at=None,
            deadline_at=None,
        ).values_list("pk", "tool_name", "agent_path", "created_at", "run__agent")
    )
    if not rows:
        return
    try:
        rules = agent_deadlines(rows[0][4])
        chains = agent_chains(rows[0][4])
    except (LookupError, DeuzError, ImproperlyConfigured):
        logger.exception("deuz: the deadlines of run %s cannot be read", run_pk)
        return
    for pk, tool_name, agent_path, created_at, _agent in rows:
        chain = chains(tool_name, agent_path or ())
        first = None if chain is None else chain.stage(0).deadline
        deadline = first or rules.for_call(tool_name, agent_path or ())
        if deadline is not None:
            Approval.objects.filter(pk=pk).update(
                **deadline_fields(deadline, created_at)
            )


def deadline_fields(deadline: Deadline, requested_at: datetime) -> dict[str, Any]:
    """An approval row's deadline columns for ``deadline``, counted from
    ``requested_at`` (a call's request, or a chain's stage being asked)."""

    def at(delay: timedelta | None) -> datetime | None:
        return None if delay is None else requested_at + delay

    return {
        "remind_at": at(deadline.remind_after),
        "deadline_at": at(deadline.after),
        "escalate_to": deadline.escalate_to,
        "extend_by": deadline.extend_by,
    }
