"""Resuming a stored run: the checkpoint's history is the messages (SPEC §7, D5)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Unpack

from .session import SessionStore

if TYPE_CHECKING:
    from ..generate import CallOptions, StreamChatResult
    from ..results import GenerateTextResult


# The loop imports this package for its checkpointer, so the entry points are imported
# when called rather than at module load (which would be a cycle).


async def resume_from_checkpoint(
    store: SessionStore, run_id: str, **options: Unpack[CallOptions]
) -> GenerateTextResult:
    """Continue ``run_id`` where its latest checkpoint left it.

    Verdicts in ``approval_responses`` settle the trailing pending calls (approved calls
    execute, denied and unanswered ones become ``is_error`` results); counters continue.
    Raises :class:`~deuz_django.core.exceptions.CheckpointNotFoundError` for an unknown run
    and :class:`~deuz_django.core.exceptions.RunCompletedError` for a completed one.
    """
    from ..generate import drain, resume_run

    return await drain(resume_run(store, run_id, dict(options)))


def resume_stream_from_checkpoint(
    store: SessionStore, run_id: str, **options: Unpack[CallOptions]
) -> StreamChatResult:
    """The streaming twin: returns at once with ``run_id`` set; errors arrive as parts."""
    from ..generate import StreamChatResult, resume_run

    try:
        run = resume_run(store, run_id, dict(options))
    except (TypeError, ValueError) as error:
        return StreamChatResult.failed(error, run_id=run_id)
    return StreamChatResult(run)
