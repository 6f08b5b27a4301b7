"""The loop's side of the input queue: what a root leg takes at a step boundary (the
rules are in :mod:`deuz_django.core.durable.inputs`)."""

from __future__ import annotations

from typing import Any

from .._awaitable import resolve
from ..abort import TurnInterrupter
from ..deps import Logger
from ..durable.inputs import InputQueue, QueuedInput
from ..durable.step_journal import JournalStep
from ..parts import DataPart

DELIVERED = (
    "input-delivered"  # the data part's name: ``data-input-delivered`` on the wire
)


def queue_of(store: object) -> InputQueue | None:
    """A store's optional input queue."""
    queue = getattr(store, "input_queue", None)
    return queue if isinstance(queue, InputQueue) else None


def delivered_part(queued: QueuedInput, step_index: int) -> DataPart:
    """Tells readers the input is now in the history, before the model call of
    ``step_index`` (a chat shows it as sent, no longer queued)."""
    return DataPart(DELIVERED, {**queued.to_json(), "stepIndex": step_index})


class InputTaker:
    """The inputs one root leg takes. ``taken`` holds those already in its history: the
    queue lists them as pending until a checkpoint holding them is saved, and a turn
    interrupted before that save goes back to the same boundary."""

    def __init__(
        self,
        queue: InputQueue,
        run_id: str,
        interrupter: TurnInterrupter | None,
        logger: Logger,
    ) -> None:
        self.queue = queue
        self.run_id = run_id
        self.interrupter = interrupter
        self.logger = logger
        self.taken: set[int] = set()

    async def take(
        self, history_length: int, recorded: JournalStep | None
    ) -> tuple[QueuedInput, ...]:
        """The inputs to deliver now, in ``seq`` order. When the step journal
        ``recorded`` this step's turn (its leg died before the checkpoint), exactly the
        inputs that turn answered — the oldest pending ones — so the turn is reused and
        none of its calls is re-asked; later inputs wait for the next boundary. A queue
        that cannot be read is logged: its inputs stay pending, for the next boundary."""
        if self.interrupter is not None:
            self.interrupter.begin_boundary()
        try:
            pending: tuple[QueuedInput, ...] = await resolve(
                _method(self.queue, "pending")(self.run_id)
            )
        except Exception as error:
            self.logger.error(
                f"durable: reading the input queue of '{self.run_id}' failed — "
                f"{str(error) or type(error).__name__}"
            )
            return ()
        fresh = [queued for queued in pending if queued.seq not in self.taken]
        if recorded is not None:
            answered = recorded.basis - history_length
            if 0 <= answered <= len(fresh):
                fresh = fresh[:answered]
        self.taken.update(queued.seq for queued in fresh)
        return tuple(fresh)


def _method(queue: InputQueue, name: str) -> Any:
    """The async twin (``apending``) wins over the sync method, as for stores."""
    return getattr(queue, "a" + name, None) or getattr(queue, name)
