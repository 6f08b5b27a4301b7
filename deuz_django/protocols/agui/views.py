"""``POST …/agents/<name>/ag-ui/``: an agent as an AG-UI 1.0 endpoint.

The body is a ``RunAgentInput``; the answer is its run as AG-UI events over SSE
(:mod:`.stream`). The thread is our run (``threadId`` is its ``run_id``), each AG-UI
run one stretch of it, from a request to the next pause or its end:

- a ``threadId`` nobody used yet starts a run of the agent, owned by the caller, with
  the input's messages;
- a ``resume`` answers the interrupts the thread waits on (:mod:`.interrupts`) through
  the one verdict service, and the run continues; the same resume sent again records
  nothing and replays what followed it;
- a ``Last-Event-ID`` header rejoins: nothing is recorded, and the events after that
  id follow (``id:`` is the thread's journal cursor).

Requests authenticate as every API request does; another user's thread is not found.
"""

from __future__ import annotations

from typing import Any

import pydantic
from ag_ui.core import ResumeEntry, RunAgentInput, RunErrorEvent
from asgiref.sync import async_to_sync, sync_to_async
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt
from rest_framework.exceptions import (
    APIException,
    MethodNotAllowed,
    NotAuthenticated,
    NotFound,
)

from ...api.exceptions import Conflict, InvalidRequest, too_large, translate
from ...core import sse as deuz_sse
from ...core.exceptions import DeuzError, InvalidInputError
from ...exceptions import NotPermitted, RunExists, RunNotFound
from ...models import Run
from ...models.runs import RUN_ID_PATTERN
from ...permissions import is_signed_in
from ...registry import load_agent
from ...services import current_pending, enqueue_run, record_verdicts, start_run
from ...storage.stream_journal import get_journal
from ...streaming.sse import authenticate, refused
from .interrupts import NAMESPACE, read_resume
from .messages import input_messages
from .stream import refused_run, run_events

HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


EXPIRED = (
    "An interrupt answered has expired: it can no longer be resolved; cancel it to "
    "continue the thread."
)


@csrf_exempt  # as every API view: the session authentication checks CSRF itself
async def agent_endpoint(request: HttpRequest, name: str) -> HttpResponseBase:
    if request.method != "POST":
        not_allowed = refused(MethodNotAllowed(request.method or ""))
        not_allowed["Allow"] = "POST"
        return not_allowed
    try:
        user = await sync_to_async(authenticate)(request)
    except APIException as error:  # a session request without its CSRF token
        return refused(error)
    if not is_signed_in(user):
        return refused(NotAuthenticated())
    try:
        run_input = _read_input(request)
        begun = await sync_to_async(_begin)(user, name, run_input, request)
    except (APIException, DeuzError, NotPermitted) as error:
        return refused(_api_error(error))
    thread_id, run_id = run_input.thread_id, run_input.run_id
    if isinstance(begun, RunErrorEvent):
        body = refused_run(thread_id, run_id, begun)
    else:
        body = run_events(thread_id, run_id, begun)
    return StreamingHttpResponse(
        body, content_type="text/event-stream", headers=HEADERS
    )


def _api_error(error: Exception) -> APIException:
    translated = translate(error)
    if isinstance(translated, APIException):
        return translated
    return InvalidRequest(str(error))


def _read_input(request: HttpRequest) -> RunAgentInput:
    try:
        run_input = RunAgentInput.model_validate_json(request.body)
    except RequestDataTooBig:
        raise too_large() from None
    except pydantic.ValidationError as error:
        errors = [
            {
                "field": ".".join(str(p) for p in problem["loc"]) or "body",
                "message": problem["msg"],
            }
            for problem in error.errors(include_url=False)
        ]
        first = errors[0]
        raise InvalidRequest(
            f"Not a RunAgentInput: {first['field']}: {first['message']}.", errors=errors
        ) from None
    if not RUN_ID_PATTERN.fullmatch(run_input.thread_id):
        problem = "letters, digits, '-' and '_', at most 100"
        raise InvalidRequest(
            f"threadId: {problem}.", errors=[{"field": "threadId", "message": problem}]
        )
    return run_input


def _begin(
    user: Any, agent: str, run_input: RunAgentInput, request: HttpRequest
) -> int | RunErrorEvent:
    """Record what the request asks; the cursor its events follow, or the error
    its run fails with at once (an expired interrupt resolved)."""
    try:
        load_agent(agent)
    except LookupError:
        raise NotFound(f"No agent '{agent}'.") from None
    thread_id = run_input.thread_id
    if not Run.objects.roots().filter(run_id=thread_id).exists():
        if run_input.resume or "Last-Event-ID" in request.headers:
            raise NotFound(f"No thread '{thread_id}'.")
        return _start(user, agent, run_input)
    try:
        run = Run.objects.visible(user, thread_id)
    except RunNotFound:
        raise NotFound(f"No thread '{thread_id}'.") from None
    if run.agent != agent:
        raise NotFound(f"No thread '{thread_id}' of agent '{agent}'.")
    if "Last-Event-ID" in request.headers:
        return _cursor(request.headers["Last-Event-ID"])
    if run_input.resume:
        return _resume(user, run, run_input.resume)
    if current_pending(run).exists():
        raise Conflict(
            "The thread waits on interrupts: answer every one with resume first.",
            code="interrupts_pending",
        )
    raise Conflict(
        "The thread has no open interrupt to resume, and new input on an existing "
        "thread is not supported yet: start a new thread.",
        code="thread_not_continuable",
    )


def _start(user: Any, agent: str, run_input: RunAgentInput) -> int:
    messages = input_messages(run_input.messages)
    if not any(m["role"] == "user" for m in messages):
        problem = "a new thread needs a user message with text"
        raise InvalidRequest(
            f"messages: {problem}.", errors=[{"field": "messages", "message": problem}]
        )
    try:
        start_run(
            agent=agent, messages=messages, owner=user, run_id=run_input.thread_id
        )
    except RunExists:  # started by someone else meanwhile
        raise NotFound(f"No thread '{run_input.thread_id}'.") from None
    enqueue_run(run_input.thread_id)
    return -1


def _resume(user: Any, run: Run, entries: list[ResumeEntry]) -> int | RunErrorEvent:
    resume = read_resume(run, entries)
    if resume.replay:
        return _replayed_from(entries)
    if resume.expired:
        return RunErrorEvent(message=EXPIRED, code="interrupt_expired")
    cursor = async_to_sync(get_journal().last_seq)(run.run_id)
    record_verdicts(user, resume.verdicts)
    return -1 if cursor is None else cursor


def _replayed_from(entries: list[ResumeEntry]) -> int:
    """Where the same resume, sent again, replays from: the leg end its interrupts
    were sent at (``metadata.deuz.cursor``, echoed from the interrupts)."""
    cursors = set()
    for entry in entries:
        envelope = (entry.metadata or {}).get(NAMESPACE)
        cursors.add(envelope.get("cursor") if isinstance(envelope, dict) else None)
    cursor = cursors.pop() if len(cursors) == 1 else None
    if not isinstance(cursor, int) or isinstance(cursor, bool):
        raise Conflict(
            "These interrupts were answered already; to replay what followed, echo "
            "their metadata (metadata.deuz.cursor) in the resume.",
            code="approval_already_decided",
        )
    return cursor


def _cursor(value: str) -> int:
    try:
        return deuz_sse.parse_cursor(value)
    except InvalidInputError as error:
        message = error.problem.message
        raise InvalidRequest(
            f"Last-Event-ID: {message}.",
            errors=[{"field": "Last-Event-ID", "message": message}],
        ) from None
