"""``GET …/runs/<run_id>/stream``: a run's journal as the Deuz UI wire v2 over SSE.

The original TypeScript client (``connectDeuzStream``) can follow our runs: ``id: <seq>``
lines, ``Last-Event-ID`` replay, the live tail, ``[DONE]`` at the last leg's end, and crash
continuation (the reader, :mod:`deuz_django.streaming.following`, continues a run whose process
died). Requests authenticate like every API request, through the API's authentication
classes (:mod:`deuz_django.api.authentication`), not the project's DRF default.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from rest_framework.exceptions import (
    APIException,
    AuthenticationFailed,
    MethodNotAllowed,
    NotAuthenticated,
    NotFound,
)
from rest_framework.request import Request

from ..api.authentication import authentication_classes
from ..api.exceptions import InvalidRequest, error_body
from ..core import sse
from ..core.exceptions import InvalidInputError
from ..core.wire import WireVersion
from ..exceptions import RunNotFound
from ..models import Run
from ..permissions import is_signed_in
from ..storage.stream_journal import get_journal
from .following import Unavailable, follow

IDLE_CLOSE_SECONDS = (
    30.0  # a silent stream closes without [DONE]; the client reconnects
)
POLL_SECONDS = 0.15


def authenticate(request: HttpRequest) -> Any:
    """The user the API's own authentication classes find (anonymous if none does):
    the stream is part of the API, not of the project's DRF defaults."""
    drf_request = Request(
        request, authenticators=[auth() for auth in authentication_classes()]
    )
    try:
        return drf_request.user
    except AuthenticationFailed:
        return None


def refused(error: APIException) -> JsonResponse:
    """A refusal in the API's one error shape and status."""
    return JsonResponse(error_body(error), status=error.status_code)


async def run_stream(request: HttpRequest, run_id: str) -> HttpResponseBase:
    if request.method != "GET":
        return refused(MethodNotAllowed(request.method or ""))
    user = await sync_to_async(authenticate)(request)
    if not is_signed_in(user):
        return refused(NotAuthenticated())
    try:
        await Run.objects.avisible(user, run_id)
    except RunNotFound:
        return refused(NotFound())
    source = "Last-Event-ID" if "Last-Event-ID" in request.headers else "lastEventId"
    try:
        cursor = sse.parse_cursor(
            request.headers.get("Last-Event-ID", request.GET.get("lastEventId"))
        )
    except InvalidInputError as error:
        message = error.problem.message
        return refused(
            InvalidRequest(
                f"{source}: {message}.", errors=[{"field": source, "message": message}]
            )
        )
    version = sse.negotiate(request.headers.get("x-deuz-stream"))
    return StreamingHttpResponse(
        _body(run_id, cursor, version), headers=sse.headers(version)
    )


async def _body(run_id: str, cursor: int, version: WireVersion) -> AsyncIterator[str]:
    """Replay after ``cursor`` and tail until the last leg's end (R11.10)."""
    journal = get_journal()
    try:
        last = await journal.last_seq(run_id)
        tail = await journal.read(run_id, last - 1, 1) if last is not None else []
    except Exception as error:
        yield sse.error_frame(str(error) or "resume failed")
        return
    done = sse.caught_up(cursor, tail[-1] if tail else None)
    if done is not None:
        yield done
        return
    encoder = sse.Encoder(version)
    heard_at = time.monotonic()
    async for update in follow(run_id, cursor, poll_seconds=POLL_SECONDS):
        if isinstance(
            update, Unavailable
        ):  # a broken journal says so, then reads as a drop
            yield sse.error_frame(str(update.error) or "resume failed")
            return
        if update:
            heard_at = time.monotonic()
            if text := encoder.encode(update):
                yield text
        elif encoder.pending_done is not None:
            yield encoder.end()
            return
        elif time.monotonic() - heard_at >= IDLE_CLOSE_SECONDS:
            return
