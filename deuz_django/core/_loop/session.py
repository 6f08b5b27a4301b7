"""Where a leg starts: the checkpoint it continues from and the session it saves to
(SPEC R7.2, D5, D9)."""

from __future__ import annotations

from dataclasses import dataclass

from ..deps import Deps
from ..durable._checkpointer import (
    Checkpointer,
    ResumePoint,
    load_best_effort,
    load_resumable,
)
from ..durable.inputs import InputQueue
from ..durable.session import SessionStore
from ..durable.step_journal import StepJournal
from ..messages import Message
from .journaling import journal_of
from .options import LoopOptions
from .steering import queue_of


@dataclass(frozen=True, slots=True)
class LegStart:
    """The history a resume continues (``None``: the caller's messages), the counters
    the leg starts from, and the checkpointer, step journal and — for a root run —
    input queue of a durable leg."""

    history: tuple[Message, ...] | None = None
    start: ResumePoint | None = None
    checkpointer: Checkpointer | None = None
    journal: StepJournal | None = None
    inputs: InputQueue | None = None


async def start_leg(options: LoopOptions, run_id: str | None, deps: Deps) -> LegStart:
    """Load what the leg continues from: a resume's checkpoint (which must exist and
    not be completed), or — for a call naming an existing run — its counters (D9)."""
    start = options.resume_from
    history = None
    store: SessionStore | None = options.session.store if options.session else None
    if options.resume_source is not None:
        store = options.resume_source.store
        checkpoint = await load_resumable(store, options.resume_source.run_id)
        history = checkpoint.messages
        start = ResumePoint.of(checkpoint)
    elif start is None and options.session and options.session.run_id:
        existing = await load_best_effort(
            options.session.store, options.session.run_id, deps
        )
        start = ResumePoint.of(existing) if existing else None
    if store is None or run_id is None:
        return LegStart(history, start)
    checkpointer = Checkpointer(
        store, run_id, deps, agent_path=options.agent_path, start=start
    )
    # People steer the root run; a sub-agent runs inside a tool call, never steered.
    inputs = None if options.agent_path else queue_of(store)
    return LegStart(history, start, checkpointer, journal_of(store), inputs)
