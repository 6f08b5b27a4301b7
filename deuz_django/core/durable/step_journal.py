"""The step journal: what a step did between two checkpoints, so a resume repeats nothing.

A checkpoint is saved at step boundaries; a leg that dies inside a step used to redo the
whole step — call the model again and run every tool again. The journal closes that gap.
When a step's model turn is complete, the loop records it (the assistant message with its
tool calls, or the final answer) *before* any tool runs; it records each call's start
just before it executes and its outcome as soon as it has one. Resuming the step then
follows three rules:

- a recorded turn is reused: no second model call, the same tool-call ids;
- a call with a recorded outcome is never executed again: its recorded result is used;
- a call that started but has no outcome is *in doubt*: a tool declared
  ``idempotent=True`` runs again; any other tool is never silently re-run. Its
  ``reconcile``, if it has one, is asked first: "it happened" records the outcome it
  found (the tool does not run), "it did not happen" runs the call under its existing
  start record; otherwise — "cannot tell", no ``reconcile``, or one that raises — the
  run suspends with a pending approval for it, which a person settles.

A call that runs on a person's (or a rule's) recorded decision starts with its
:class:`Authorization`: the decision's id and the digest of the input about to run. A
decision authorizes one execution of one call: a journal refuses the start of any other
call on it (:class:`~deuz_django.core.exceptions.UnauthorizedExecution`), so the call
does not run. A call's repeated start (an idempotent call in doubt running again) is the
same execution and keeps its decision.

The journal is an optional seam of the durable session: a store that has one exposes it
as ``store.step_journal``. The checkpoint format does not change.

>>> journal = InMemoryStepJournal()
>>> store = InMemorySessionStore(step_journal=journal)
>>> await generate_text(..., session=DurableSession(store, "run-42"))
>>> (await resolve(journal.load_step("run-42", 0))).calls["call_1"].finished
True
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from ..exceptions import UnauthorizedExecution
from ..messages import Message


@dataclass(frozen=True, slots=True)
class Authorization:
    """The recorded decision a call runs on, and the digest of the input it runs with
    (:func:`~deuz_django.core.approvals.input_digest`) — which must be the input the
    decision was made on (the edited one, when a person edited it)."""

    decision_id: str
    input_digest: str


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One tool call of a step: it started (on ``decision_id``, when a recorded decision
    authorized it); ``finished`` once its outcome is recorded."""

    tool_call_id: str
    finished: bool = False
    result: Any = None
    is_error: bool = False
    decision_id: str | None = None


@dataclass(frozen=True, slots=True)
class JournalStep:
    """One step as recorded: its model turn and the calls that started.

    ``step_index`` is the run's step the turn belongs to (the index its ``step-start``
    part carries); ``basis`` is how many messages the history held when the model was
    called, so a turn is only reused on the history it answered.
    """

    step_index: int
    basis: int
    message: Message
    calls: Mapping[str, CallRecord] = field(default_factory=dict)


@runtime_checkable
class StepJournal(Protocol):
    """Five methods over any backend; sync or async implementations both work (a backend
    may add ``a``-prefixed async twins, which the loop then calls).

    ``record_turn`` writes a step's model turn, replacing any turn recorded for that step
    and its calls (a step index is re-used only when its first attempt never got past the
    model call). ``record_start`` notes that a call of ``tool_name`` is about to execute
    — on ``authorization``'s decision, when one authorized it: the journal raises
    :class:`~deuz_django.core.exceptions.UnauthorizedExecution` (and records nothing)
    when that decision already authorized another call; ``record_outcome`` writes its
    result, creating the record when the start was not
    written (an outcome a person records). ``load_step`` returns one step or ``None``;
    ``latest_step`` the step with the highest index, or ``None``. Every write is durable
    when the call returns. A journal may also offer ``forget_start(run_id, step_index,
    tool_call_id)`` for the "run it again" answer to an in-doubt call; the loop never
    calls it (the contract suite does).
    """

    def record_turn(
        self, run_id: str, step_index: int, basis: int, message: Message
    ) -> Awaitable[None] | None: ...

    def record_start(
        self,
        run_id: str,
        step_index: int,
        tool_call_id: str,
        *,
        tool_name: str = "",
        authorization: Authorization | None = None,
    ) -> Awaitable[None] | None: ...

    def record_outcome(
        self,
        run_id: str,
        step_index: int,
        tool_call_id: str,
        result: Any,
        is_error: bool,
    ) -> Awaitable[None] | None: ...

    def load_step(
        self, run_id: str, step_index: int
    ) -> JournalStep | Awaitable[JournalStep | None] | None: ...

    def latest_step(
        self, run_id: str
    ) -> JournalStep | Awaitable[JournalStep | None] | None: ...


class InMemoryStepJournal:
    """The reference journal: steps per run, in memory."""

    def __init__(self) -> None:
        self._steps: dict[str, dict[int, JournalStep]] = {}

    def record_turn(
        self, run_id: str, step_index: int, basis: int, message: Message
    ) -> None:
        self._steps.setdefault(run_id, {})[step_index] = JournalStep(
            step_index, basis, message
        )

    def record_start(
        self,
        run_id: str,
        step_index: int,
        tool_call_id: str,
        *,
        tool_name: str = "",
        authorization: Authorization | None = None,
    ) -> None:
        step = self.load_step(run_id, step_index)
        started = None if step is None else step.calls.get(tool_call_id)
        if started is not None:
            return  # the same execution starting again keeps its record
        decision = None if authorization is None else authorization.decision_id
        if decision is not None and self._used(decision):
            raise UnauthorizedExecution(
                f"Decision {decision} already authorized an execution; call "
                f"{tool_call_id} of step {step_index} does not run on it."
            )
        self._put(run_id, step_index, CallRecord(tool_call_id, decision_id=decision))

    def record_outcome(
        self,
        run_id: str,
        step_index: int,
        tool_call_id: str,
        result: Any,
        is_error: bool,
    ) -> None:
        step = self.load_step(run_id, step_index)
        started = None if step is None else step.calls.get(tool_call_id)
        decision = None if started is None else started.decision_id
        self._put(
            run_id,
            step_index,
            CallRecord(tool_call_id, True, result, bool(is_error), decision),
        )

    def load_step(self, run_id: str, step_index: int) -> JournalStep | None:
        return self._steps.get(run_id, {}).get(step_index)

    def latest_step(self, run_id: str) -> JournalStep | None:
        steps = self._steps.get(run_id)
        return steps[max(steps)] if steps else None

    def load_steps(self, run_id: str) -> tuple[JournalStep, ...]:
        """Every step recorded for the run, in step order (what a fork copies)."""
        steps = self._steps.get(run_id, {})
        return tuple(steps[index] for index in sorted(steps))

    def forget_start(self, run_id: str, step_index: int, tool_call_id: str) -> None:
        """Drop a call's record, so the call runs as if it never started ("run it
        again", a person's answer to an in-doubt call)."""
        step = self.load_step(run_id, step_index)
        if step is not None:
            calls = {k: v for k, v in step.calls.items() if k != tool_call_id}
            self._steps[run_id][step_index] = replace(step, calls=calls)

    def _used(self, decision_id: str) -> bool:
        """Whether any call started on ``decision_id`` (a decision's id is unique)."""
        return any(
            call.decision_id == decision_id
            for steps in self._steps.values()
            for step in steps.values()
            for call in step.calls.values()
        )

    def _put(self, run_id: str, step_index: int, record: CallRecord) -> None:
        step = self.load_step(run_id, step_index)
        if step is None:
            raise KeyError(f"no turn recorded for step {step_index} of run {run_id!r}")
        calls = {**step.calls, record.tool_call_id: record}
        self._steps[run_id][step_index] = replace(step, calls=calls)
