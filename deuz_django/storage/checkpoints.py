"""A checkpoint as a run's rows, and back: the run row's columns a save writes, and the
checkpoint a row and its history stand for."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from ..core import Message
from ..core.approvals import ToolApprovalRequest
from ..core.durable import AgentCheckpoint
from ..core.durable.codec import decode_json, encode_json
from ..core.usage import Usage
from ..models import Run, RunMessage
from .history import decode_message


def stored_checkpoint(run: Run) -> AgentCheckpoint | None:
    """The run's checkpoint, read from its history rows; ``None`` for a row without one
    yet — the step journal creates a sub-agent's row when its first turn is recorded,
    before its first checkpoint, and that row must not read as a checkpoint with no
    history."""
    if run.message_count == 0:
        return None
    rows = RunMessage.objects.filter(run_id=run.pk).order_by("index")
    messages = tuple(
        decode_message(data, f"{run.run_id}.messages[{index}]")
        for index, data in rows.values_list("index", "data")
    )
    return checkpoint_of(run, messages)


def checkpoint_of(run: Run, messages: tuple[Message, ...]) -> AgentCheckpoint:
    """The checkpoint a run row and its history stand for."""
    pending = (
        tuple(
            ToolApprovalRequest.from_json(item)
            for item in decode_json(run.pending_approvals)
        )
        if run.pending_approvals
        else None
    )
    created_at = run.checkpoint_created_at
    return AgentCheckpoint(
        run_id=run.run_id,
        step_id=f"{run.run_id}#{run.step_index}",
        step_index=run.step_index,
        status=run.status,  # type: ignore[arg-type]
        messages=messages,
        usage=Usage.from_json(run.usage or {}),
        pending_approvals=pending,
        agent_path=tuple(run.agent_path) if run.agent_path else None,
        created_at=int(created_at) if created_at.is_integer() else created_at,
    )


def checkpoint_columns(checkpoint: AgentCheckpoint) -> dict[str, Any]:
    """The run row's columns a save writes (a fork's rows start with them too)."""
    pending = checkpoint.pending_approvals or ()
    return {
        "status": checkpoint.status,
        "step_index": checkpoint.step_index,
        "usage": checkpoint.usage.to_json(),
        "pending_approvals": encode_json([r.to_json() for r in pending])
        if pending
        else "",
        "agent_path": list(checkpoint.agent_path) if checkpoint.agent_path else None,
        "checkpoint_created_at": checkpoint.created_at,
        "message_count": len(checkpoint.messages),
        "last_error": "",
        # A boundary reached is progress: recovery counts attempts since one.
        "recovery_attempts": 0,
        "recover_after": None,
        "updated_at": timezone.now(),
    }
