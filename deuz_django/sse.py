"""``GET …/runs/<run_id>/stream``: a run's journal as the Deuz UI wire v2 over SSE.

The original TypeScript client (``connectDeuzStream``) can follow our runs: ``id: <seq>``
lines, ``Last-Event-ID`` replay, the live tail, ``[DONE]`` at the last leg's end, and crash
continuation — when the stream is silent, the run is open and its lease lapsed (its process
died), the run is re-driven here, once (the lease decides who).
"""

from __future__ import annotations

import time
from typing import Any

from asgiref.sync import sync_to_async
from django.apps import apps
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse

from . import live
from .core import sse
from .journal import get_journal
from .models import Run
from .permissions import can_view_run
from .services import recoverable_runs

LIVE_PROBE_SECONDS = 1.5
IDLE_CLOSE_SECONDS = (
    30.0  # a silent stream closes without [DONE]; the client reconnects
)
POLL_SECONDS = 0.15


async def _user(request: HttpRequest) -> Any:
    """The session user, or the owner of an ``Authorization: Token …`` header."""
    user = await request.auser()
    if user.is_authenticated:
        return user
    header = request.headers.get("Authorization", "")
    if header.startswith("Token ") and apps.is_installed("rest_framework.authtoken"):
        from rest_framework.authtoken.models import Token

        token = (
            await Token.objects.select_related("user")
            .filter(key=header[6:].strip())
            .afirst()
        )
        if token is not None and token.user.is_active:
            return token.user
    return user


async def run_stream(request: HttpRequest, run_id: str) -> HttpResponse:
    if request.method != "GET":
        return JsonResponse({"detail": "Method not allowed; use GET."}, status=405)
    user = await _user(request)
    if not user.is_authenticated:
        return JsonResponse(
            {"detail": "Authentication credentials were not provided."}, status=401
        )
    run = (
        await Run.objects.select_related("owner")
        .filter(run_id=run_id, parent__isnull=True)
        .afirst()
    )
    if run is None or not await sync_to_async(can_view_run)(user, run):
        return JsonResponse({"detail": "Not found."}, status=404)
    cursor = sse.parse_cursor(
        request.headers.get("Last-Event-ID", request.GET.get("lastEventId"))
    )
    version = sse.negotiate(request.headers.get("x-deuz-stream"))
    checked_at = 0.0

    async def on_silence(idle: float) -> bool:
        nonlocal checked_at
        if idle >= IDLE_CLOSE_SECONDS:
            return False
        now = time.monotonic()
        if idle >= LIVE_PROBE_SECONDS and now - checked_at >= 1.0:
            checked_at = now
            if await sync_to_async(recoverable_runs)(0, run_id=run_id):
                live.drive(run_id)
        return True

    async def wait(seconds: float) -> None:
        await live.feed.wait(run_id, seconds)

    body = sse.follow_journal(
        get_journal(),
        run_id,
        cursor,
        on_silence=on_silence,
        poll_interval=POLL_SECONDS,
        version=version,
        sleep=wait,
    )
    return StreamingHttpResponse(body, headers=sse.headers(version))
