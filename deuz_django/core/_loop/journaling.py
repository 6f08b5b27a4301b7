"""The loop's side of the step journal: one step's record, read and written by a leg
(the rules are in :mod:`deuz_django.core.durable.step_journal`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from .._awaitable import resolve
from ..approvals import input_digest
from ..durable.step_journal import Authorization, CallRecord, JournalStep, StepJournal
from ..messages import Message
from ..tools import Tool, ToolCall, ToolResult
from .approval import Denial


def _method(journal: StepJournal, name: str) -> Any:
    """The async twin (``aload_step``) wins over the sync method, as for stores."""
    return getattr(journal, "a" + name, None) or getattr(journal, name)


def journal_of(store: object) -> StepJournal | None:
    """A store's optional step journal."""
    journal = getattr(store, "step_journal", None)
    return journal if isinstance(journal, StepJournal) else None


async def load_step(
    journal: StepJournal, run_id: str, step_index: int
) -> JournalStep | None:
    """The step's record, if any: its turn is reused only on a history of its
    ``basis``'s length."""
    step: JournalStep | None = await resolve(
        _method(journal, "load_step")(run_id, step_index)
    )
    return step


async def settle_recorder(
    journal: StepJournal,
    run_id: str,
    history: tuple[Message, ...],
    tools: Mapping[str, Tool],
) -> StepRecorder | None:
    """The record of the step whose turn a settle answers: the journal's latest, when
    its turn is the history's trailing assistant message."""
    assistant = next((m for m in reversed(history) if m.role == "assistant"), None)
    if assistant is None:
        return None
    step: JournalStep | None = await resolve(_method(journal, "latest_step")(run_id))
    if step is None or step.message != assistant:
        return None
    return StepRecorder(journal, run_id, step, tools)


class StepRecorder:
    """What one step's calls have done: recorded outcomes are reused, starts and
    outcomes are written as they happen, and a started call without an outcome is in
    doubt unless its tool is ``idempotent`` (its tool's ``reconcile`` may then settle
    it: :func:`~.execution.reconcile_in_doubt`)."""

    def __init__(
        self,
        journal: StepJournal,
        run_id: str,
        step: JournalStep,
        tools: Mapping[str, Tool],
    ) -> None:
        self.journal = journal
        self.run_id = run_id
        self.step = step
        self.tools = tools

    @classmethod
    async def record(
        cls,
        journal: StepJournal,
        run_id: str,
        step_index: int,
        basis: int,
        message: Message,
        tools: Mapping[str, Tool],
    ) -> StepRecorder:
        """Write a fresh turn before any of its calls runs."""
        await resolve(
            _method(journal, "record_turn")(run_id, step_index, basis, message)
        )
        return cls(journal, run_id, JournalStep(step_index, basis, message), tools)

    def recorded(self, call: ToolCall) -> ToolResult | None:
        """The call's recorded result: it ran already and must not run again."""
        record = self.step.calls.get(call.tool_call_id)
        if record is None or not record.finished:
            return None
        return ToolResult(
            call.tool_call_id, call.tool_name, record.result, record.is_error or None
        )

    def in_doubt(self, call: ToolCall, denials: Mapping[str, Denial]) -> bool:
        """Started, no outcome, not denied, and its tool did not declare itself safe to
        run again."""
        record = self.step.calls.get(call.tool_call_id)
        if record is None or record.finished or call.tool_call_id in denials:
            return False
        declared = self.tools.get(call.tool_name)
        return declared is None or not declared.idempotent

    def executes(self, call: ToolCall, denials: Mapping[str, Denial]) -> bool:
        """Whether running the call executes a tool (a denial or an unknown tool does
        not, so it needs no start record)."""
        declared = self.tools.get(call.tool_name)
        return (
            call.tool_call_id not in denials
            and declared is not None
            and declared.execute is not None
        )

    async def start(self, call: ToolCall) -> None:
        """Journal the call's start — on its decision, when one approved it, which the
        journal refuses to let authorize any other execution."""
        authorization = (
            None
            if call.decision is None
            else Authorization(call.decision, input_digest(call.args))
        )
        await resolve(
            _method(self.journal, "record_start")(
                self.run_id,
                self.step.step_index,
                call.tool_call_id,
                tool_name=call.tool_name,
                authorization=authorization,
            )
        )

    async def finish(self, result: ToolResult) -> None:
        await resolve(
            _method(self.journal, "record_outcome")(
                self.run_id,
                self.step.step_index,
                result.tool_call_id,
                result.result,
                bool(result.is_error),
            )
        )

    async def record_reconciled(self, result: ToolResult) -> None:
        """Record the outcome a tool's ``reconcile`` found for a call in doubt; from
        then on the call has a recorded outcome, here as in the journal."""
        await self.finish(result)
        started = self.step.calls.get(result.tool_call_id)
        record = CallRecord(
            result.tool_call_id,
            True,
            result.result,
            bool(result.is_error),
            None if started is None else started.decision_id,
        )
        self.step = replace(
            self.step, calls={**self.step.calls, result.tool_call_id: record}
        )
