"""A message sent to an agent: a new task, or the answer to a task waiting for input.

A message without ``taskId`` starts a run of the agent with its text (``start_run``,
continued in the background like every run). A message with the ``taskId`` of a run
waiting for input answers it: its data part carries the verdicts in the REST API's
shape — ``{"verdicts": [{"approvalId", "approved", "token", "reason", "editedInput",
"answer"}]}`` — checked and recorded by the same code as ``POST runs/{id}/verdicts/``
(:mod:`deuz_django.api.batches`), so permissions, tokens and deadlines hold exactly as
elsewhere."""

from __future__ import annotations

from typing import Any

from a2a.types import a2a_pb2 as a2a
from a2a.utils.errors import InvalidParamsError, UnsupportedOperationError
from google.protobuf import json_format

from ...api.batches import check_batch, read_batch
from ...exceptions import RunNotFound
from ...models import Run
from ...models.visibility import Person
from ...services import enqueue_run, record_checked_verdicts, start_run
from .tasks import INPUT_REQUIRED, task_state


def message_text(message: a2a.Message) -> str:
    return "\n".join(part.text for part in message.parts if part.HasField("text"))


def message_data(message: a2a.Message) -> Any:
    """The first data part's value, or ``None``."""
    for part in message.parts:
        if part.HasField("data"):
            return json_format.MessageToDict(part.data)
    return None


def send(user: Person, agent: str, message: a2a.Message) -> tuple[Run, bool]:
    """Start a task, or answer one: the run it is about, and whether a leg of it was
    queued (an answer that leaves other calls undecided queues none)."""
    if not message.parts:
        raise InvalidParamsError("message.parts: a message needs at least one part.")
    if message.task_id:
        run = Run.objects.visible(user, message.task_id)
        if run.agent != agent:
            raise RunNotFound(message.task_id)  # another agent's: not found here
        continued = answer(user, run, message)
        return Run.objects.get(pk=run.pk), continued
    if message.context_id:
        raise UnsupportedOperationError(
            "message.contextId: a new task in an existing context is not supported "
            "yet; leave contextId out to start a task, or send taskId to answer one."
        )
    text = message_text(message)
    if not text.strip():
        raise InvalidParamsError("message.parts: a new task needs a text part.")
    run = start_run(
        agent=agent, messages=[{"role": "user", "content": text}], owner=user
    )
    enqueue_run(run.run_id)
    return run, True


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
