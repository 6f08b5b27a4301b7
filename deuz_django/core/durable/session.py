"""The storage seam: ``SessionStore`` and ``DurableSession`` (the in-memory reference
store is :mod:`.memory`'s)."""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .checkpoint import AgentCheckpoint


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
