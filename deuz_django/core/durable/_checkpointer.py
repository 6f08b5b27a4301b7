"""Saving a checkpoint at each step boundary, best-effort (SPEC R6.2, R6.3)."""

from __future__ import annotations

from typing import Any

from .._awaitable import resolve
from ..approvals import ToolApprovalRequest
from ..deps import Deps
from ..messages import Message
from ..usage import EMPTY_USAGE, Usage, sum_usage, with_total
from .checkpoint import AgentCheckpoint, CheckpointStatus
from .session import SessionStore


class Checkpointer:
    """Keeps a run's counters across the boundaries of one leg.

    ``step_index`` counts every boundary saved in every leg; ``base_usage`` is what earlier
    legs used. A failing ``save`` is logged and the run goes on: durability must never
    kill a run.
    """

    def __init__(
        self,
        store: SessionStore,
        run_id: str,
        deps: Deps,
        *,
        agent_path: tuple[str, ...] = (),
        step_index: int = 0,
        base_usage: Usage = EMPTY_USAGE,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.deps = deps
        self.agent_path = agent_path
        self.step_index = step_index
        self.base_usage = base_usage

    def cumulative(self, leg_usage: Usage) -> Usage:
        if self.base_usage == EMPTY_USAGE:
            return with_total(leg_usage)
        return with_total(sum_usage(self.base_usage, leg_usage))

    async def save(
        self,
        status: CheckpointStatus,
        messages: tuple[Message, ...],
        leg_usage: Usage,
        pending_approvals: tuple[ToolApprovalRequest, ...] | None = None,
    ) -> None:
        self.step_index += 1
        step_id = f"{self.run_id}#{self.step_index}"
        checkpoint = AgentCheckpoint(
            run_id=self.run_id,
            step_id=step_id,
            step_index=self.step_index,
            status=status,
            messages=messages,
            usage=self.cumulative(leg_usage),
            pending_approvals=pending_approvals or None,
            agent_path=self.agent_path or None,
            created_at=self.deps.clock.now(),
        )
        try:
            await resolve(_method(self.store, "save")(checkpoint))
        except Exception as error:
            detail = str(error) or type(error).__name__
            self.deps.logger.error(
                f"durable: checkpoint save failed for '{step_id}' — {detail}"
            )


async def load_checkpoint(store: SessionStore, run_id: str) -> AgentCheckpoint | None:
    """Load through a sync or async store, refusing a value that is not a checkpoint."""
    checkpoint = await resolve(_method(store, "load")(run_id))
    if checkpoint is not None and not isinstance(checkpoint, AgentCheckpoint):
        raise TypeError(
            f"{type(store).__name__}.load({run_id!r}) returned "
            f"{type(checkpoint).__name__}, expected AgentCheckpoint or None"
        )
    return checkpoint


def _method(store: SessionStore, name: str) -> Any:
    """A store's async twin (``asave``/``aload``, Django's convention) wins over the sync one,
    so a store whose sync methods block (an ORM) is never called on the event loop."""
    return getattr(store, "a" + name, None) or getattr(store, name)
