"""The rows a suspended run waits on: one per call its checkpoint asks a person about.

Written with the checkpoint that suspends the run, in its transaction, so a run never
waits on a request nobody can see. Each new row gets its deadline first
(:mod:`deuz_django.deadline_rows`); standing rules and grants then decide what they cover
in the same transaction (:mod:`deuz_django.automatic`) — a row they decide is no longer
pending, so the deadline sweep never reminds, escalates or times it out; and
``approval_requested`` (``question_asked`` for a question) goes out for each new row left
for a person once that transaction commits.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

from django.core.exceptions import ImproperlyConfigured
from django.db.models import Q

from .automatic import decide_automatically
from .core import Message, waiting_client_calls
from .core.approvals import ToolApprovalRequest
from .core.durable.codec import encode_json
from .core.exceptions import DeuzError
from .deadline_rows import schedule_deadlines
from .models import Approval, ApprovalKind, ApprovalStatus
from .registry import agent_tools
from .signals import approval_requested, question_asked, send_on_commit
from .step_journal import calls_in_doubt

logger = logging.getLogger("deuz_django")


def record_approvals(
    run_pk: int, run_id: str, requests: tuple[ToolApprovalRequest, ...]
) -> None:
    """One pending row per gated call; an id already recorded keeps its (decided) row.

    A request for a call that the latest journaled step of the run — or of one of its
    sub-agents' runs, for a request from inside a sub-agent — shows started without an
    outcome is of kind ``outcome_unknown`` (the loop suspended on a call a crash left in
    doubt). Such a row keeps the input a person's edit put in place of the model's, so
    it shows what ran and "run it again" runs the edit again.
    """
    in_doubt = set(
        calls_in_doubt(run_pk, run_id, [r.tool_call_id for r in requests]).values_list(
            "tool_call_id", flat=True
        )
    )
    ids = [r.approval_id for r in requests]
    # The rows a new one would conflict with (see Approval.Meta.constraints).
    recorded = set(
        Approval.objects.filter(run_id=run_pk, approval_id__in=ids)
        .filter(
            Q(kind__in=[ApprovalKind.APPROVAL, ApprovalKind.QUESTION])
            | Q(status=ApprovalStatus.PENDING)
        )
        .values_list("approval_id", "kind")
    )
    edits = dict(
        Approval.objects.filter(
            run_id=run_pk,
            kind=ApprovalKind.APPROVAL,
            status=ApprovalStatus.APPROVED,
            approval_id__in=ids,
            edited_input__isnull=False,
        ).values_list("approval_id", "edited_input")
    )
    kinds = {r.approval_id: _kind(r, in_doubt) for r in requests}
    Approval.objects.bulk_create(
        [
            Approval(
                run_id=run_pk,
                approval_id=r.approval_id,
                kind=kinds[r.approval_id],
                tool_call_id=r.tool_call_id,
                tool_name=r.tool_name,
                input=json.loads(encode_json(r.input)),
                agent_path=list(r.agent_path or ()),
                token=r.token or "",
                question=None
                if kinds[r.approval_id] != ApprovalKind.QUESTION or r.question is None
                else r.question.to_json(),
                edited_input=edits.get(r.approval_id)
                if r.tool_call_id in in_doubt
                else None,
            )
            for r in requests
        ],
        ignore_conflicts=True,
    )
    schedule_deadlines(run_pk, ids)
    new = list(
        Approval.objects.filter(
            run_id=run_pk,
            approval_id__in=[
                i for i, kind in kinds.items() if (i, kind) not in recorded
            ],
            status=ApprovalStatus.PENDING,
        ).select_related("run", "run__owner")
    )
    decided = {a.pk for a in decide_automatically(new)}
    for approval in new:
        if approval.pk not in decided:
            signal = (
                question_asked
                if approval.kind == ApprovalKind.QUESTION
                else approval_requested
            )
            send_on_commit(signal, Approval, approval=approval)


def record_client_calls(run_pk: int, agent: str, history: Sequence[Message]) -> None:
    """One pending row of kind ``client_tool`` per call of a client tool (a tool
    without ``execute``) the suspended run waits on: the client sends its result as the
    row's answer, and the next leg gives the call that result (D11). An agent whose
    tools cannot be read now records none (logged): its calls get the reference's
    placeholder, as without rows."""
    try:
        tools = agent_tools(agent)
    except (LookupError, DeuzError, ImproperlyConfigured):
        logger.exception("deuz: the client tools of run %s cannot be read", run_pk)
        return
    Approval.objects.bulk_create(
        [
            Approval(
                run_id=run_pk,
                approval_id=call.tool_call_id,
                kind=ApprovalKind.CLIENT_TOOL,
                tool_call_id=call.tool_call_id,
                tool_name=call.tool_name,
                input=json.loads(encode_json(call.args)),
            )
            for call in waiting_client_calls(history, tools)
        ],
        ignore_conflicts=True,
    )


def _kind(request: ToolApprovalRequest, in_doubt: set[str]) -> ApprovalKind:
    if request.tool_call_id in in_doubt:
        return ApprovalKind.OUTCOME_UNKNOWN
    if request.question is not None:
        return ApprovalKind.QUESTION
    return ApprovalKind.APPROVAL
