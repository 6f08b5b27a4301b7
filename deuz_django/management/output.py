"""What the ``deuz`` command tells its caller: exit codes, and plain-text tables, times
and cut-short titles."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone

from .. import services
from ..models import Approval, Run

# Exit codes (``CommandError.returncode``).
RUN_ERROR = 1  # a run is busy, not resumable or unknown, or its leg failed
BAD_ARGUMENTS = 2
NOT_PERMITTED = 3  # a verdict the decider may not give (nothing is recorded)
TITLE_WIDTH = 40


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()
    ]
    lines.append("  ".join("-" * w for w in widths))
    lines += [
        "  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in rows
    ]
    return "\n".join(lines)


def when(moment: datetime | None) -> str:
    """A moment in the current time zone, with its UTC offset."""
    if moment is None:
        return "-"
    return timezone.localtime(moment).isoformat(sep=" ", timespec="seconds")


def short(text: str, width: int = TITLE_WIDTH) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def owner(run: Run) -> str:
    return run.owner.get_username() if run.owner else "-"


def deadline(approval: Approval) -> str:
    """What a call's deadline does and when: ``escalates to Finance leads at …``,
    ``times out at …``; for a decided call whom it had been escalated to."""
    escalated = f"escalated to {approval.escalate_to}" if approval.escalated_at else ""
    if not approval.is_pending or approval.deadline_at is None:
        return escalated or "-"
    action = (
        f"escalates to {approval.escalate_to} at"
        if approval.escalates
        else "times out at"
    )
    return ", ".join(
        filter(None, [escalated, f"{action} {when(approval.deadline_at)}"])
    )


def run_json(run: Run) -> dict[str, Any]:
    """A run as ``runs --json`` prints it: one JSON Lines object."""
    return {
        "runId": run.run_id,
        "title": run.title,
        "agent": run.agent,
        "owner": run.owner.get_username() if run.owner else None,
        "status": run.status,
        "stepIndex": run.step_index,
        "usage": run.usage,
        "pendingApprovals": services.current_pending(run).count(),
        "lastError": run.last_error or None,
        "stop": None if run.stop_requested_at is None else run.stop_description,
        "createdAt": timezone.localtime(run.created_at).isoformat(),
        "updatedAt": timezone.localtime(run.updated_at).isoformat(),
    }
