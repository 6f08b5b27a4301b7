"""The rows a suspended run waits on: one per call its checkpoint asks a person about.

Written with the checkpoint that suspends the run, in its transaction, so a run never
waits on a request nobody can see. Each row belongs to its *ask* — the checkpoint
boundary that suspended (``Approval.step_index``) — and keeps a digest of the input and
the tool's definition it was asked with: a verdict on it settles that call of that ask
only, and a call asked again later (a new step or leg, a call id the model re-used, a
replayed turn) gets a row of its own, which rules and people decide anew.

Each new row gets its deadline first (:mod:`deuz_django.deadlines.rows`); standing rules
and grants then decide what they cover in the same transaction
(:mod:`deuz_django.rules.automatic`) — a row they decide is no longer pending, so the deadline
sweep never reminds, escalates or times it out; and ``approval_requested``
(``question_asked`` for a question) goes out for each new row left for a person once
that transaction commits.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from ..audit import held_to_the_end
from ..core import Message, Tool, waiting_client_calls
from ..core.approvals import ToolApprovalRequest, input_digest
from ..core.durable import AgentCheckpoint
from ..core.durable.codec import encode_json
from ..core.exceptions import DeuzError
from ..deadlines.rows import schedule_deadlines
from ..models import Approval, ApprovalKind, ApprovalStatus, Run, RunCall
from ..registry import agent_tools, find_tool
from ..rules.automatic import decide_automatically
from ..runs.stopping import stop_by_system
from ..signals import approval_requested, question_asked, send_on_commit
from ..storage.step_journal import calls_in_doubt
from .tool_versions import definition, fingerprint

logger = logging.getLogger("deuz_django")


def record_suspension(run_pk: int, checkpoint: AgentCheckpoint) -> None:
    """The rows a suspended root run's checkpoint asks for: its gated calls
    (:func:`record_approvals`) and its client tool calls (:func:`record_client_calls`),
    bound to this ask (the checkpoint's ``step_index``), with the fingerprint of the
    agent's tools at suspension on the run row."""
    agent = Run.objects.values_list("agent", flat=True).get(pk=run_pk)
    try:
        tools: Mapping[str, Tool] | None = agent_tools(agent)
    except (LookupError, DeuzError, ImproperlyConfigured):
        logger.exception("deuz: the tools of run %s cannot be read", checkpoint.run_id)
        tools = None
    if tools is not None:
        Run.objects.filter(pk=run_pk).update(tools_fingerprint=fingerprint(tools))
    # What standing rules and grants decide is audited as the save's last writes.
    with held_to_the_end():
        if checkpoint.pending_approvals:
            record_approvals(
                run_pk,
                checkpoint.run_id,
                checkpoint.step_index,
                checkpoint.pending_approvals,
                tools,
            )
        if tools is not None:
            record_client_calls(
                run_pk, checkpoint.step_index, tools, checkpoint.messages
            )


def record_approvals(
    run_pk: int,
    run_id: str,
    step_index: int,
    requests: tuple[ToolApprovalRequest, ...],
    tools: Mapping[str, Tool] | None,
) -> None:
    """One pending row per gated call of this ask (the suspension at ``step_index``):
    a call asked again later is a new row, never settled by an earlier verdict. Saving
    the same ask again (a leg that suspended there before) keeps its rows.

    A request for a call that the latest journaled step of the run — or of one of its
    sub-agents' runs, for a request from inside a sub-agent — shows started without an
    outcome is of kind ``outcome_unknown`` (the loop suspended on a call a crash left in
    doubt). Such a row keeps the input a person's edit put in place of the model's (the
    edit of the decision the call started on), so it shows what ran and "run it again"
    runs the edit again.
    """
    ids = [r.approval_id for r in requests]
    asked = Approval.objects.filter(run_id=run_pk, step_index=step_index)
    recorded = set(
        asked.filter(approval_id__in=ids).values_list("approval_id", flat=True)
    )
    Approval.objects.bulk_create(
        _new_rows(run_pk, run_id, step_index, requests, tools, recorded),
        ignore_conflicts=True,
    )
    schedule_deadlines(run_pk, step_index, ids)
    new = list(
        asked.filter(
            approval_id__in=[i for i in ids if i not in recorded],
            status=ApprovalStatus.PENDING,
        ).select_related("run", "run__owner")
    )
    looping = loop_problem(run_pk, step_index, new)
    if looping is not None:
        # Nothing decides this ask, and nobody is asked: the run stops as it suspends.
        stop_by_system(run_id, looping)
        return
    decided = {a.pk for a in decide_automatically(new)}
    for approval in new:
        if approval.pk not in decided:
            signal = (
                question_asked
                if approval.kind == ApprovalKind.QUESTION
                else approval_requested
            )
            send_on_commit(signal, Approval, approval=approval)


def _new_rows(
    run_pk: int,
    run_id: str,
    step_index: int,
    requests: tuple[ToolApprovalRequest, ...],
    tools: Mapping[str, Tool] | None,
    recorded: set[str],
) -> list[Approval]:
    """The rows of the requests not ``recorded`` yet for this ask."""
    in_doubt = {
        call.tool_call_id: call
        for call in calls_in_doubt(
            run_pk, run_id, [r.tool_call_id for r in requests]
        ).select_related("decision")
    }
    kinds = {r.approval_id: _kind(r, set(in_doubt)) for r in requests}
    return [
        Approval(
            run_id=run_pk,
            approval_id=r.approval_id,
            step_index=step_index,
            kind=kinds[r.approval_id],
            tool_call_id=r.tool_call_id,
            tool_name=r.tool_name,
            input=json.loads(encode_json(r.input)),
            input_digest=input_digest(r.input),
            tool_definition=None
            if tools is None
            else definition(find_tool(tools, r.tool_name, r.agent_path or ())),
            agent_path=list(r.agent_path or ()),
            token=r.token or "",
            question=None
            if kinds[r.approval_id] != ApprovalKind.QUESTION or r.question is None
            else r.question.to_json(),
            edited_input=_edit_that_ran(in_doubt.get(r.tool_call_id)),
        )
        for r in requests
        if r.approval_id not in recorded
    ]


def loop_problem(run_pk: int, step_index: int, asked: Sequence[Approval]) -> str | None:
    """Why this ask would loop (``None``: it would not): the leg that suspends on it
    began by settling the ask just before (the previous boundary), and asks again for a
    call identical to one decided there — same tool, agent and input. Left alone, a
    rule or grant approving each ask, or a model that re-issues the call it just saw
    run, would go round forever; a person asked again would see the same thing."""
    previous = Approval.objects.filter(
        run_id=run_pk, step_index=step_index - 1
    ).exclude(status=ApprovalStatus.PENDING)
    decided = {
        _identity(a): a for a in previous if a.kind != ApprovalKind.OUTCOME_UNKNOWN
    }
    for approval in asked:
        if approval.kind == ApprovalKind.OUTCOME_UNKNOWN:
            continue  # asked by the settle itself (a crash left it in doubt)
        earlier = decided.get(_identity(approval))
        if earlier is not None:
            return (
                f"The agent asked again for {approval.tool_name} with the same input "
                f"right after that call was {earlier.status}: the leg ended where it "
                "began, and would loop."
            )
    return None


def _identity(approval: Approval) -> tuple[str, str, tuple[str, ...]]:
    digest = approval.input_digest or input_digest(approval.input)
    return approval.tool_name, digest, tuple(approval.agent_path or ())


def _edit_that_ran(call: RunCall | None) -> dict[str, Any] | None:
    """The input a person's edit ran a call in doubt with (``None``: the model's)."""
    if call is None or call.decision is None:
        return None
    edited: dict[str, Any] | None = call.decision.edited_input
    return edited


def record_client_calls(
    run_pk: int, step_index: int, tools: Mapping[str, Tool], history: Sequence[Message]
) -> None:
    """One pending row of kind ``client_tool`` per call of a client tool (a tool
    without ``execute``) the suspended run waits on, for this ask: the client sends its
    result as the row's answer, and the next leg gives the call that result (D11)."""
    Approval.objects.bulk_create(
        [
            Approval(
                run_id=run_pk,
                approval_id=call.tool_call_id,
                step_index=step_index,
                kind=ApprovalKind.CLIENT_TOOL,
                tool_call_id=call.tool_call_id,
                tool_name=call.tool_name,
                input=json.loads(encode_json(call.args)),
                input_digest=input_digest(call.args),
                tool_definition=definition(tools.get(call.tool_name)),
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
