"""``DjangoSessionStore``: checkpoints in the database, written as deltas.

A save updates the run row and inserts only the messages appended since the last save of
that run, so its cost stays flat as history grows. The store remembers (per run) the
message tuple it last wrote or read; because histories are immutable, an unchanged prefix is
the *same objects*, checked by identity. When the loop rewrote earlier messages
(``prepare_step``), the first differing position is found and everything from there is
rewritten. Without a remembered tuple (first save in this process), stored digests decide.

A store built with a :class:`Lease` refuses writes once that lease was taken over (fencing):
the stale leg's save raises :class:`~deuz_django.exceptions.LeaseLost`.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from asgiref.sync import sync_to_async
from django.db import transaction
from django.db.models import Q

from .core import Message
from .core.approvals import ToolApprovalRequest
from .core.durable import AgentCheckpoint
from .core.durable.codec import decode_json, encode_json
from .core.usage import Usage
from .exceptions import LeaseLost
from .models import Approval, Run, RunMessage

CHILD_SEPARATOR = "::"
_REMEMBERED_RUNS = 1000


@dataclass(frozen=True, slots=True)
class Lease:
    """The right to run one leg: who holds it and its fencing generation."""

    run_id: str
    owner: str
    generation: int


def root_run_id(run_id: str) -> str:
    """``root::coder#c1::tester#c2`` → ``root`` (sub-agent checkpoints live under it)."""
    return run_id.split(CHILD_SEPARATOR, 1)[0]


def encode_message(message: Message) -> str:
    return encode_json(message.to_json())


def digest(data: str) -> str:
    return hashlib.sha1(data.encode(), usedforsecurity=False).hexdigest()


@dataclass(slots=True)
class _Remembered:
    pk: int
    messages: tuple[Message, ...]


class DjangoSessionStore:
    """A :class:`~deuz_django.core.durable.SessionStore` on the ``Run`` tables.

    ``save``/``load`` are sync; ``asave``/``aload`` their async twins (used by the loop).
    """

    def __init__(
        self,
        *,
        lease: Lease | None = None,
        on_lease_lost: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.lease = lease
        self.on_lease_lost = on_lease_lost
        self._remembered: OrderedDict[str, _Remembered] = OrderedDict()

    # -- SessionStore ---------------------------------------------------------------------

    def save(self, checkpoint: AgentCheckpoint) -> None:
        run_id = checkpoint.run_id
        with transaction.atomic():
            pk, stored = self._run_for(run_id)
            self._update_run(pk, checkpoint)
            start = self._common_prefix(run_id, pk, stored, checkpoint.messages)
            if start < stored:
                RunMessage.objects.filter(run_id=pk, index__gte=start).delete()
            rows = []
            for index in range(start, len(checkpoint.messages)):
                message = checkpoint.messages[index]
                data = encode_message(message)
                rows.append(
                    RunMessage(
                        run_id=pk,
                        index=index,
                        role=message.role,
                        data=data,
                        digest=digest(data),
                    )
                )
            if rows:
                RunMessage.objects.bulk_create(rows)
            if checkpoint.pending_approvals and CHILD_SEPARATOR not in run_id:
                _record_approvals(pk, checkpoint.pending_approvals)
        self._remember(run_id, pk, checkpoint.messages)

    def load(self, run_id: str) -> AgentCheckpoint | None:
        run = Run.objects.filter(run_id=run_id).first()
        if run is None:
            return None
        rows = RunMessage.objects.filter(run_id=run.pk).order_by("index")
        messages = tuple(
            Message.from_json(
                decode_json(row.data), path=f"{run_id}.messages[{row.index}]"
            )
            for row in rows.only("index", "data")
        )
        pending = (
            tuple(
                ToolApprovalRequest.from_json(item)
                for item in decode_json(run.pending_approvals)
            )
            if run.pending_approvals
            else None
        )
        self._remember(run_id, run.pk, messages)
        return AgentCheckpoint(
            run_id=run.run_id,
            step_id=f"{run.run_id}#{run.step_index}",
            step_index=run.step_index,
            status=run.status,  # type: ignore[arg-type]
            messages=messages,
            usage=Usage.from_json(run.usage or {}),
            pending_approvals=pending,
            agent_path=tuple(run.agent_path) if run.agent_path else None,
            created_at=run.checkpoint_created_at,
        )

    def delete(self, run_id: str) -> None:
        """Remove the run with its history, approvals, journal and sub-agent runs."""
        Run.objects.filter(
            Q(run_id=run_id) | Q(run_id__startswith=run_id + CHILD_SEPARATOR)
        ).delete()
        for key in [
            k for k in self._remembered if root_run_id(k) == run_id or k == run_id
        ]:
            del self._remembered[key]

    def list(self) -> list[str]:
        return list(
            Run.objects.order_by("created_at", "pk").values_list("run_id", flat=True)
        )

    async def asave(self, checkpoint: AgentCheckpoint) -> None:
        await sync_to_async(self.save)(checkpoint)

    async def aload(self, run_id: str) -> AgentCheckpoint | None:
        return await sync_to_async(self.load)(run_id)

    async def adelete(self, run_id: str) -> None:
        await sync_to_async(self.delete)(run_id)

    async def alist(self) -> list[str]:
        return await sync_to_async(self.list)()

    # -- internals ------------------------------------------------------------------------

    def _run_for(self, run_id: str) -> tuple[int, int]:
        """The run's pk and stored message count, creating the row on first save."""
        remembered = self._remembered.get(run_id)
        if remembered is not None:
            return remembered.pk, len(remembered.messages)
        found = (
            Run.objects.filter(run_id=run_id).values_list("pk", "message_count").first()
        )
        if found is not None:
            return found
        parent = None
        if CHILD_SEPARATOR in run_id:
            parent = Run.objects.filter(
                run_id=run_id.rsplit(CHILD_SEPARATOR, 1)[0]
            ).first()
        created = Run.objects.create(
            run_id=run_id, parent=parent, agent=parent.agent if parent else ""
        )
        return created.pk, 0

    def _update_run(self, pk: int, checkpoint: AgentCheckpoint) -> None:
        """Write the run's counters; under a lease, only while the lease is still ours."""
        rows = Run.objects.filter(pk=pk)
        lease = self.lease
        held = True
        if lease is not None:
            if CHILD_SEPARATOR in checkpoint.run_id:
                held = Run.objects.filter(
                    run_id=lease.run_id,
                    lease_owner=lease.owner,
                    lease_generation=lease.generation,
                ).exists()
            else:
                rows = rows.filter(
                    lease_owner=lease.owner, lease_generation=lease.generation
                )
        pending = checkpoint.pending_approvals or ()
        updated = rows.update(
            status=checkpoint.status,
            step_index=checkpoint.step_index,
            usage=checkpoint.usage.to_json(),
            pending_approvals=encode_json([r.to_json() for r in pending])
            if pending
            else "",
            agent_path=list(checkpoint.agent_path) if checkpoint.agent_path else None,
            checkpoint_created_at=int(checkpoint.created_at),
            message_count=len(checkpoint.messages),
            last_error="",
        )
        if lease is not None and not (held and updated):
            lost = LeaseLost(
                f"Lease generation {lease.generation} on run '{lease.run_id}' was taken "
                "over; this leg's writes are refused."
            )
            if self.on_lease_lost is not None:
                self.on_lease_lost(lost)
            raise lost

    def _common_prefix(
        self, run_id: str, pk: int, stored: int, messages: tuple[Message, ...]
    ) -> int:
        """How many leading messages are already stored unchanged."""
        remembered = self._remembered.get(run_id)
        if remembered is not None and remembered.pk == pk:
            previous = remembered.messages
            for index in range(min(stored, len(messages))):
                if (
                    messages[index] is not previous[index]
                    and messages[index] != previous[index]
                ):
                    return index
            return min(stored, len(messages))
        digests = RunMessage.objects.filter(run_id=pk).order_by("index")
        index = 0
        for stored_digest in digests.values_list("digest", flat=True):
            if (
                index >= len(messages)
                or digest(encode_message(messages[index])) != stored_digest
            ):
                return index
            index += 1
        return index

    def _remember(self, run_id: str, pk: int, messages: tuple[Message, ...]) -> None:
        self._remembered[run_id] = _Remembered(pk, messages)
        self._remembered.move_to_end(run_id)
        while len(self._remembered) > _REMEMBERED_RUNS:
            self._remembered.popitem(last=False)


def _record_approvals(run_pk: int, requests: tuple[ToolApprovalRequest, ...]) -> None:
    """One pending row per gated call; an id already recorded keeps its (decided) row."""
    Approval.objects.bulk_create(
        [
            Approval(
                run_id=run_pk,
                approval_id=r.approval_id,
                tool_call_id=r.tool_call_id,
                tool_name=r.tool_name,
                input=json.loads(encode_json(r.input)),
                agent_path=list(r.agent_path or ()),
                token=r.token or "",
            )
            for r in requests
        ],
        ignore_conflicts=True,
    )
