"""``DjangoSessionStore``: checkpoints in the database, written as deltas.

A save updates the run row and inserts only the messages appended since the previous save
of that run, so its cost stays flat as history grows. The store remembers (per run) the
message tuple it last wrote or read. Histories are immutable, so an unchanged prefix holds
the *same objects* and is confirmed by identity at C speed; when the loop rewrote earlier
messages (``prepare_step``) the first differing position is found and everything from there
is rewritten.

The remembered tuple is only trusted while the run row still says it holds as many
messages as the store remembers (the row update is conditional on ``message_count``); when
another writer changed the run, or there is nothing remembered (the first save in this
process), the stored digests decide where the history diverges. The common save — an
append to the remembered history — is one statement on PostgreSQL
(:mod:`.boundary_write`); the ORM's path here handles everything else.

The store's ``step_journal`` (:mod:`deuz_django.storage.step_journal`) records what each step did
between checkpoints, so a resume repeats no model call and no tool call it recorded. Its
``input_queue`` (:mod:`deuz_django.storage.inputs`) holds what people said to a run as it
ran: a save that adds the messages delivering inputs marks them delivered in its
transaction, and a root run's ``completed`` save is refused while it leaves input
undelivered (both take the ORM's path: they happen once in a while, not every step).

A store built with a :class:`~deuz_django.storage.leases.Lease` refuses writes once that lease
was taken over (fencing): the stale leg's save raises
:class:`~deuz_django.exceptions.LeaseLost`.
"""

from __future__ import annotations

import builtins
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.db.models import Q
from django.utils import timezone

from ..core import Message, Tool
from ..core.durable import (
    AgentCheckpoint,
    ForkEdit,
    InputArrived,
    child_run_id_prefix,
    is_child_run_id,
    parent_run_id,
)
from ..core.usage import EMPTY_USAGE
from ..exceptions import LeaseLost, RunNotFound
from ..models import Run, RunMessage
from . import forking
from . import writes as boundary_write
from .checkpoints import checkpoint_columns, stored_checkpoint
from .db import bounded_atomic, once_more_if_broken
from .history import (
    common_prefix,
    insert_messages,
    message_rows,
    stored_prefix,
)
from .inputs import DjangoInputQueue
from .leases import Lease
from .step_journal import DjangoStepJournal

# isort: split
# The 0.1 names of this module that moved to .history and .checkpoints
# (deuz_django.store is this module).
from .checkpoints import checkpoint_of  # noqa: F401
from .history import decode_message, digest, encode_message  # noqa: F401

_REMEMBERED_RUNS = 1000


@dataclass(frozen=True, slots=True)
class _Remembered:
    """What this store last wrote or read of a run: its row, history, step and
    status."""

    pk: int
    messages: tuple[Message, ...]
    step_index: int
    status: str


class DjangoSessionStore:
    """A :class:`~deuz_django.core.durable.SessionStore` on the ``Run`` tables.

    ``save``/``load``/``delete``/``list`` are sync; ``asave``/``aload``/``adelete``/``alist``
    their async twins (the loop calls those, so the ORM never blocks the event loop).
    ``fork``/``afork`` fork a run (a :class:`~deuz_django.core.durable.ForkingStore`).

    A root run's suspended checkpoint calls ``on_suspended(run_pk, checkpoint)`` inside
    its save's transaction: what the suspension asks of people is bookkeeping above
    storage, which a leg supplies (:func:`deuz_django.approvals.asking.record_suspension`).
    """

    def __init__(
        self,
        *,
        lease: Lease | None = None,
        on_lease_lost: Callable[[BaseException], None] | None = None,
        on_save_failed: Callable[[BaseException], None] | None = None,
        on_saved: Callable[[], None] | None = None,
        on_suspended: Callable[[int, AgentCheckpoint], None] | None = None,
        run: Run | None = None,
    ) -> None:
        """``run``: the row a leg just read under ``lease`` — its first load of that run
        starts from it instead of reading it again."""
        self.lease = lease
        self._read_row = run
        self.on_lease_lost = on_lease_lost
        self.on_save_failed = on_save_failed
        self.on_saved = on_saved
        self.on_suspended = on_suspended
        self.step_journal = DjangoStepJournal(lease=lease, run_pk=self._run_pk)
        self.input_queue = DjangoInputQueue(run_pk=self._run_pk)
        self._remembered: OrderedDict[str, _Remembered] = OrderedDict()
        self._lock = threading.Lock()

    # -- SessionStore ---------------------------------------------------------------------

    def save(self, checkpoint: AgentCheckpoint) -> None:
        """Write the run row and the messages that changed since this run's last save."""
        run_id, messages = checkpoint.run_id, checkpoint.messages
        remembered = self._recall(run_id)
        if remembered is not None and self._appends(remembered, checkpoint):
            if boundary_write.append(
                remembered.pk,
                checkpoint_columns(checkpoint),
                message_count=len(remembered.messages),
                step_index=remembered.step_index,
                status=remembered.status,
                lease=self.lease,
                fenced_by_root=is_child_run_id(run_id),
                rows=message_rows(messages, len(remembered.messages)),
            ):
                self._remember(run_id, remembered.pk, checkpoint)
                return
            remembered = None  # another writer changed the row: the digests decide
        with bounded_atomic():
            if remembered is not None and self._write_run(
                remembered.pk, checkpoint, expected=remembered
            ):
                pk, stored = remembered.pk, len(remembered.messages)
                start = common_prefix(remembered.messages, messages)
            else:
                pk, stored = self._run_row(run_id)
                if not self._write_run(pk, checkpoint):
                    self._refuse(run_id)
                start = stored_prefix(pk, messages)
            if start < stored:
                RunMessage.objects.filter(run_id=pk, index__gte=start).delete()
            if start < len(messages):
                insert_messages(pk, messages, start)
            if not is_child_run_id(run_id):
                self.input_queue.mark_delivered(pk, checkpoint, messages[start:])
            suspended = checkpoint.status == "suspended"
            if suspended and self.on_suspended and not is_child_run_id(run_id):
                self.on_suspended(pk, checkpoint)
        self._remember(run_id, pk, checkpoint)

    def create(self, checkpoint: AgentCheckpoint, **columns: Any) -> Run:
        """A new run's row, with ``columns`` and its first checkpoint, and its history:
        two inserts (a start has no stored row to compare with). Raises
        ``IntegrityError`` when the run id is taken."""
        with bounded_atomic():
            run = Run.objects.create(
                run_id=checkpoint.run_id, **columns, **checkpoint_columns(checkpoint)
            )
            insert_messages(run.pk, checkpoint.messages, 0)
        self._remember(checkpoint.run_id, run.pk, checkpoint)
        return run

    def start(self, run_id: str, history: tuple[Message, ...], **columns: Any) -> Run:
        """A new run whose first checkpoint is its input (step 0, ``running``), so a
        process that dies before the first step boundary leaves a run recovery drives."""
        return self.create(
            AgentCheckpoint(
                run_id=run_id,
                step_id=f"{run_id}#0",
                step_index=0,
                status="running",
                messages=history,
                usage=EMPTY_USAGE,
                created_at=int(timezone.now().timestamp() * 1000),
            ),
            **columns,
        )

    def load(self, run_id: str) -> AgentCheckpoint | None:
        """The run's checkpoint; ``None`` for a row without one yet — the step journal
        creates a sub-agent's row when its first turn is recorded, before its first
        checkpoint, and that row must not read as a checkpoint with no history."""
        run, self._read_row = self._read_row, None
        if run is None or run.run_id != run_id:
            run = Run.objects.named(run_id).first()
        checkpoint = None if run is None else stored_checkpoint(run)
        if run is not None and checkpoint is not None:
            self._remember(run_id, run.pk, checkpoint)
        return checkpoint

    def delete(self, run_id: str) -> None:
        """Remove the run with its history, approvals, journal and sub-agent runs."""
        prefix = child_run_id_prefix(run_id)
        Run.objects.filter(Q(run_id=run_id) | Q(run_id__startswith=prefix)).delete()
        with self._lock:
            for key in [
                k for k in self._remembered if k == run_id or k.startswith(prefix)
            ]:
                del self._remembered[key]

    def list(self) -> list[str]:
        return list(
            Run.objects.order_by("created_at", "pk").values_list("run_id", flat=True)
        )

    def fork(
        self,
        parent_run_id: str,
        *,
        step_index: int,
        run_id: str,
        edit: ForkEdit | None = None,
        with_turn: bool = False,
        tools: Mapping[str, Tool] | None = None,
        **columns: Any,
    ) -> AgentCheckpoint:
        """Fork ``parent_run_id`` at ``step_index`` into the new run ``run_id``, in one
        transaction (:mod:`.forking`): a :class:`~deuz_django.core.durable.ForkingStore`.
        ``columns`` set more of the fork's row (its ``owner``)."""
        forked = forking.fork(
            parent_run_id,
            step_index=step_index,
            run_id=run_id,
            edit=edit,
            with_turn=with_turn,
            tools=tools,
            columns=columns,
        )
        return forked

    async def asave(self, checkpoint: AgentCheckpoint) -> None:
        """:meth:`save`, telling the leg how it went: ``on_saved`` after a boundary is
        stored, ``on_save_failed`` (with the error) when it is not, besides raising."""
        try:
            # A save is conditional on what the row holds, so it may be tried again.
            await sync_to_async(once_more_if_broken)(lambda: self.save(checkpoint))
        except (LeaseLost, InputArrived):  # InputArrived: the leg steps on
            raise
        except Exception as error:
            if self.on_save_failed is not None:
                self.on_save_failed(error)
            raise
        if self.on_saved is not None:
            self.on_saved()

    async def aload(self, run_id: str) -> AgentCheckpoint | None:
        return await sync_to_async(self.load)(run_id)

    async def afork(
        self,
        parent_run_id: str,
        *,
        step_index: int,
        run_id: str,
        edit: ForkEdit | None = None,
        with_turn: bool = False,
        tools: Mapping[str, Tool] | None = None,
        **columns: Any,
    ) -> AgentCheckpoint:
        return await sync_to_async(self.fork)(
            parent_run_id,
            step_index=step_index,
            run_id=run_id,
            edit=edit,
            with_turn=with_turn,
            tools=tools,
            **columns,
        )

    async def adelete(self, run_id: str) -> None:
        await sync_to_async(self.delete)(run_id)

    async def alist(self) -> builtins.list[str]:  # list: the method above
        return await sync_to_async(self.list)()

    # -- internals ------------------------------------------------------------------------

    def _run_pk(self, run_id: str) -> int:
        """The run's row pk: remembered when this store read or wrote the run."""
        remembered = self._recall(run_id)
        return remembered.pk if remembered is not None else self._run_row(run_id)[0]

    def _run_row(self, run_id: str) -> tuple[int, int]:
        """The run's pk and stored message count, creating the row on first save.

        A sub-agent's row hangs under its parent's and inherits its agent and owner.
        """
        found = Run.objects.named(run_id).values_list("pk", "message_count").first()
        if found is not None:
            return found
        parent = None
        parent_id = parent_run_id(run_id)  # None: a root run
        if parent_id is not None:
            parent = Run.objects.named(parent_id).first()
        created = Run.objects.create(
            run_id=run_id,
            parent=parent,
            agent=parent.agent if parent else "",
            owner_id=parent.owner_id if parent else None,
        )
        return created.pk, 0

    def _write_run(
        self,
        pk: int,
        checkpoint: AgentCheckpoint,
        *,
        expected: _Remembered | None = None,
    ) -> bool:
        """Write the run's counters; ``False`` when the row is not as expected.

        ``expected`` makes the write conditional on the row still holding the history
        length and step this store remembers (no other writer came in between); under a
        lease, the write happens only while the lease is still ours (a sub-agent's run
        is fenced by its root run's lease, whose row is locked).
        """
        rows = Run.objects.filter(pk=pk)
        if expected is not None:
            rows = rows.filter(
                message_count=len(expected.messages), step_index=expected.step_index
            )
        lease = self.lease
        if lease is not None:
            held = Run.objects.held_by(lease)
            if is_child_run_id(checkpoint.run_id):
                if not held.select_for_update().exists():  # the root run's row
                    return False
            else:
                rows = rows.held_by(lease)
        completing = checkpoint.status == "completed"
        if completing and not is_child_run_id(checkpoint.run_id):
            # No run completes with input it has not read: the input's seq is taken
            # on this row, so the condition holds against a concurrent input too.
            watermark = DjangoInputQueue.completion_watermark(pk, checkpoint)
            if rows.filter(input_seq__lte=watermark).update(
                **checkpoint_columns(checkpoint)
            ):
                return True
            arrived = DjangoInputQueue.arrived(pk, checkpoint.run_id, watermark)
            if arrived is not None:
                raise arrived  # rolls the save back
            return False
        return rows.update(**checkpoint_columns(checkpoint)) == 1

    @staticmethod
    def _appends(remembered: _Remembered, checkpoint: AgentCheckpoint) -> bool:
        """Whether the save only appends to the remembered history (and records no
        approvals or client tool calls, delivers no input and completes no root run):
        the one-statement write of :mod:`.boundary_write`."""
        root = not is_child_run_id(checkpoint.run_id)
        if root and checkpoint.status in ("suspended", "completed"):
            return False
        stored = len(remembered.messages)
        if common_prefix(remembered.messages, checkpoint.messages) != stored:
            return False
        return not (root and DjangoInputQueue.delivers(checkpoint.messages[stored:]))

    def _refuse(self, run_id: str) -> None:
        lease = self.lease
        if lease is None:
            raise RunNotFound(f"Run '{run_id}' was deleted while it was being saved.")
        lost = LeaseLost(
            f"Lease generation {lease.generation} on run '{lease.run_id}' was taken "
            "over; this leg's writes are refused."
        )
        if self.on_lease_lost is not None:
            self.on_lease_lost(lost)
        raise lost

    def _recall(self, run_id: str) -> _Remembered | None:
        with self._lock:
            return self._remembered.get(run_id)

    def _remember(self, run_id: str, pk: int, checkpoint: AgentCheckpoint) -> None:
        remembered = _Remembered(
            pk, checkpoint.messages, checkpoint.step_index, checkpoint.status
        )
        with self._lock:
            self._remembered[run_id] = remembered
            self._remembered.move_to_end(run_id)
            while len(self._remembered) > _REMEMBERED_RUNS:
                self._remembered.popitem(last=False)
