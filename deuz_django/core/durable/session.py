"""The storage seam: ``SessionStore``, ``DurableSession`` and the in-memory reference store."""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .checkpoint import AgentCheckpoint
from .inputs import InMemoryInputQueue
from .step_journal import StepJournal


@runtime_checkable
class SessionStore(Protocol):
    """Two required methods over any backend; sync or async implementations both work.

    ``save`` receives the latest snapshot at every boundary (latest save wins per run id);
    ``load`` returns the latest checkpoint or ``None``. A store may add async twins
    ``asave``/``aload`` (Django's naming); the loop then calls those. Stores may also offer
    ``delete(run_id)`` and ``list() -> list[str]`` for tooling; the loops never call them.
    """

    def save(self, checkpoint: AgentCheckpoint) -> Awaitable[None] | None: ...

    def load(
        self, run_id: str
    ) -> AgentCheckpoint | Awaitable[AgentCheckpoint | None] | None: ...


@dataclass(frozen=True, slots=True)
class DurableSession:
    """Opt-in durability for one call: where to checkpoint, and under which run id."""

    store: SessionStore
    run_id: str | None = None


class InMemorySessionStore:
    """Keeps the latest checkpoint per run id, by reference (SPEC R6.1, R8.5); with a
    ``step_journal``, what each step did between checkpoints too; with an
    ``input_queue``, what people said to its runs (:mod:`.inputs`), marked delivered by
    the save of the checkpoint that first holds it."""

    def __init__(
        self,
        *,
        step_journal: StepJournal | None = None,
        input_queue: InMemoryInputQueue | None = None,
    ) -> None:
        self._checkpoints: dict[str, AgentCheckpoint] = {}
        self.step_journal = step_journal
        self.input_queue = input_queue
        if input_queue is not None:
            input_queue.attach(self.load)

    def save(self, checkpoint: AgentCheckpoint) -> None:
        if self.input_queue is not None:
            self.input_queue.record_checkpoint(checkpoint)  # may refuse: InputArrived
        self._checkpoints[checkpoint.run_id] = checkpoint

    def load(self, run_id: str) -> AgentCheckpoint | None:
        return self._checkpoints.get(run_id)

    def delete(self, run_id: str) -> None:
        self._checkpoints.pop(run_id, None)

    def list(self) -> list[str]:
        return list(self._checkpoints)


def create_in_memory_session_store() -> InMemorySessionStore:
    return InMemorySessionStore()
