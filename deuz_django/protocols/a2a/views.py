"""The HTTP+JSON binding's endpoints, one agent at a time (``a2a/<agent>/``).

Thin async views: they authenticate with the API's own authentication classes, read
and write the SDK's protobuf types with protobuf's JSON mapping, and leave the work to
:mod:`.messages` (sending), :mod:`.tasks` (a run as a task) and :mod:`.following`
(events until the task settles). Every task is looked up through
``Run.objects.visible``: another user's task is ``TASK_NOT_FOUND``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import wraps
from typing import Any

from a2a.types import a2a_pb2 as a2a
from a2a.utils.errors import (
    InvalidRequestError,
    MethodNotFoundError,
    UnsupportedOperationError,
)
from asgiref.sync import sync_to_async
from django.http import HttpRequest, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from google.protobuf import json_format
from google.protobuf.message import Message as Proto
from rest_framework.exceptions import APIException
from rest_framework.request import Request

from ...api.authentication import authentication_classes
from ...exceptions import RunNotFound
from ...models import Run
from ...models.visibility import Person
from ...permissions import is_signed_in
from ...registry import agent_names
from ...services import stop_run
from . import following, listing, push
from .card import agent_card
from .errors import NotSignedIn, error_response
from .messages import send

A2A_JSON = "application/a2a+json"
View = Callable[..., Awaitable[HttpResponseBase]]
# Django's stubs type a view as sync; an async view is as valid a route.
Route = Callable[..., Any]


def _user(request: HttpRequest) -> Person | None:
    drf_request = Request(
        request, authenticators=[auth() for auth in authentication_classes()]
    )
    try:
        user = drf_request.user
    except APIException:  # bad credentials, or a session without its CSRF token
        return None
    return user if is_signed_in(user) else None


def endpoint(*methods: str, signed_in: bool = True) -> Callable[[View], Route]:
    """A view of the binding: its methods, its agent known, its caller signed in
    (passed to the view after the request), every refusal in A2A's error shape."""

    def decorate(view: View) -> Route:
        @csrf_exempt
        @wraps(view)
        async def wrapped(
            request: HttpRequest, agent: str, **kwargs: Any
        ) -> HttpResponseBase:
            try:
                if request.method not in methods:
                    raise MethodNotFoundError(f"{request.method} is not allowed here.")
                if agent not in agent_names():
                    raise MethodNotFoundError(f"No agent named {agent!r}.")
                user = await sync_to_async(_user)(request) if signed_in else None
                if signed_in and user is None:
                    raise NotSignedIn()
                return await view(request, user, agent, **kwargs)
            except Exception as error:  # every refusal answers in the A2A shape
                return error_response(error)

        return wrapped

    return decorate


def proto_response(message: Proto) -> JsonResponse:
    return JsonResponse(json_format.MessageToDict(message), content_type=A2A_JSON)


def read_body[T: Proto](request: HttpRequest, message: T) -> T:
    try:
        json_format.Parse(request.body or b"{}", message)
    except json_format.ParseError as error:
        raise InvalidRequestError(f"The body is not a valid request: {error}") from None
    return message


@endpoint("GET", signed_in=False)
async def card(request: HttpRequest, user: Any, agent: str) -> HttpResponseBase:
    # Named by route, so a card also served at the site's root names the interface.
    match = request.resolver_match
    namespace = (match.namespace if match else "") or "deuz"
    tasks_path = reverse(f"{namespace}:a2a-tasks", kwargs={"agent": agent})
    base = tasks_path.removesuffix("tasks")
    found = await sync_to_async(agent_card)(request, agent, base)
    return proto_response(found)


async def _sent(
    request: HttpRequest, user: Any, agent: str
) -> tuple[a2a.SendMessageRequest, following.Snapshot, bool]:
    """Send the body's message: the request, the task as it was before an answer
    (after a new task's start), and whether a leg was queued."""
    body = read_body(request, a2a.SendMessageRequest())
    answered = body.message.task_id
    before = await following.snapshot(answered) if answered else None
    config = body.configuration
    push_config = (
        config.task_push_notification_config
        if config.HasField("task_push_notification_config")
        else None
    )
    run, continued = await sync_to_async(send)(user, agent, body.message, push_config)
    return body, before or await following.snapshot(run.run_id), continued


@endpoint("POST")
async def message_send(request: HttpRequest, user: Any, agent: str) -> HttpResponseBase:
    """Blocks until the task settles, unless ``configuration.returnImmediately``."""
    body, start, continued = await _sent(request, user, agent)
    if continued and not body.configuration.return_immediately:
        await following.settle(
            start.task.id, start.last, wait_for_leg=bool(body.message.task_id)
        )
    config = body.configuration
    length = config.history_length if config.HasField("history_length") else None
    after = await following.snapshot(start.task.id, history_length=length)
    return proto_response(a2a.SendMessageResponse(task=after.task))


def sse(events: AsyncIterator[a2a.StreamResponse]) -> StreamingHttpResponse:
    async def frames() -> AsyncIterator[str]:
        async for event in events:
            yield f"data: {json.dumps(json_format.MessageToDict(event))}\n\n"

    return StreamingHttpResponse(
        frames(),
        headers={"content-type": "text/event-stream", "cache-control": "no-cache"},
    )


async def _stream(
    start: following.Snapshot, *, wait_for_leg: bool
) -> AsyncIterator[a2a.StreamResponse]:
    yield a2a.StreamResponse(task=start.task)
    if following.is_terminal(start.task):
        return
    async for event in following.events(start, wait_for_leg=wait_for_leg):
        yield event


@endpoint("POST")
async def message_stream(
    request: HttpRequest, user: Any, agent: str
) -> HttpResponseBase:
    """The task (as it was when an answer came), then its events until it settles."""
    body, start, continued = await _sent(request, user, agent)
    return sse(_stream(start, wait_for_leg=continued and bool(body.message.task_id)))


async def _visible(user: Any, agent: str, task_id: str) -> Run:
    run = await Run.objects.avisible(user, task_id)
    if run.agent != agent:
        raise RunNotFound(task_id)
    return run


@endpoint("GET")
async def get_task(
    request: HttpRequest, user: Any, agent: str, task_id: str
) -> HttpResponseBase:
    await _visible(user, agent, task_id)
    length = request.GET.get("historyLength")
    found = await following.snapshot(
        task_id, history_length=int(length) if length and length.isdigit() else None
    )
    return proto_response(found.task)


@endpoint("GET")
async def list_tasks(request: HttpRequest, user: Any, agent: str) -> HttpResponseBase:
    query = listing.read_query(request.GET)
    return proto_response(await sync_to_async(listing.tasks)(user, agent, query))


@endpoint("POST")
async def cancel_task(
    request: HttpRequest, user: Any, agent: str, task_id: str
) -> HttpResponseBase:
    run = await _visible(user, agent, task_id)
    await sync_to_async(stop_run)(run.run_id, user=user, reason="Canceled through A2A.")
    found = await following.snapshot(task_id)
    return proto_response(found.task)


@endpoint("POST")
async def subscribe(
    request: HttpRequest, user: Any, agent: str, task_id: str
) -> HttpResponseBase:
    """The task now, then its events from there: a reconnect misses and repeats
    nothing, as the snapshot and the events share one journal cursor."""
    await _visible(user, agent, task_id)
    start = await following.snapshot(task_id)
    if following.is_terminal(start.task):
        raise UnsupportedOperationError(
            f"Task {task_id} is over: nothing to subscribe to."
        )
    waiting = start.task.status.state == a2a.TaskState.TASK_STATE_INPUT_REQUIRED
    return sse(_stream(start, wait_for_leg=waiting))


@endpoint("GET", "POST", "DELETE")
async def push_configs(
    request: HttpRequest,
    user: Any,
    agent: str,
    task_id: str,
    config_id: str | None = None,
) -> HttpResponseBase:
    """``tasks/{id}/pushNotificationConfigs[/{configId}]``: create, list, get, delete."""
    run = await _visible(user, agent, task_id)
    if request.method == "POST" and config_id is None:
        wanted = read_body(request, a2a.TaskPushNotificationConfig())
        return proto_response(await sync_to_async(push.create_config)(run, wanted))
    if request.method == "GET":
        found = await sync_to_async(push.configs)(run, config_id)
        if config_id is None:
            listed = a2a.ListTaskPushNotificationConfigsResponse(configs=found)
            return proto_response(listed)
        return proto_response(found[0])
    if request.method == "DELETE" and config_id is not None:
        await sync_to_async(push.delete_config)(run, config_id)
        return JsonResponse({}, content_type=A2A_JSON)
    raise MethodNotFoundError(f"{request.method} is not allowed here.")
