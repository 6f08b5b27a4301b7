"""Forking a run: a new run from a step boundary of an existing one, with its own run id.

A fork of run ``P`` at step ``N`` starts from the history ``P`` held when step ``N``
called the model — the step journal's ``basis`` for that step, or all of ``P``'s history
at its latest boundary while its model is due to answer. There are two fork points:

- **before the turn** (the default): the fork's first step calls the model again.
  ``ForkEdit(message=...)`` replaces the text of the last user message before the step
  (the one that started it): ask differently.
- **with the turn** (``with_turn=True``): the fork keeps step ``N``'s recorded model turn
  — its journal starts with it, so its first step reuses it without a model call — and
  its calls go through the gates again. ``ForkEdit(tool_call_id=..., input=...)``
  replaces one call's input: correct the agent.

The fork inherits the history up to the boundary and the journal up to it, recorded
outcomes included: no recorded call is executed again (an edited one runs anew). Not
approvals (a gated call is asked again, its token bound to the fork), nor usage. Its
``step_index`` is ``N``. The sub-agent runs of a kept turn's unanswered calls fork with
it, as they stood — a suspended one back to before the turn it waits on.

A store that forks implements :class:`ForkingStore`: it reads the parent through
:class:`ForkSource`, calls :func:`plan_fork` (the rules, here once) and writes what it
returns all at once — a fork exists whole or not at all.

>>> forked = await fork_from_checkpoint(
...     store, "run-42", step_index=2, edit=ForkEdit(message="Refund half of it.")
... )
>>> await resume_from_checkpoint(store, forked.run_id, model=model, tools=tools)
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

from .._awaitable import resolve
from ..exceptions import CheckpointNotFoundError, InvalidForkError
from ..messages import Message, TextPart, ToolUsePart
from ..tools import Tool, ToolArgumentsError
from ..usage import EMPTY_USAGE
from .checkpoint import AgentCheckpoint
from .run_ids import is_child_run_id
from .step_journal import JournalStep


@dataclass(frozen=True, slots=True)
class ForkEdit:
    """What a fork changes at its boundary: the text of the user message that started
    the step (``message``, forking before the turn), or the input of one call of the
    kept turn (``tool_call_id`` and its new ``input``, forking with the turn)."""

    message: str | None = None
    tool_call_id: str | None = None
    input: Any = None

    def to_json(self) -> dict[str, Any]:
        """The API's form: ``{"message": ...}`` or ``{"toolCallId": ..., "input": ...}``."""
        if self.message is not None:
            return {"message": self.message}
        return {"toolCallId": self.tool_call_id, "input": self.input}


@dataclass(frozen=True, slots=True)
class ForkedRun:
    """One run a fork writes: its first checkpoint, and the journal steps it starts with
    (in step order). ``checkpoint`` is ``None`` for a sub-agent run that never saved
    one: its journal alone says what it did."""

    run_id: str
    checkpoint: AgentCheckpoint | None
    steps: tuple[JournalStep, ...]


@runtime_checkable
class ForkSource(Protocol):
    """What :func:`plan_fork` reads of the parent: a run's checkpoint, its journaled
    steps in step order (with their calls), and the run ids of its own sub-agent runs
    (children, not grandchildren)."""

    def load(self, run_id: str) -> AgentCheckpoint | None: ...

    def load_steps(self, run_id: str) -> Sequence[JournalStep]: ...

    def sub_run_ids(self, run_id: str) -> Sequence[str]: ...


@runtime_checkable
class ForkingStore(Protocol):
    """A store that forks runs (sync or async; an ``afork`` twin wins, as for ``save``).

    ``fork`` writes the run ``run_id`` forked from ``parent_run_id`` at ``step_index``
    (with its sub-agent runs, :func:`plan_fork`) in one go and returns its checkpoint;
    ``tools`` (the agent's) check an edited input against its tool's schema. Raises
    ``CheckpointNotFoundError`` (no parent), ``InvalidForkError`` (a step or edit that
    does not fit it) or ``RunExistsError`` (``run_id`` taken), writing nothing.
    """

    def fork(
        self,
        parent_run_id: str,
        *,
        step_index: int,
        run_id: str,
        edit: ForkEdit | None = None,
        with_turn: bool = False,
        tools: Mapping[str, Tool] | None = None,
    ) -> AgentCheckpoint | Awaitable[AgentCheckpoint]: ...


async def fork_from_checkpoint(
    store: ForkingStore,
    parent_run_id: str,
    *,
    step_index: int,
    run_id: str | None = None,
    edit: ForkEdit | None = None,
    with_turn: bool = False,
    tools: Mapping[str, Tool] | None = None,
) -> AgentCheckpoint:
    """Fork ``parent_run_id`` at ``step_index`` in ``store``, under ``run_id`` (a new
    uuid4 hex when not given); the fork's checkpoint. Continue it with
    :func:`~deuz_django.core.durable.resume_from_checkpoint`."""
    method = getattr(store, "afork", None) or store.fork
    forked: AgentCheckpoint = await resolve(
        method(
            parent_run_id,
            step_index=step_index,
            run_id=run_id or uuid.uuid4().hex,
            edit=edit,
            with_turn=with_turn,
            tools=tools,
        )
    )
    return forked


def plan_fork(
    source: ForkSource,
    parent_run_id: str,
    *,
    step_index: int,
    run_id: str,
    created_at: float,
    edit: ForkEdit | None = None,
    with_turn: bool = False,
    tools: Mapping[str, Tool] | None = None,
) -> tuple[ForkedRun, ...]:
    """Every run the fork writes: the fork itself first, then its sub-agent runs
    (each after its parent). Raises as :meth:`ForkingStore.fork` does; reads only."""
    _check_edit(edit, with_turn)
    if is_child_run_id(run_id):
        raise InvalidForkError("runId", "a fork is a root run: its id has no '::'")
    parent = source.load(parent_run_id)
    if parent is None:
        raise CheckpointNotFoundError(parent_run_id)
    steps = source.load_steps(parent_run_id)
    history, turn = _fork_point(parent, steps, step_index, with_turn)
    if edit is not None and edit.message is not None:
        history = _ask_differently(history, edit.message, step_index)
    earlier = tuple(_copied(s) for s in steps if s.step_index < step_index)
    checkpoint = _running(run_id, step_index, history, parent.agent_path, created_at)
    if turn is None:
        return (ForkedRun(run_id, checkpoint, earlier),)
    kept = _kept_turn(turn, edit, tools)
    calls = _unanswered(kept, edit)
    sub_runs = [
        forked
        for child_id in source.sub_run_ids(parent_run_id)
        if any(child_id.endswith(f"#{call}") for call in calls)
        for forked in _sub_run_tree(
            source, child_id, run_id + child_id[len(parent_run_id) :], created_at
        )
    ]
    return (ForkedRun(run_id, checkpoint, (*earlier, kept)), *sub_runs)


# -- the fork point ---------------------------------------------------------------------


def _check_edit(edit: ForkEdit | None, with_turn: bool) -> None:
    """Which edit goes with which fork point: the first problem found raises."""
    if edit is None:
        return
    asking, correcting = edit.message is not None, edit.tool_call_id is not None
    problems = [
        (
            asking and correcting,
            "edit",
            "give a new message or a call's input, not both",
        ),
        (not asking and not correcting, "edit", "expected a message or a toolCallId"),
        (asking and with_turn, "edit.message", "a new message needs withTurn false"),
        (asking and not str(edit.message).strip(), "edit.message", "expected text"),
        (correcting and not with_turn, "withTurn", "a call's new input needs withTurn"),
        (correcting and edit.input is None, "edit.input", "expected the new input"),
    ]
    for found, field, message in problems:
        if found:
            raise InvalidForkError(field, message)


def _fork_point(
    parent: AgentCheckpoint,
    steps: Sequence[JournalStep],
    step_index: int,
    with_turn: bool,
) -> tuple[tuple[Message, ...], JournalStep | None]:
    """The history before step ``step_index``'s model call, and its turn when kept."""
    run, latest = parent.run_id, parent.step_index
    if not 0 <= step_index <= latest:
        raise InvalidForkError(
            "step",
            f"run '{run}' has no step {step_index} (its steps go up to {latest})",
        )
    step = next((s for s in steps if s.step_index == step_index), None)
    if step is None:
        if step_index != latest:
            raise InvalidForkError(
                "step", f"step {step_index} of run '{run}' is not in its step journal"
            )
        if with_turn:
            raise InvalidForkError(
                "withTurn", f"step {step_index} of run '{run}' has no turn to keep yet"
            )
        if not _model_due(parent.messages):
            raise InvalidForkError(
                "step",
                f"run '{run}' is {parent.status}: nothing follows its last step",
            )
        return parent.messages, None
    if step.basis > len(parent.messages):
        raise InvalidForkError(
            "step",
            f"step {step_index} of run '{run}' answered a history the run no longer "
            "holds",
        )
    return parent.messages[: step.basis], step if with_turn else None


def _model_due(messages: tuple[Message, ...]) -> bool:
    """Whether the model answers next: the history ends with a user or tool message."""
    return bool(messages) and messages[-1].role in ("user", "tool")


def _ask_differently(
    history: tuple[Message, ...], text: str, step_index: int
) -> tuple[Message, ...]:
    """``history`` with the text of its last user message replaced (images kept)."""
    for index in reversed(range(len(history))):
        message = history[index]
        if message.role == "user":
            content: str | tuple[Any, ...] = (
                text
                if isinstance(message.content, str)
                else (
                    TextPart(text),
                    *(p for p in message.content if not isinstance(p, TextPart)),
                )
            )
            edited = Message("user", content, message.provider_metadata)
            return (*history[:index], edited, *history[index + 1 :])
    raise InvalidForkError(
        "edit.message", f"no user message comes before step {step_index}"
    )


def _kept_turn(
    step: JournalStep, edit: ForkEdit | None, tools: Mapping[str, Tool] | None
) -> JournalStep:
    """Step ``step`` as the fork's journal starts with it: its turn, with one call's
    input edited, and the calls' records but the edited one's."""
    kept = _copied(step)
    call_id = None if edit is None else edit.tool_call_id
    if call_id is None:
        return kept
    calls = [p for p in step.message.parts if isinstance(p, ToolUsePart)]
    call = next((p for p in calls if p.id == call_id), None)
    if call is None:
        known = ", ".join(p.id for p in calls) or "none"
        raise InvalidForkError(
            "edit.toolCallId",
            f"the turn of step {step.step_index} has no call {call_id!r} "
            f"(its calls: {known})",
        )
    assert edit is not None
    _check_input(call, edit.input, tools)
    parts = tuple(
        replace(p, input=edit.input) if p is call else p for p in step.message.parts
    )
    records = {k: v for k, v in kept.calls.items() if k != call_id}
    return replace(kept, message=replace(step.message, content=parts), calls=records)


def _check_input(
    call: ToolUsePart, value: Any, tools: Mapping[str, Tool] | None
) -> None:
    """The edited input fits its tool's schema (when the tools are known)."""
    if tools is None:
        return
    declared = tools.get(call.name)
    if declared is None:
        raise InvalidForkError(
            "edit.toolCallId", f"the agent has no {call.name} tool any more"
        )
    if declared.validate is not None:
        try:
            declared.validate(value)
        except ToolArgumentsError as error:
            raise InvalidForkError("edit.input", "; ".join(error.issues)) from None


def _unanswered(kept: JournalStep, edit: ForkEdit | None) -> set[str]:
    """The kept turn's calls the fork runs as they were (no recorded outcome, not
    edited): the ones whose sub-agent runs it continues."""
    edited = None if edit is None else edit.tool_call_id
    return {
        p.id
        for p in kept.message.parts
        if isinstance(p, ToolUsePart)
        and p.id != edited
        and not (p.id in kept.calls and kept.calls[p.id].finished)
    }


# -- what the fork writes ---------------------------------------------------------------


def _running(
    run_id: str,
    step_index: int,
    history: tuple[Message, ...],
    agent_path: tuple[str, ...] | None,
    created_at: float,
) -> AgentCheckpoint:
    return AgentCheckpoint(
        run_id=run_id,
        step_id=f"{run_id}#{step_index}",
        step_index=step_index,
        status="running",
        messages=history,
        usage=EMPTY_USAGE,
        agent_path=agent_path,
        created_at=created_at,
    )


def _copied(step: JournalStep) -> JournalStep:
    """A journal step as a fork inherits it: decisions belong to the parent's run."""
    return replace(
        step, calls={k: replace(v, decision_id=None) for k, v in step.calls.items()}
    )


def _sub_run_tree(
    source: ForkSource, child_id: str, new_id: str, created_at: float
) -> Iterator[ForkedRun]:
    """A sub-agent run and its own sub-agent runs as the fork continues them: as they
    stand, usage zero (the fork's parent counts it again) — but a suspended one goes
    back to before the turn it waits on, keeping it, so its gated calls ask again."""
    checkpoint = source.load(child_id)
    steps = tuple(_copied(s) for s in source.load_steps(child_id))
    if checkpoint is None:
        yield ForkedRun(new_id, None, steps)
    elif (
        checkpoint.status == "suspended"
        and steps
        and checkpoint.messages[-1:] == (steps[-1].message,)
    ):
        latest = steps[-1]
        yield ForkedRun(
            new_id,
            _running(
                new_id,
                latest.step_index,
                checkpoint.messages[: latest.basis],
                checkpoint.agent_path,
                created_at,
            ),
            steps,
        )
    else:
        copy = replace(
            checkpoint,
            run_id=new_id,
            step_id=f"{new_id}#{checkpoint.step_index}",
            usage=EMPTY_USAGE,
            created_at=created_at,
        )
        yield ForkedRun(new_id, copy, steps)
    for grandchild in source.sub_run_ids(child_id):
        yield from _sub_run_tree(
            source, grandchild, new_id + grandchild[len(child_id) :], created_at
        )
