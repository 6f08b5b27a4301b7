"""The input queue: what a person says to a run while it runs or waits (steering).

An input is durable once :meth:`InputQueue.put` returns, and is delivered at the run's next
step boundary as a user message, in the order the queue accepted it (its ``seq``). The
loop reads :meth:`InputQueue.pending` just before each model call of a root leg — the
leg's first one too, after the verdicts are settled, never between a model's tool calls
and their results — and appends each pending input to the history as
:meth:`QueuedInput.message`: a user message whose ``providerMetadata`` names the input
(``{"deuz": {"inputId": …, "inputSeq": …}}``). That is a field every message already
has, so the checkpoint format does not change.

Delivery is marked by the checkpoint, not by the loop: a store with a queue (it exposes
it as ``store.input_queue``, as a store with a step journal exposes ``step_journal``)
marks an input delivered in the same write as the first checkpoint whose history holds
its message. So a leg that dies after taking an input and before its next checkpoint
leaves the input pending — the next leg delivers it, once — and one that dies after
that checkpoint never delivers it again. A leg that resumes a step whose model turn the
step journal recorded takes exactly the inputs that turn answered, so the turn is
reused; inputs that arrived since wait for the next boundary.

A store with a queue never saves a ``completed`` checkpoint while the run has input its
history does not hold: the save raises :class:`InputArrived` (the input came in as the
model finished its answer), and the loop delivers the input and takes one more step —
a run never completes with an accepted input unanswered. A suspended run keeps its
inputs queued until a verdict continues it.

>>> queue = InMemoryInputQueue()
>>> store = InMemorySessionStore(input_queue=queue)
>>> stream = stream_chat(..., session=DurableSession(store, "run-42"))
>>> queue.put("run-42", "Use the EU warehouse instead.")   # from anywhere, any time
QueuedInput(seq=1, input_id='…', text='Use the EU warehouse instead.', …)
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..deps import Clock, SystemClock
from ..exceptions import (
    CheckpointNotFoundError,
    InputArrived,
    InvalidInputError,
    RunCompletedError,
)
from ..messages import Message

if TYPE_CHECKING:
    from .checkpoint import AgentCheckpoint


@dataclass(frozen=True, slots=True, kw_only=True)
class QueuedInput:
    """One accepted input: its place in the run's queue (``seq``, from 1), the id a
    client may choose to retry safely, its text, when it was accepted (ms since the
    epoch) and — once a checkpoint holds it — the step whose model call first saw it."""

    seq: int
    input_id: str
    text: str
    accepted_at: float
    delivered_at_step: int | None = None

    @property
    def delivered(self) -> bool:
        return self.delivered_at_step is not None

    def message(self) -> Message:
        """The user message that delivers this input, marked with it."""
        marker = {"deuz": {"inputId": self.input_id, "inputSeq": self.seq}}
        return Message("user", self.text, marker)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "inputId": self.input_id,
            "seq": self.seq,
            "text": self.text,
            "acceptedAt": self.accepted_at,
        }
        if self.delivered_at_step is not None:
            out["deliveredAtStep"] = self.delivered_at_step
        return out


def carried_inputs(messages: Iterable[Message]) -> dict[int, str]:
    """The inputs ``messages`` deliver, ``{seq: input_id}``: user messages marked by
    :meth:`QueuedInput.message`."""
    carried: dict[int, str] = {}
    for message in messages:
        if message.role != "user" or not message.provider_metadata:
            continue
        marker = message.provider_metadata.get("deuz")
        if not isinstance(marker, dict):
            continue
        seq, input_id = marker.get("inputSeq"), marker.get("inputId")
        if isinstance(seq, int) and isinstance(input_id, str):
            carried[seq] = input_id
    return carried


def unheld(
    pending: Iterable[QueuedInput], carried: Mapping[int, str]
) -> list[QueuedInput]:
    """The ``pending`` inputs a history carrying ``carried`` does not hold."""
    return [i for i in pending if carried.get(i.seq) != i.input_id]


def checked_text(text: object) -> str:
    """An input's text: a string with something in it."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidInputError("text: expected a non-empty string")
    return text


@runtime_checkable
class InputQueue(Protocol):
    """Two methods over any backend; sync or async implementations both work (a backend
    may add ``aput``/``apending``, which the loop then calls).

    ``put`` accepts an input for a run that is running or suspended and returns it once
    it is durable, with the next ``seq`` of the run; an ``input_id`` put again returns
    the input first accepted under it (the text of the retry is not used), so a client
    may retry safely. It raises
    :class:`~deuz_django.core.exceptions.CheckpointNotFoundError` for a run the store
    does not know and :class:`~deuz_django.core.exceptions.RunCompletedError` for a
    completed one. ``pending`` returns the run's accepted inputs that no saved
    checkpoint holds yet, in ``seq`` order. Marking inputs delivered is the store's
    part (see the module's docstring): the loop never calls anything else.
    """

    def put(
        self, run_id: str, text: str, *, input_id: str | None = None
    ) -> QueuedInput | Awaitable[QueuedInput]: ...

    def pending(
        self, run_id: str
    ) -> tuple[QueuedInput, ...] | Awaitable[tuple[QueuedInput, ...]]: ...


class InMemoryInputQueue:
    """The reference queue, in memory; :class:`InMemorySessionStore` attaches itself
    (``InMemorySessionStore(input_queue=InMemoryInputQueue())``) so that ``put`` knows
    the run and its status, and marks deliveries as it saves."""

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        generate_id: Callable[[], str] | None = None,
    ) -> None:
        self._inputs: dict[str, list[QueuedInput]] = {}
        self._clock = clock or SystemClock()
        self._generate_id = generate_id or (lambda: uuid.uuid4().hex)
        self._load: Callable[[str], AgentCheckpoint | None] | None = None

    def attach(self, load: Callable[[str], AgentCheckpoint | None]) -> None:
        """Check puts against the checkpoints ``load`` returns (the store's)."""
        self._load = load

    def put(
        self, run_id: str, text: str, *, input_id: str | None = None
    ) -> QueuedInput:
        text = checked_text(text)
        inputs = self._inputs.setdefault(run_id, [])
        for known in inputs:
            if input_id is not None and known.input_id == input_id:
                return known
        if self._load is not None:
            checkpoint = self._load(run_id)
            if checkpoint is None:
                raise CheckpointNotFoundError(run_id)
            if checkpoint.status == "completed":
                raise RunCompletedError(run_id)
        queued = QueuedInput(
            seq=len(inputs) + 1,
            input_id=input_id or self._generate_id(),
            text=text,
            accepted_at=self._clock.now(),
        )
        inputs.append(queued)
        return queued

    def pending(self, run_id: str) -> tuple[QueuedInput, ...]:
        return tuple(i for i in self._inputs.get(run_id, ()) if not i.delivered)

    def inputs(self, run_id: str) -> tuple[QueuedInput, ...]:
        """Every input of the run, delivered or not, in ``seq`` order."""
        return tuple(self._inputs.get(run_id, ()))

    def record_checkpoint(self, checkpoint: AgentCheckpoint) -> None:
        """The store's part, before it saves ``checkpoint``: refuse a ``completed`` one
        that leaves input undelivered (:class:`InputArrived`), and mark the inputs its
        history holds delivered."""
        run_id = checkpoint.run_id
        carried = carried_inputs(checkpoint.messages)
        if checkpoint.status == "completed":
            missing = unheld(self.pending(run_id), carried)
            if missing:
                raise InputArrived(run_id, tuple(i.seq for i in missing))
        if not carried:
            return
        step = checkpoint.step_index - 1
        self._inputs[run_id] = [
            replace(i, delivered_at_step=step)
            if not i.delivered and carried.get(i.seq) == i.input_id
            else i
            for i in self._inputs.get(run_id, ())
        ]
