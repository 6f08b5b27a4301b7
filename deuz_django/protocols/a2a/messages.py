"""A message sent to an agent: a new task, or the answer to a task waiting for input.

A message without ``taskId`` starts a run of the agent with its text (``start_run``,
continued in the background like every run); with a ``contextId`` the caller used
before, the run starts from the history of the context's last task. A message with
the ``taskId`` of a run waiting for input answers it: its data part carries the
verdicts in the REST API's shape — ``{"verdicts": [{"approvalId", "approved",
"token", "reason", "editedInput", "answer"}]}`` — checked and recorded by the same
code as ``POST runs/{id}/verdicts/`` (:mod:`deuz_django.api.batches`), so
permissions, tokens and deadlines hold exactly as elsewhere."""

from __future__ import annotations

from typing import Any

from a2a.types import a2a_pb2 as a2a
from a2a.utils.errors import InvalidParamsError, UnsupportedOperationError
from google.protobuf import json_format

from ...api.batches import check_batch, read_batch
from ...core import Message
from ...exceptions import RunNotFound
from ...models import Run, RunStatus, TaskContext
from ...models.visibility import Person
from ...runs.transcript import run_messages
from ...services import enqueue_run, record_checked_verdicts, start_run
from ...storage.db import bounded_atomic
from .push import create_config
from .tasks import INPUT_REQUIRED, task_state

MAX_CONTEXT_ID = 200  # TaskContext.context_id


def message_text(message: a2a.Message) -> str:
    return "\n".join(part.text for part in message.parts if part.HasField("text"))


def message_data(message: a2a.Message) -> Any:
    """The first data part's value, or ``None``."""
    for part in message.parts:
        if part.HasField("data"):
            return json_format.MessageToDict(part.data)
    return None


def send(
    user: Person,
    agent: str,
    message: a2a.Message,
    push: a2a.TaskPushNotificationConfig | None = None,
) -> tuple[Run, bool]:
    """Start a task, or answer one: the run it is about, and whether a leg of it was
    queued (an answer that leaves other calls undecided queues none). ``push`` is kept
    for the task before it goes on, so no status change misses it."""
    if not message.parts:
        raise InvalidParamsError("message.parts: a message needs at least one part.")
    if message.task_id:
        run = Run.objects.visible(user, message.task_id)
        if run.agent != agent:
            raise RunNotFound(message.task_id)  # another agent's: not found here
        if push is not None:
            create_config(run, push)
        continued = answer(user, run, message)
        return Run.objects.get(pk=run.pk), continued
    text = message_text(message)
    if not text.strip():
        raise InvalidParamsError("message.parts: a new task needs a text part.")
    history = context_history(user, message.context_id)
    with bounded_atomic():
        run = start_run(
            agent=agent,
            messages=[*history, {"role": "user", "content": text}],
            owner=user,
        )
        TaskContext.objects.create(run=run, context_id=message.context_id or run.run_id)
        if push is not None:
            create_config(run, push)
    enqueue_run(run.run_id)
    return run, True


def context_history(user: Person, context: str) -> list[Message]:
    """The conversation so far in the caller's ``context``: the history of its last
    task, which must be completed (a context unknown to the caller is a new one)."""
    if not context:
        return []
    if len(context) > MAX_CONTEXT_ID:
        raise InvalidParamsError(
            f"message.contextId: at most {MAX_CONTEXT_ID} characters."
        )
    last = (
        Run.objects.for_user(user)
        .filter(task_context__context_id=context)
        .order_by("-pk")
        .first()
    )
    if last is None:
        return []
    if last.status != RunStatus.COMPLETED:
        raise UnsupportedOperationError(
            f"message.contextId: the context's last task ({last.run_id}) is not "
            "completed; answer or cancel it before starting another."
        )
    return [m for m in run_messages(last) if m.role != "system"]


def answer(user: Person, run: Run, message: a2a.Message) -> bool:
    if task_state(run) != INPUT_REQUIRED:
        raise UnsupportedOperationError(
            f"Task {run.run_id} is not waiting for input: only a task in "
            "TASK_STATE_INPUT_REQUIRED takes a message."
        )
    data = message_data(message)
    if not isinstance(data, dict) or "verdicts" not in data:
        raise InvalidParamsError(
            "message.parts: answer with a data part {'verdicts': [{'approvalId', "
            "'approved', 'token', ...}]} (see the status message's pendingApprovals)."
        )
    batch = read_batch(data)
    checked = check_batch(user, run, batch["verdicts"])
    recorded = record_checked_verdicts(user, checked, resume=batch["resume"])
    return recorded.continued is not None
