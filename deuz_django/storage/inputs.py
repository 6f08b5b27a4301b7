"""``DjangoInputQueue``: the core's input queue on the ``RunInput`` table (steering).

An input is accepted by one transaction that first takes the run's next ``input_seq``
— a conditional ``UPDATE`` of the run row, refused for a run that is completed or
stopped — then inserts its row: the update locks the row (PostgreSQL) or the database
(SQLite), so inputs of a run are numbered without gaps or races; its audit record
(:mod:`deuz_django.audit`) is appended in the same transaction. A completing
checkpoint's save updates the same row only while its ``input_seq`` is no further than
what the run has had delivered (:meth:`DjangoInputQueue.completion_watermark`), so an
input racing it is either refused (the run completed first) or refuses the completion
(:class:`InputArrived`). The save marks the inputs it delivers in its transaction
(:meth:`DjangoInputQueue.mark_delivered`).

A leg reads the queue at every step boundary: one plain statement that finds nothing in
the common case (the rows are read through the ORM only when there are some).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime

from asgiref.sync import sync_to_async
from django.db import IntegrityError, connection
from django.db.models import F, Max, Q
from django.utils import timezone

from .. import audit
from ..core import Message
from ..core.durable import (
    AgentCheckpoint,
    CheckpointNotFoundError,
    InputArrived,
    QueuedInput,
    RunCompletedError,
)
from ..core.durable.inputs import carried_inputs, checked_text
from ..models import Run, RunInput, RunStatus
from ..models.audit import AuditAction
from ..models.visibility import Person, is_signed_in
from .db import bounded_atomic, once_more_if_broken

_ANY_PENDING = (
    f"SELECT 1 FROM {RunInput._meta.db_table} "
    "WHERE run_id = %s AND delivered_at_step IS NULL LIMIT 1"
)
_CLOSED = (RunStatus.COMPLETED, RunStatus.STOPPED)


def queued_input(row: RunInput) -> QueuedInput:
    """A row as the core's value (``accepted_at`` in ms since the epoch)."""
    return QueuedInput(
        seq=row.seq,
        input_id=row.input_id,
        text=row.text,
        accepted_at=_ms(row.accepted_at),
        delivered_at_step=row.delivered_at_step,
    )


class DjangoInputQueue:
    """A :class:`~deuz_django.core.durable.InputQueue` in the database; the
    ``a``-twins are what the loop calls."""

    def __init__(self, *, run_pk: Callable[[str], int | None] | None = None) -> None:
        """``run_pk`` gives a run's row pk (the store's, which remembers it)."""
        self.run_pk = run_pk or _stored_run_pk

    # -- InputQueue -----------------------------------------------------------------------

    def put(
        self,
        run_id: str,
        text: str,
        *,
        input_id: str | None = None,
        user: Person | None = None,
        operator: str = "",
    ) -> QueuedInput:
        """Accept ``text`` for the run, sent by ``user`` or ``operator``; an
        ``input_id`` accepted before returns that input. Raises
        :class:`CheckpointNotFoundError` for an unknown run and
        :class:`RunCompletedError` for one completed or stopped."""
        text = checked_text(text)
        if input_id is not None:
            known = _known(run_id, input_id)
            if known is not None:
                return known
        try:
            with bounded_atomic():
                taken = (
                    Run.objects.named(run_id)
                    .exclude(status__in=_CLOSED)
                    .update(input_seq=F("input_seq") + 1)
                )
                if not taken:
                    _refuse(run_id)
                pk, seq = Run.objects.named(run_id).values_list("pk", "input_seq").get()
                row = RunInput.objects.create(
                    run_id=pk,
                    seq=seq,
                    input_id=input_id or uuid.uuid4().hex,
                    text=text,
                    sent_by_id=user.pk if is_signed_in(user) else None,
                    operator=operator,
                )
                audit.append(
                    AuditAction.INPUT,
                    user=user,
                    operator=operator,
                    run_id=run_id,
                    details={"seq": seq, "inputId": row.input_id, "text": text},
                )
        except IntegrityError:
            # The same input id, accepted by a concurrent retry: that one stands.
            known = None if input_id is None else _known(run_id, input_id)
            if known is None:
                raise
            return known
        return queued_input(row)

    def pending(self, run_id: str) -> tuple[QueuedInput, ...]:
        pk = self.run_pk(run_id)
        if pk is None:
            return ()
        with connection.cursor() as cursor:
            cursor.execute(_ANY_PENDING, [pk])
            if cursor.fetchone() is None:
                return ()
        rows = RunInput.objects.filter(run_id=pk, delivered_at_step=None)
        return tuple(queued_input(row) for row in rows.order_by("seq"))

    async def aput(
        self,
        run_id: str,
        text: str,
        *,
        input_id: str | None = None,
        user: Person | None = None,
        operator: str = "",
    ) -> QueuedInput:
        return await sync_to_async(self.put)(
            run_id, text, input_id=input_id, user=user, operator=operator
        )

    async def apending(self, run_id: str) -> tuple[QueuedInput, ...]:
        return await sync_to_async(once_more_if_broken)(lambda: self.pending(run_id))

    # -- the store's part -----------------------------------------------------------------

    @staticmethod
    def mark_delivered(
        run_pk: int, checkpoint: AgentCheckpoint, added: Sequence[Message]
    ) -> None:
        """Inside the save of ``checkpoint``: the inputs the ``added`` messages carry
        are delivered, before the model call of the step the checkpoint ends."""
        held = _held(carried_inputs(added))
        if held is not None:
            RunInput.objects.filter(held, run_id=run_pk, delivered_at_step=None).update(
                delivered_at_step=checkpoint.step_index - 1,
                delivered_at=timezone.now(),
            )

    @staticmethod
    def completion_watermark(run_pk: int, checkpoint: AgentCheckpoint) -> int:
        """Before a ``completed`` checkpoint's save: the last ``seq`` the run will have
        had delivered (inputs are delivered in ``seq`` order), counting those the
        checkpoint holds. The save's update of the run row requires ``input_seq`` no
        greater: an input accepted past it refuses the completion."""
        held = Q(delivered_at_step__isnull=False)
        carried = _held(carried_inputs(checkpoint.messages))
        if carried is not None:
            held |= carried
        found = RunInput.objects.filter(held, run_id=run_pk).aggregate(last=Max("seq"))
        return int(found["last"] or 0)

    @staticmethod
    def arrived(run_pk: int, run_id: str, watermark: int) -> InputArrived | None:
        """After a completion's update of the run row changed nothing: whether input
        accepted past ``watermark`` is why."""
        late = tuple(
            RunInput.objects.filter(run_id=run_pk, seq__gt=watermark)
            .order_by("seq")
            .values_list("seq", flat=True)
        )
        return InputArrived(run_id, late) if late else None

    @staticmethod
    def delivers(added: Sequence[Message]) -> bool:
        """Whether messages a save adds carry inputs (the save then marks them)."""
        return bool(carried_inputs(added))


def _held(carried: dict[int, str]) -> Q | None:
    """The rows of the inputs ``carried`` names, seq and id alike (``None``: none)."""
    if not carried:
        return None
    held = Q()
    for seq, input_id in carried.items():
        held |= Q(seq=seq, input_id=input_id)
    return held


def _known(run_id: str, input_id: str) -> QueuedInput | None:
    row = RunInput.objects.filter(run__run_id=run_id, input_id=input_id).first()
    return None if row is None else queued_input(row)


def _refuse(run_id: str) -> None:
    status = Run.objects.named(run_id).values_list("status", flat=True).first()
    if status is None:
        raise CheckpointNotFoundError(run_id)
    raise RunCompletedError(run_id)


def _stored_run_pk(run_id: str) -> int | None:
    return Run.objects.named(run_id).values_list("pk", flat=True).first()


def _ms(moment: datetime) -> float:
    value = moment.timestamp() * 1000
    return int(value) if value.is_integer() else value
