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

Under a :class:`~deuz_django.storage.leases.Lease` a turn is recorded only while the lease is
still held, so a stale leg can never replace the turn a newer leg is working from (its
starts and outcomes are recorded: they say what really happened).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NoReturn

from asgiref.sync import sync_to_async
from django.db import IntegrityError
from django.db.models import Count, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from ..core import Message
from ..core.approvals import input_digest
from ..core.durable import (
    Authorization,
    CallRecord,
    JournalStep,
    UnauthorizedExecution,
    child_run_id_prefix,
)
from ..core.durable.codec import decode_json, encode_json
from ..exceptions import LeaseLost, RunNotFound, RunStopped
from ..models import Approval, ApprovalStatus, Run, RunCall, RunStep
from ..runs.limits import RunLimits
from . import writes as boundary_write
from .db import bounded_atomic, once_more_if_broken
from .leases import Lease


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
        # Set by a leg: counts executions against the run's limit per tool.
        self.executions: ExecutionCounts | None = None
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
            self._lost(run_id, "record step turns of")
        self._steps[(run_id, step_index)] = step_pk

    def record_start(
        self,
        run_id: str,
        step_index: int,
        tool_call_id: str,
        *,
        tool_name: str = "",
        authorization: Authorization | None = None,
    ) -> None:
        """Record the call's start; on ``authorization``'s decision, only if that
        decision approved exactly this call (id, tool, the input about to run) and no
        other execution started on it — the unique key on ``RunCall.decision`` makes
        that last part the database's to enforce. Raises
        :class:`UnauthorizedExecution`, recording nothing, otherwise."""
        step_pk = self._step_pk(run_id, step_index)
        if self.executions is not None:
            self.executions.admit(tool_name)
        if authorization is None:
            if not boundary_write.record_start(
                step_pk, tool_call_id, tool_name, self.lease
            ):
                self._lost(run_id, f"start call {tool_call_id} of")
            return
        started = RunCall(
            step_id=step_pk,
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            started_at=timezone.now(),
        )
        try:
            with bounded_atomic():
                if self.lease is not None and not _still_held(self.lease):
                    self._lost(run_id, f"start call {tool_call_id} of")
                _start_on_decision(started, authorization)
        except IntegrityError:
            raise UnauthorizedExecution(
                f"Decision {authorization.decision_id} already authorized an "
                f"execution; call {tool_call_id} does not run on it."
            ) from None

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
        self,
        run_id: str,
        step_index: int,
        tool_call_id: str,
        *,
        tool_name: str = "",
        authorization: Authorization | None = None,
    ) -> None:
        await sync_to_async(once_more_if_broken)(
            lambda: self.record_start(
                run_id,
                step_index,
                tool_call_id,
                tool_name=tool_name,
                authorization=authorization,
            )
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

    def _lost(self, run_id: str, act: str) -> NoReturn:
        lease = self.lease
        assert lease is not None
        raise LeaseLost(
            f"Lease generation {lease.generation} on run '{lease.run_id}' was taken "
            f"over; this leg may not {act} '{run_id}'."
        )

    def _loaded(self, run_id: str, step: RunStep) -> JournalStep:
        self._runs[run_id] = step.run_id
        self._steps[(run_id, step.step_index)] = step.pk
        return journal_step(run_id, step, RunCall.objects.filter(step_id=step.pk))

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


class ExecutionCounts:
    """How many times each tool of a run started executing — its sub-agents' calls
    included — held against the run's limit per tool
    (:attr:`RunLimits.executions_per_tool`). Counted from the journal once, when the
    leg first starts a call; only the lease holder starts calls, so the count stays
    exact in memory after that."""

    def __init__(self, run: Run, limits: RunLimits) -> None:
        self.run = run
        self.limits = limits
        self._counts: dict[str, int] | None = None

    def admit(self, tool_name: str) -> None:
        """Count one more execution of ``tool_name``, or raise :class:`RunStopped`
        (naming the limit) when the run reached its limit for it."""
        if self.limits.executions_per_tool is None:
            return
        if self._counts is None:
            self._counts = self._stored()
        executed = self._counts.get(tool_name, 0)
        problem = self.limits.executions_problem(tool_name, executed)
        if problem is not None:
            raise RunStopped(f"Stopped by the system: {problem}.", limit=problem)
        self._counts[tool_name] = executed + 1

    def _stored(self) -> dict[str, int]:
        tree = Q(step__run_id=self.run.pk) | Q(
            step__run__run_id__startswith=child_run_id_prefix(self.run.run_id)
        )
        return dict(
            RunCall.objects.filter(tree)
            .order_by()
            .values("tool_name")
            .annotate(started=Count("pk"))
            .values_list("tool_name", "started")
        )


def _still_held(lease: Lease) -> bool:
    """The lease is still this leg's, its run row locked against a takeover until the
    start commits."""
    return Run.objects.select_for_update().held_by(lease).exists()


def _start_on_decision(started: RunCall, authorization: Authorization) -> None:
    """Insert ``started`` on its decision, after checking the decision authorizes it
    (the same call starting again on the same decision is the same execution)."""
    decision_id = authorization.decision_id
    earlier = list(
        RunCall.objects.filter(
            step_id=started.step_id, tool_call_id=started.tool_call_id
        ).values_list("decision_id", flat=True)
    )
    if earlier:
        if str(earlier[0]) == decision_id:
            return
        raise UnauthorizedExecution(
            f"Call {started.tool_call_id} started already, not on decision "
            f"{decision_id}; it does not run again on it."
        )
    decision = (
        Approval.objects.filter(pk=int(decision_id)).first()
        if decision_id.isdigit()
        else None
    )
    problem = authorization_problem(decision, started, authorization)
    if problem is not None:
        raise UnauthorizedExecution(
            f"Call {started.tool_call_id} does not run on decision {decision_id}: "
            f"{problem}."
        )
    started.decision = decision
    started.save(force_insert=True)


def authorization_problem(
    decision: Approval | None, started: RunCall, authorization: Authorization
) -> str | None:
    """Why ``decision`` does not authorize the execution ``started`` (``None``: it
    does): it must be an approving verdict on this very call — its id and tool — made
    on the input about to run (the edit, when a person edited it)."""
    if decision is None:
        return "no such decision"
    if decision.status != ApprovalStatus.APPROVED:
        return f"it was {decision.status}, not approved"
    if (decision.tool_call_id, decision.tool_name) != (
        started.tool_call_id,
        started.tool_name,
    ):
        return (
            f"it approved call {decision.tool_call_id} of {decision.tool_name}, "
            f"not this {started.tool_name} call"
        )
    if decision.edited_input is not None:
        approved = input_digest(decision.edited_input)
    else:
        approved = decision.input_digest or input_digest(decision.input)
    if approved != authorization.input_digest:
        return "the input about to run is not the input it approved"
    return None


def journal_step(run_id: str, step: RunStep, calls: Iterable[RunCall]) -> JournalStep:
    """A journaled step of ``run_id`` as the core reads it, from its rows."""
    records = {
        call.tool_call_id: CallRecord(
            call.tool_call_id,
            call.finished,
            decode_json(call.result) if call.finished else None,
            call.is_error,
            None if call.decision_id is None else str(call.decision_id),
        )
        for call in calls
    }
    message = Message.from_json(
        decode_json(step.message), path=f"{run_id}.journal[{step.step_index}]"
    )
    return JournalStep(step.step_index, step.basis, message, records)


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
