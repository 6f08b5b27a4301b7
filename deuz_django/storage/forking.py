"""Forking in the database: what :meth:`DjangoSessionStore.fork
<deuz_django.storage.store.DjangoSessionStore.fork>` does.

The parent is read and the fork written in one transaction — the fork's run row with its
lineage (``forked_from``, ``forked_at_step``, ``forked_with_turn``, ``fork_edit``), its
history, its journal steps with their calls, and the rows of the sub-agent runs it
continues — so a process that dies mid-fork leaves nothing of it behind. The parent's row
is locked while it is read: its legs' saves wait those milliseconds, and the fork starts
from one consistent checkpoint. Two forks of one run take turns and make two runs. The
rules of what a fork holds are the core's (:func:`~deuz_django.core.durable.plan_fork`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import IntegrityError
from django.utils import timezone

from ..core import Tool, ToolUsePart
from ..core.durable import (
    AgentCheckpoint,
    ForkEdit,
    ForkedRun,
    JournalStep,
    parent_run_id,
    plan_fork,
)
from ..core.durable.codec import encode_json
from ..exceptions import RunExists
from ..models import Run, RunCall, RunStep
from .checkpoints import checkpoint_columns, stored_checkpoint
from .db import bounded_atomic
from .history import insert_messages
from .step_journal import journal_step


class TableSource:
    """The parent as :func:`~deuz_django.core.durable.plan_fork` reads it, from the
    tables (a :class:`~deuz_django.core.durable.ForkSource`)."""

    def load(self, run_id: str) -> AgentCheckpoint | None:
        run = Run.objects.named(run_id).first()
        return None if run is None else stored_checkpoint(run)

    def load_steps(self, run_id: str) -> list[JournalStep]:
        steps = (
            RunStep.objects.filter(run__run_id=run_id)
            .order_by("step_index")
            .prefetch_related("calls")
        )
        return [journal_step(run_id, step, step.calls.all()) for step in steps]

    def sub_run_ids(self, run_id: str) -> list[str]:
        below = Run.objects.filter(run_id__startswith=f"{run_id}::")
        found = below.order_by("pk").values_list("run_id", flat=True)
        return [child for child in found if parent_run_id(child) == run_id]


def fork(
    parent_run_id: str,
    *,
    step_index: int,
    run_id: str,
    edit: ForkEdit | None = None,
    with_turn: bool = False,
    tools: Mapping[str, Tool] | None = None,
    columns: Mapping[str, Any] | None = None,
) -> AgentCheckpoint:
    """Fork ``parent_run_id`` (:class:`~deuz_django.core.durable.ForkingStore`'s
    ``fork``) and return the fork's checkpoint. ``columns`` set more of the row (its
    ``owner``; by default the parent's, as its agent; the title says what it forks)."""
    try:
        with bounded_atomic():
            # Locked: the parent holds still while it is read.
            parent = Run.objects.select_for_update().named(parent_run_id).first()
            planned = plan_fork(
                TableSource(),
                parent_run_id,
                step_index=step_index,
                run_id=run_id,
                created_at=int(timezone.now().timestamp() * 1000),
                edit=edit,
                with_turn=with_turn,
                tools=tools,
            )
            assert parent is not None  # plan_fork found its checkpoint
            lineage = {
                "agent": parent.agent,
                "owner_id": parent.owner_id,
                "title": fork_title(parent, edit),
                **(columns or {}),
            }
            write(
                planned,
                forked_from=parent,
                forked_at_step=step_index,
                forked_with_turn=with_turn,
                fork_edit=None if edit is None else edit.to_json(),
                **lineage,
            )
    except IntegrityError:
        taken = Run.objects.named(run_id).exists()
        if taken or run_id == parent_run_id:
            raise RunExists(run_id) from None
        raise
    forked = planned[0].checkpoint
    assert forked is not None  # a fork's own run always has its checkpoint
    return forked


def fork_title(parent: Run, edit: ForkEdit | None) -> str:
    """What the fork asks, when it asks differently — the title is the question a
    chat shows the conversation under — else "Fork of" the parent's title."""
    if edit is not None and edit.message is not None:
        return edit.message[:200]
    return f"Fork of {parent.title or parent.run_id}"[:200]


def write(planned: tuple[ForkedRun, ...], **columns: Any) -> Run:
    """The rows of the runs a fork planned (the fork first): each run's row, history
    and journal. ``columns`` set the fork's row; its sub-agent runs share its agent and
    owner. A run id that is taken raises ``IntegrityError``."""
    rows: dict[str, Run] = {}
    for index, forked in enumerate(planned):
        values = (
            {} if forked.checkpoint is None else checkpoint_columns(forked.checkpoint)
        )
        if index == 0:
            values |= columns
        else:
            root = rows[planned[0].run_id]
            values |= {
                "parent": rows[parent_run_id(forked.run_id) or ""],
                "agent": root.agent,
                "owner_id": root.owner_id,
            }
        rows[forked.run_id] = row = Run.objects.create(run_id=forked.run_id, **values)
        if forked.checkpoint is not None:
            insert_messages(row.pk, forked.checkpoint.messages, 0)
        _write_steps(row, forked.steps)
    return rows[planned[0].run_id]


def _write_steps(run: Run, steps: tuple[JournalStep, ...]) -> None:
    """A run's journal steps and their calls, in two inserts."""
    rows = RunStep.objects.bulk_create(
        [
            RunStep(
                run=run,
                step_index=step.step_index,
                basis=step.basis,
                message=encode_json(step.message.to_json()),
            )
            for step in steps
        ]
    )
    calls = []
    for row, step in zip(rows, steps, strict=True):
        names = {p.id: p.name for p in step.message.parts if isinstance(p, ToolUsePart)}
        calls += [
            RunCall(
                step=row,
                tool_call_id=call.tool_call_id,
                tool_name=names.get(call.tool_call_id, ""),
                finished=call.finished,
                result=encode_json(call.result) if call.finished else "",
                is_error=call.is_error,
            )
            for call in step.calls.values()
        ]
    RunCall.objects.bulk_create(calls, batch_size=500)
