"""The WebSocket consumer: start runs, follow them through the journal, answer approvals.

Client → server (JSON text frames)::

    {"type": "start", "agent": "assistant", "text": "Hi"}          # or "messages": [...]
                                                    # optional "runId" (client-minted), "title"
    {"type": "subscribe", "runId": "…", "lastSeq": 41}             # replay after 41, then tail
    {"type": "unsubscribe", "runId": "…"}
    {"type": "approval-response", "runId": "…", "approvalId": "…", "approved": true,
     "reason": "…", "token": "v1.…"}
    {"type": "cancel", "runId": "…"}                               # abort the run's leg

Server → client::

    {"runId": "…", "seq": 7, "part": {"type": "text-delta", "text": "Hel"}}
    {"type": "done", "runId": "…", "seq": 12}                      # a leg ended
    {"type": "started" | "subscribed", "runId": "…", "status": "running"}
    {"type": "approval-recorded", "runId": "…", "approvalId": "…", "status": "approved",
     "resuming": true}
    {"type": "error", "code": "…", "message": "…"}                 # the socket stays open

A run never depends on the socket: it is driven by a task holding the run's lease and keeps
journaling when the client leaves; disconnecting never cancels (``cancel`` does).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

from asgiref.sync import sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from . import live
from .core.journal import Record, is_done
from .exceptions import (
    ApprovalAlreadyDecided,
    InvalidVerdict,
    NotPermitted,
    UnknownAgent,
)
from .journal import get_journal
from .models import Approval, Run
from .permissions import can_resume_run, can_view_run
from .services import adecide_approval, astart_run, recoverable_runs

MAX_FRAME_BYTES = 256 * 1024
BURST = 40  # frames a client may send at once
REFILL_PER_SECOND = 10.0
POLL_SECONDS = 1.0  # re-read the journal on silence: covers a dropped nudge
CONTINUE_CHECK_SECONDS = 1.0
SEND_BATCH = 200
SEND_PAGE = 1000  # records read from the journal at a time
RUN_ID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
CLOSE_UNAUTHENTICATED = 4401


class FrameError(Exception):
    """A client frame that cannot be acted on; answered with an ``error`` frame."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _field(
    frame: dict[str, Any],
    name: str,
    kind: type | tuple[type, ...],
    *,
    required: bool = True,
) -> Any:
    value = frame.get(name)
    if value is None:
        if required:
            raise FrameError("missing_field", f"'{name}' is required")
        return None
    if isinstance(value, bool) and kind is not bool:
        raise FrameError("invalid_field", f"'{name}' must be {_kind_name(kind)}")
    if not isinstance(value, kind):
        raise FrameError("invalid_field", f"'{name}' must be {_kind_name(kind)}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {str: "a string", bool: "a boolean", int: "an integer", list: "a list"}
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _run_id(frame: dict[str, Any]) -> str:
    run_id = _field(frame, "runId", str)
    if not RUN_ID.match(run_id):
        raise FrameError(
            "invalid_field", "'runId' must be 1–64 letters, digits, '.', '_' or '-'"
        )
    return str(run_id)


def part_frame(run_id_json: str, seq: int, data: str) -> str:
    """The frame text, built around the journaled part's JSON (never re-encoded)."""
    return f'{{"runId":{run_id_json},"seq":{seq},"part":{data}}}'


class RunConsumer(AsyncWebsocketConsumer):
    """One browser tab: any number of followed runs, each tailed by its own task."""

    async def connect(self) -> None:
        self.user = self.scope.get("user")
        self.tails: dict[str, asyncio.Task[None]] = {}
        self.tokens = float(BURST)
        self.refilled_at = time.monotonic()
        self.rate_warned_at = 0.0
        await self.accept()
        if self.user is None or not self.user.is_authenticated:
            await self.close(
                code=CLOSE_UNAUTHENTICATED, reason="authentication required"
            )

    async def disconnect(self, code: int) -> None:
        for run_id, task in list(self.tails.items()):
            task.cancel()
            await self.channel_layer.group_discard(
                live.run_group(run_id), self.channel_name
            )
        await asyncio.gather(*self.tails.values(), return_exceptions=True)
        self.tails.clear()

    # -- receiving ------------------------------------------------------------------------

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None
    ) -> None:
        frame_type = None
        try:
            verdict = self._throttle()
            if verdict == "warn":
                raise FrameError(
                    "rate_limited", "too many frames; slow down (frames were dropped)"
                )
            if verdict == "drop":
                return
            if text_data is None:
                raise FrameError("bad_frame", "frames must be JSON text, not binary")
            if len(text_data.encode()) > MAX_FRAME_BYTES:
                raise FrameError(
                    "too_large", f"frames are limited to {MAX_FRAME_BYTES} bytes"
                )
            try:
                frame = json.loads(text_data)
            except ValueError as error:
                raise FrameError("bad_json", f"not valid JSON: {error}") from None
            if not isinstance(frame, dict):
                raise FrameError("bad_frame", "a frame must be a JSON object")
            frame_type = frame.get("type")
            handler = (
                self.HANDLERS.get(frame_type) if isinstance(frame_type, str) else None
            )
            if handler is None:
                known = ", ".join(sorted(self.HANDLERS))
                raise FrameError(
                    "unknown_type",
                    f"unknown frame type {frame_type!r} (known: {known})",
                )
            await handler(self, frame)
        except FrameError as error:
            await self._error(error.code, str(error), frame_type)

    def _throttle(self) -> str | None:
        """A token bucket: a flood is throttled and told so once a second, never crashed.

        Returns ``None`` to accept the frame, ``"drop"`` or ``"warn"`` (drop and say so).
        """
        now = time.monotonic()
        self.tokens = min(
            BURST, self.tokens + (now - self.refilled_at) * REFILL_PER_SECOND
        )
        self.refilled_at = now
        if self.tokens >= 1:
            self.tokens -= 1
            return None
        if now - self.rate_warned_at >= 1.0:
            self.rate_warned_at = now
            return "warn"
        return "drop"

    async def _error(self, code: str, message: str, frame_type: object = None) -> None:
        payload: dict[str, Any] = {"type": "error", "code": code, "message": message}
        if isinstance(frame_type, str):
            payload["frame"] = frame_type
        await self.send(text_data=json.dumps(payload))

    # -- frame handlers ---------------------------------------------------------------------

    async def handle_start(self, frame: dict[str, Any]) -> None:
        agent = _field(frame, "agent", str)
        text = _field(frame, "text", str, required=False)
        messages = _field(frame, "messages", list, required=False)
        if (text is None) == (messages is None):
            raise FrameError(
                "missing_field", "give exactly one of 'text' or 'messages'"
            )
        run_id = _run_id(frame) if frame.get("runId") is not None else None
        title = _field(frame, "title", str, required=False) or ""
        try:
            run = await astart_run(
                agent=agent,
                messages=messages
                if messages is not None
                else [{"role": "user", "content": text}],
                owner=self.user,
                run_id=run_id,
                title=title,
            )
        except UnknownAgent as error:
            raise FrameError("unknown_agent", str(error)) from None
        except ValueError as error:  # invalid messages, a run id already taken
            raise FrameError("invalid_field", str(error)) from None
        await self._follow(run.run_id, -1)
        await self.send(
            text_data=json.dumps(
                {"type": "started", "runId": run.run_id, "status": run.status}
            )
        )
        live.drive(run.run_id)

    async def handle_subscribe(self, frame: dict[str, Any]) -> None:
        run_id = _run_id(frame)
        last_seq = _field(frame, "lastSeq", int, required=False)
        cursor = -1 if last_seq is None else max(-1, last_seq)
        # One trip to the database thread: who may see it, and the first page to replay.
        in_memory = live.feed.recent(run_id, cursor) is not None
        run, first_page = await sync_to_async(self._open_sync)(
            run_id, cursor, not in_memory
        )
        await self._follow(run_id, cursor, first_page)
        await self.send(
            text_data=json.dumps(
                {"type": "subscribed", "runId": run_id, "status": run.status}
            )
        )

    async def handle_unsubscribe(self, frame: dict[str, Any]) -> None:
        run_id = _run_id(frame)
        task = self.tails.pop(run_id, None)
        if task is not None:
            task.cancel()
            await self.channel_layer.group_discard(
                live.run_group(run_id), self.channel_name
            )

    async def handle_approval_response(self, frame: dict[str, Any]) -> None:
        run_id = _run_id(frame)
        approval_id = _field(frame, "approvalId", str)
        approved = _field(frame, "approved", bool)
        reason = _field(frame, "reason", str, required=False) or ""
        token = _field(frame, "token", str, required=False)
        run = await self._visible_run(run_id)
        approval = (
            await Approval.objects.select_related("run")
            .filter(run=run, approval_id=approval_id)
            .afirst()
        )
        if approval is None:
            raise FrameError(
                "not_found", f"run {run_id} has no approval {approval_id!r}"
            )
        try:
            decision = await adecide_approval(
                approval,
                user=self.user,
                approved=approved,
                reason=reason,
                token=token or "",
            )
        except NotPermitted as error:
            raise FrameError("forbidden", str(error)) from None
        except ApprovalAlreadyDecided as error:
            raise FrameError("already_decided", str(error)) from None
        except InvalidVerdict as error:
            raise FrameError("invalid_verdict", str(error)) from None
        await self.send(
            text_data=json.dumps(
                {
                    "type": "approval-recorded",
                    "runId": run_id,
                    "approvalId": approval_id,
                    "status": decision.approval.status,
                    "resuming": decision.run_ready,
                }
            )
        )
        if decision.run_ready:
            live.drive(run_id)

    async def handle_cancel(self, frame: dict[str, Any]) -> None:
        run_id = _run_id(frame)
        run = await self._visible_run(run_id)
        if not await sync_to_async(can_resume_run)(self.user, run):
            raise FrameError("forbidden", "you may not cancel this run")
        await live.cancel(run_id)

    HANDLERS = {
        "start": handle_start,
        "subscribe": handle_subscribe,
        "unsubscribe": handle_unsubscribe,
        "approval-response": handle_approval_response,
        "cancel": handle_cancel,
    }

    async def _visible_run(self, run_id: str) -> Run:
        return await sync_to_async(self._visible_run_sync)(run_id)

    def _visible_run_sync(self, run_id: str) -> Run:
        run = (
            Run.objects.select_related("owner")
            .filter(run_id=run_id, parent__isnull=True)
            .first()
        )
        if run is None or not can_view_run(self.user, run):
            raise FrameError(
                "not_found", f"no run {run_id!r}"
            )  # another user's run too
        return run

    def _open_sync(
        self, run_id: str, cursor: int, read_page: bool
    ) -> tuple[Run, list[Record] | None]:
        run = self._visible_run_sync(run_id)
        if not read_page:
            return run, None  # this process journals it: the tail reads memory
        journal = get_journal()
        read_sync = getattr(journal, "read_sync", None)
        return run, read_sync(
            run_id, cursor, SEND_PAGE
        ) if read_sync is not None else None

    # -- following a run --------------------------------------------------------------------

    async def _follow(
        self, run_id: str, cursor: int, first_page: list[Record] | None = None
    ) -> None:
        previous = self.tails.pop(run_id, None)
        if previous is not None:
            previous.cancel()
        await self.channel_layer.group_add(live.run_group(run_id), self.channel_name)
        self.tails[run_id] = asyncio.ensure_future(
            self._tail(run_id, cursor, first_page)
        )

    async def run_nudge(self, event: dict[str, Any]) -> None:
        """A leg in some process journaled new parts (``deuz.run.<id>`` group message)."""
        live.feed.wake(event["runId"])

    async def _tail(
        self, run_id: str, cursor: int, first_page: list[Record] | None = None
    ) -> None:
        """Send what the journal holds after ``cursor``, then whatever follows, forever."""
        run_id_json = json.dumps(run_id)
        quiet_since = checked_at = time.monotonic()
        while True:
            if first_page is not None:
                records, first_page = first_page, None
            else:
                records = await self._read(run_id, cursor)
            if records:
                for index, (seq, data) in enumerate(records):
                    if is_done(data):
                        await self.send(
                            text_data=f'{{"type":"done","runId":{run_id_json},"seq":{seq}}}'
                        )
                    else:
                        await self.send(text_data=part_frame(run_id_json, seq, data))
                    cursor = seq
                    if index % SEND_BATCH == SEND_BATCH - 1:
                        await asyncio.sleep(0)  # let daphne flush what was queued
                quiet_since = time.monotonic()
                continue
            now = time.monotonic()
            if min(now - quiet_since, now - checked_at) >= CONTINUE_CHECK_SECONDS:
                checked_at = now
                await self._continue_if_abandoned(run_id)
            await live.feed.wait(run_id, POLL_SECONDS)

    async def _read(self, run_id: str, cursor: int) -> list[Record]:
        """The records after ``cursor``: from memory when this process journaled them."""
        records = live.feed.recent(run_id, cursor)
        if records is not None:
            return records
        try:
            records = await get_journal().read(run_id, cursor, SEND_PAGE)
        except Exception as error:  # a failing journal says so; the tail retries
            await self._error(
                "journal_unavailable", f"the run's stream is unavailable: {error}"
            )
            await asyncio.sleep(POLL_SECONDS)
            return []
        return records

    async def _continue_if_abandoned(self, run_id: str) -> None:
        """A leg whose process died (lease lapsed, journal open) is re-driven once, here."""
        if await sync_to_async(recoverable_runs)(0, run_id=run_id):
            live.drive(run_id)
