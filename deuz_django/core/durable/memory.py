"""The in-memory reference store: checkpoints by reference, a step journal, an input
queue, forks."""

from __future__ import annotations

from collections.abc import Mapping

from ..deps import SystemClock
from ..exceptions import RunExistsError
from ..tools import Tool
from .checkpoint import AgentCheckpoint
from .forking import ForkEdit, plan_fork
from .inputs import InMemoryInputQueue
from .run_ids import parent_run_id
from .step_journal import InMemoryStepJournal, JournalStep, StepJournal


class InMemorySessionStore:
    """Keeps the latest checkpoint per run id, by reference (SPEC R6.1, R8.5); with a
    ``step_journal``, what each step did between checkpoints too; with an
    ``input_queue``, what people said to its runs (:mod:`.inputs`), marked delivered by
    the save of the checkpoint that first holds it. It forks runs (the reference
    :class:`~.forking.ForkingStore`, its journal an
    :class:`~.step_journal.InMemoryStepJournal` or none)."""

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

    # -- forking ----------------------------------------------------------------------------

    def fork(
        self,
        parent_run_id: str,
        *,
        step_index: int,
        run_id: str,
        edit: ForkEdit | None = None,
        with_turn: bool = False,
        tools: Mapping[str, Tool] | None = None,
    ) -> AgentCheckpoint:
        """Write the fork :func:`~.forking.plan_fork` plans, once all of it is planned:
        a refused fork writes nothing."""
        planned = plan_fork(
            self,
            parent_run_id,
            step_index=step_index,
            run_id=run_id,
            created_at=SystemClock().now(),
            edit=edit,
            with_turn=with_turn,
            tools=tools,
        )
        for forked in planned:
            if forked.run_id in self._checkpoints or self.load_steps(forked.run_id):
                raise RunExistsError(forked.run_id)
        for forked in planned:
            if forked.checkpoint is not None:
                self.save(forked.checkpoint)
            for step in forked.steps:
                self._write_step(forked.run_id, step)
        root = planned[0].checkpoint
        assert root is not None  # a fork's own run always has its checkpoint
        return root

    def load_steps(self, run_id: str) -> tuple[JournalStep, ...]:
        journal = self.step_journal
        if journal is None:
            return ()
        if not isinstance(journal, InMemoryStepJournal):
            raise TypeError("forking in memory needs an InMemoryStepJournal")
        return journal.load_steps(run_id)

    def sub_run_ids(self, run_id: str) -> tuple[str, ...]:
        return tuple(k for k in self._checkpoints if parent_run_id(k) == run_id)

    def _write_step(self, run_id: str, step: JournalStep) -> None:
        journal = self.step_journal
        assert isinstance(journal, InMemoryStepJournal)  # load_steps found steps
        journal.record_turn(run_id, step.step_index, step.basis, step.message)
        for call in step.calls.values():
            if call.finished:
                journal.record_outcome(
                    run_id,
                    step.step_index,
                    call.tool_call_id,
                    call.result,
                    call.is_error,
                )
            else:
                journal.record_start(run_id, step.step_index, call.tool_call_id)


def create_in_memory_session_store() -> InMemorySessionStore:
    return InMemorySessionStore()
