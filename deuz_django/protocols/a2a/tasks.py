"""A run as an A2A task: the run's id is the task's and its context's, its status a
task state, its pending approvals the data of an ``INPUT_REQUIRED`` status message,
its text the task's one artifact (read from the stream journal, so a snapshot and the
events that follow it add up to the text exactly once)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from a2a.types import a2a_pb2 as a2a
from google.protobuf import json_format, struct_pb2
from google.protobuf.timestamp_pb2 import Timestamp

from ...approvals.pending import current_pending
from ...core.journal import Record
from ...models import Approval, Run, RunStatus, TaskContext
from ...runs.transcript import run_messages
from .parts import ARTIFACT_ID, TextFold

SUBMITTED = a2a.TaskState.TASK_STATE_SUBMITTED
WORKING = a2a.TaskState.TASK_STATE_WORKING
INPUT_REQUIRED = a2a.TaskState.TASK_STATE_INPUT_REQUIRED
COMPLETED = a2a.TaskState.TASK_STATE_COMPLETED
CANCELED = a2a.TaskState.TASK_STATE_CANCELED
REJECTED = a2a.TaskState.TASK_STATE_REJECTED
# A stream or a blocking send ends at these: the task is over, or waits for someone.
SETTLED = frozenset({INPUT_REQUIRED, COMPLETED, CANCELED, REJECTED})


def context_id(run: Run) -> str:
    """The run's A2A context: its :class:`TaskContext` row's, or the run itself."""
    found = TaskContext.objects.filter(run=run).first()
    return found.context_id if found is not None else run.run_id


def task_state(run: Run) -> a2a.TaskState:
    """Stopped by a person is ``CANCELED``; stopped by the system — a run-wide limit,
    a loop: the app's policy — is ``REJECTED``."""
    match run.status:
        case RunStatus.SUSPENDED:
            return INPUT_REQUIRED
        case RunStatus.COMPLETED:
            return COMPLETED
        case RunStatus.STOPPED:
            by_person = run.stopped_by_id is not None or bool(run.stop_operator)
            return CANCELED if by_person else REJECTED
    return WORKING if run.legs else SUBMITTED


def pending_approval(approval: Approval) -> dict[str, Any]:
    """What a caller needs to answer one pending call: echo ``approvalId`` and
    ``token`` back in a verdict."""
    item: dict[str, Any] = {
        "approvalId": approval.approval_id,
        "kind": approval.kind,
        "toolName": approval.tool_name,
        "input": approval.input,
        "agentPath": approval.agent_path,
        "token": approval.token,
    }
    if approval.question is not None:
        item["question"] = approval.question
    if approval.deadline_at is not None:
        item["deadline"] = approval.deadline_at.isoformat()
    return item


def data_part(value: Any) -> a2a.Part:
    data = struct_pb2.Value()
    json_format.ParseDict(value, data)
    return a2a.Part(data=data, media_type="application/json")


def status_message(run: Run, state: a2a.TaskState) -> a2a.Message | None:
    """For ``INPUT_REQUIRED``: what the run waits for, as text and as data."""
    if state != INPUT_REQUIRED:
        return None
    pending = [pending_approval(a) for a in current_pending(run).order_by("id")]
    names = ", ".join(p["toolName"] for p in pending) or "nothing left"
    return a2a.Message(
        message_id=f"{run.run_id}-input-{run.step_index}",
        task_id=run.run_id,
        context_id=context_id(run),
        role=a2a.Role.ROLE_AGENT,
        parts=[
            a2a.Part(text=f"Waiting for a verdict on: {names}."),
            data_part({"pendingApprovals": pending}),
        ],
    )


def task_status(run: Run) -> a2a.TaskStatus:
    state = task_state(run)
    timestamp = Timestamp()
    timestamp.FromDatetime(run.updated_at)
    status = a2a.TaskStatus(state=state, timestamp=timestamp)
    if (message := status_message(run, state)) is not None:
        status.message.CopyFrom(message)
    return status


def history(run: Run, length: int | None) -> list[a2a.Message]:
    """The conversation's user and assistant turns with text, the last ``length``."""
    context = context_id(run)
    turns = [
        a2a.Message(
            message_id=f"{run.run_id}-{index}",
            task_id=run.run_id,
            context_id=context,
            role=a2a.Role.ROLE_USER if m.role == "user" else a2a.Role.ROLE_AGENT,
            parts=[a2a.Part(text=m.text)],
        )
        for index, m in enumerate(run_messages(run))
        if m.role in ("user", "assistant") and m.text
    ]
    if length is None:
        return turns
    return turns[-length:] if length > 0 else []


def artifact(text: str) -> a2a.Artifact:
    return a2a.Artifact(
        artifact_id=ARTIFACT_ID, name="response", parts=[a2a.Part(text=text)]
    )


def task(
    run: Run,
    records: Sequence[Record],
    *,
    history_length: int | None = None,
    with_artifacts: bool = True,
) -> a2a.Task:
    """The task ``run`` is, its artifact folded from ``records`` (the journal so far)."""
    found = a2a.Task(
        id=run.run_id,
        context_id=context_id(run),
        status=task_status(run),
        history=history(run, history_length),
    )
    fold = TextFold()
    fold.add(records)
    if with_artifacts and fold.text:
        found.artifacts.append(artifact(fold.text))
    found.metadata.update({"agent": run.agent, "stepIndex": run.step_index})
    return found
