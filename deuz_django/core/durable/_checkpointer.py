"""Saving a checkpoint at each step boundary, and loading one back (SPEC R6.2, R6.3)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._awaitable import resolve
from ..approvals import ToolApprovalRequest
from ..deps import Deps
from ..exceptions import CheckpointNotFoundError, InputArrived, RunCompletedError
from ..messages import Message
from ..usage import EMPTY_USAGE, Usage, sum_usage, with_total
from .checkpoint import AgentCheckpoint, CheckpointStatus
from .session import SessionStore


@dataclass(frozen=True, slots=True)
class ResumePoint:
    """Where a leg's counters start: the checkpoint's boundary count and cumulative usage."""

    step_index: int
    usage: Usage

    @classmethod
    def of(cls, checkpoint: AgentCheckpoint) -> ResumePoint:
        return cls(checkpoint.step_index, checkpoint.usage)


class Checkpointer:
    """Keeps a run's counters across the boundaries of one leg.

    ``step_index`` counts every boundary saved in every leg; ``base_usage`` is what earlier
    legs used. A failing ``save`` is logged and the run goes on: durability must never
    kill a run. A ``completed`` checkpoint the store refuses because input arrived
    (:class:`InputArrived`) is not saved and not counted: the loop steps on.
    """

    def __init__(
        self,
        store: SessionStore,
        run_id: str,
        deps: Deps,
        *,
        agent_path: tuple[str, ...] = (),
        start: ResumePoint | None = None,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.deps = deps
        self.agent_path = agent_path
        self.step_index = start.step_index if start else 0
        self.base_usage = start.usage if start else EMPTY_USAGE

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
        except InputArrived:
            self.step_index -= 1
            raise
        except Exception as error:
            self.deps.logger.error(
                f"durable: checkpoint save failed for '{step_id}' — {_detail(error)}"
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


async def load_resumable(store: SessionStore, run_id: str) -> AgentCheckpoint:
    """The checkpoint a resume continues: it must exist (R7.3) and not be ``completed``
    (D5: resuming it would call the model again)."""
    checkpoint = await load_checkpoint(store, run_id)
    if checkpoint is None:
        raise CheckpointNotFoundError(run_id)
    if checkpoint.status == "completed":
        raise RunCompletedError(run_id)
    return checkpoint


async def load_best_effort(
    store: SessionStore, run_id: str, deps: Deps
) -> AgentCheckpoint | None:
    """Load for a lookup the run can do without (the D9 counters, a sub-agent's key): a
    store that fails is logged and reads as empty — durability is never a run-killer."""
    try:
        return await load_checkpoint(store, run_id)
    except Exception as error:
        deps.logger.error(
            f"durable: checkpoint load failed for '{run_id}' — {_detail(error)}"
        )
        return None


def _detail(error: Exception) -> str:
    return str(error) or type(error).__name__


def _method(store: SessionStore, name: str) -> Any:
    """A store's async twin (``asave``/``aload``, Django's convention) wins over the sync one,
    so a store whose sync methods block (an ORM) is never called on the event loop."""
    return getattr(store, "a" + name, None) or getattr(store, name)
