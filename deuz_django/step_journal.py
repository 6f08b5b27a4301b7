"""``DjangoStepJournal``: the core's step journal on the ``RunStep``/``RunCall`` tables.

A step costs one round trip per write: recording its turn is one statement (the lease
check, the ``INSERT`` and the replaced turn's calls gone, :mod:`.boundary_write`), each
call's start one ``INSERT`` and its outcome one ``UPDATE``. None opens a transaction, so
none can be left open by a process that freezes (a leg taking the run over would wait
behind its rows). Loads happen only when a
leg resumes. The run's and the step's primary keys are remembered, so no write looks
them up twice. Each is tried once more on a new connection when this thread's
connection broke; every one is safe to repeat (a turn replaces itself, a recorded start
is ignored, an outcome overwrites itself).

Under a :class:`~deuz_django.store.Lease` a turn is recorded only while the lease is
still held, so a stale leg can never replace the turn a newer leg is working from (its
starts and outcomes are recorded: they say what really happened).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async
from django.db import connection
from django.db.models import OuterRef, Q, QuerySet, Subquery

from . import boundary_write
from .connections import once_more_if_broken
from .core import Message
from .core.durable import CallRecord, JournalStep, child_run_id_prefix
from .core.durable.codec import decode_json, encode_json
from .exceptions import LeaseLost, RunNotFound
from .models import Run, RunCall, RunStep

if TYPE_CHECKING:
    from .store import Lease


class DjangoStepJournal:
    """A :class:`~deuz_django.core.durable.StepJournal` in the database; the ``a``-twins
    are what the loop calls."""

    def __init__(
        self,
        *,
        lease: Lease | None = None,
        run_pk: Callable[[str], int | None] | None = None,
    ) -> None:
        """``run_pk`` gives a run's row pk — the store's, which knows the rows it read
        or wrote and makes the row of a run not saved yet (a new run's first step runs
        before its first checkpoint); without it the row is looked up, and a run without
        one is :class:`RunNotFound`."""
        self.lease = lease
        self.run_pk = run_pk or _stored_run_pk
        self._runs: dict[str, int] = {}
        self._steps: dict[tuple[str, int], int] = {}

    # -- StepJournal ----------------------------------------------------------------------

    def record_turn(
        self, run_id: str, step_index: int, basis: int, message: Message
    ) -> None:
        run_pk = self._run_pk(run_id)
        data = encode_json(message.to_json())
        step_pk = boundary_write.record_turn(
            run_pk, step_index, basis, data, self.lease
        )
        if step_pk is None:
            lease = self.lease
            assert lease is not None
            raise LeaseLost(
                f"Lease generation {lease.generation} on run '{lease.run_id}' was "
                f"taken over; this leg may not record step turns of '{run_id}'."
            )
        self._steps[(run_id, step_index)] = step_pk

    def record_start(self, run_id: str, step_index: int, tool_call_id: str) -> None:
        # A call in doubt that runs again (an idempotent tool) keeps its start row.
        # One statement: ``bulk_create`` wraps its INSERT in a transaction.
        with connection.cursor() as cursor:
            cursor.execute(_START, [self._step_pk(run_id, step_index), tool_call_id])

    def record_outcome(
        self,
        run_id: str,
        step_index: int,
        tool_call_id: str,
        result: Any,
        is_error: bool,
    ) -> None:
        step_pk = self._step_pk(run_id, step_index)
        values = {"finished": True, "result": encode_json(result), "is_error": is_error}
        if not RunCall.objects.filter(
            step_id=step_pk, tool_call_id=tool_call_id
        ).update(**values):
            RunCall.objects.create(step_id=step_pk, tool_call_id=tool_call_id, **values)

    def load_step(self, run_id: str, step_index: int) -> JournalStep | None:
        step = _step(run_id, step_index).first()
        return None if step is None else self._loaded(run_id, step)

    def latest_step(self, run_id: str) -> JournalStep | None:
        step = (
            RunStep.objects.filter(run__run_id=run_id).order_by("-step_index").first()
        )
        return None if step is None else self._loaded(run_id, step)

    def forget_start(self, run_id: str, step_index: int, tool_call_id: str) -> None:
        """Drop a call's record: "run it again", a person's answer to an in-doubt call."""
        RunCall.objects.filter(
            step__run__run_id=run_id,
            step__step_index=step_index,
            tool_call_id=tool_call_id,
        ).delete()

    async def arecord_turn(
        self, run_id: str, step_index: int, basis: int, message: Message
    ) -> None:
        await sync_to_async(once_more_if_broken)(
            lambda: self.record_turn(run_id, step_index, basis, message)
        )

    async def arecord_start(
        self, run_id: str, step_index: int, tool_call_id: str
    ) -> None:
        await sync_to_async(once_more_if_broken)(
            lambda: self.record_start(run_id, step_index, tool_call_id)
        )

    async def arecord_outcome(
        self,
        run_id: str,
        step_index: int,
        tool_call_id: str,
        result: Any,
        is_error: bool,
    ) -> None:
        await sync_to_async(once_more_if_broken)(
            lambda: self.record_outcome(
                run_id, step_index, tool_call_id, result, is_error
            )
        )

    async def aload_step(self, run_id: str, step_index: int) -> JournalStep | None:
        return await sync_to_async(once_more_if_broken)(
            lambda: self.load_step(run_id, step_index)
        )

    async def alatest_step(self, run_id: str) -> JournalStep | None:
        return await sync_to_async(once_more_if_broken)(
            lambda: self.latest_step(run_id)
        )

    async def aforget_start(
        self, run_id: str, step_index: int, tool_call_id: str
    ) -> None:
        await sync_to_async(self.forget_start)(run_id, step_index, tool_call_id)

    # -- internals ------------------------------------------------------------------------

    def _loaded(self, run_id: str, step: RunStep) -> JournalStep:
        self._runs[run_id] = step.run_id
        self._steps[(run_id, step.step_index)] = step.pk
        calls = {
            call.tool_call_id: CallRecord(
                call.tool_call_id,
                call.finished,
                decode_json(call.result) if call.finished else None,
                call.is_error,
            )
            for call in RunCall.objects.filter(step_id=step.pk)
        }
        message = Message.from_json(
            decode_json(step.message), path=f"{run_id}.journal[{step.step_index}]"
        )
        return JournalStep(step.step_index, step.basis, message, calls)

    def _run_pk(self, run_id: str) -> int:
        pk = self._runs.get(run_id)
        if pk is None:
            pk = self.run_pk(run_id)
            if pk is None:
                raise RunNotFound(f"No run '{run_id}'.")
            self._runs[run_id] = pk
        return pk

    def _step_pk(self, run_id: str, step_index: int) -> int:
        pk = self._steps.get((run_id, step_index))
        if pk is None:
            pk = _step(run_id, step_index).values_list("pk", flat=True).first()
            if pk is None:
                raise RunNotFound(
                    f"No turn recorded for step {step_index} of {run_id}."
                )
            self._steps[(run_id, step_index)] = pk
        return pk


_START = (
    f"INSERT INTO {RunCall._meta.db_table} "
    "(step_id, tool_call_id, finished, result, is_error) "
    "VALUES (%s, %s, false, '', false) ON CONFLICT (step_id, tool_call_id) DO NOTHING"
)


def _stored_run_pk(run_id: str) -> int | None:
    return Run.objects.named(run_id).values_list("pk", flat=True).first()


def _step(run_id: str, step_index: int) -> QuerySet[RunStep]:
    """The run's step ``step_index`` (unique), unordered: the model's ordering by run
    would join the run table to sort one row."""
    return RunStep.objects.filter(run__run_id=run_id, step_index=step_index).order_by()


def calls_in_doubt(
    run_pk: int, run_id: str, tool_call_ids: list[str]
) -> QuerySet[RunCall]:
    """The calls among ``tool_call_ids`` that the latest journaled step of the run, or of
    one of its sub-agents' runs, shows started without an outcome: what a crash left in
    doubt, for a person to settle."""
    tree = Q(run_id=run_pk) | Q(run__run_id__startswith=child_run_id_prefix(run_id))
    latest = RunStep.objects.filter(run=OuterRef("step__run")).order_by("-step_index")
    return RunCall.objects.filter(
        step__in=RunStep.objects.filter(tree),
        step=Subquery(latest.values("pk")[:1]),
        finished=False,
        tool_call_id__in=tool_call_ids,
    )
