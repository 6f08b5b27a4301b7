"""The WebSocket consumer: start runs, follow them through the journal, answer approvals.

Client → server (JSON text frames; fields as in the REST API, :mod:`deuz_django.streaming.frames`)::

    {"type": "start", "agent": "assistant", "text": "Hi"}          # or "messages": [...]
                                                    # optional "runId" (client-minted), "title"
    {"type": "subscribe", "runId": "…", "lastSeq": 41}             # replay after 41, then tail
    {"type": "unsubscribe", "runId": "…"}
    {"type": "approval-response", "runId": "…", "approvalId": "…", "approved": true,
     "reason": "…", "token": "v1.…"}   # optional "result", "editedInput", "allow", "answer"
    {"type": "cancel", "runId": "…"}                               # abort the run's leg
    {"type": "stop", "runId": "…", "reason": "…"}   # stop the run for good, anywhere
    {"type": "fork", "runId": "…", "step": 2, "withTurn": false,   # a new run from step 2
     "edit": {"message": "…"} | {"toolCallId": "…", "input": {…}}}  # optional "forkRunId"
    {"type": "input", "runId": "…", "text": "…", "inputId": "…"}   # steer it (inputId
                                                    # optional: a retry queues nothing twice)

Server → client::

    {"runId": "…", "seq": 7, "part": {"type": "text-delta", "text": "Hel"}}
    {"type": "done", "runId": "…", "seq": 12}                      # a leg ended
    {"type": "started" | "subscribed", "runId": "…", "status": "running"}
    {"type": "approval-recorded", "runId": "…", "approvalId": "…", "status": "approved",
     "resuming": true}
    {"type": "stop-requested", "runId": "…", "status": "stopped"}  # or still "running"
    {"type": "forked", "runId": "…", "forkRunId": "…", "status": "running"}  # subscribe
    {"type": "input-queued", "runId": "…", "inputId": "…", "seq": 3}   # durable; the
        # part {"type": "data-input-delivered", "payload": {"inputId", …}} follows when a
        # step boundary delivers it
    {"type": "error", "code": "…", "message": "…"}                 # the socket stays open

A run never depends on the socket: its leg runs in a task holding the run's lease and
keeps journaling when the client leaves; disconnecting never cancels (``cancel`` does).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from asgiref.sync import sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from ..api.batches import read_verdict
from ..core.journal import is_done
from ..exceptions import NotPermitted
from ..models import Approval, Run
from ..permissions import can_resume_run, is_signed_in
from ..runs.continuing import acontinue_quietly
from ..services import afork_run, arecord_verdicts, asend_input, astart_run, astop_run
from . import frames, live
from .following import Unavailable, follow
from .frames import FrameError

BURST = 40  # frames a client may send at once
REFILL_PER_SECOND = 10.0
POLL_SECONDS = 1.0  # re-read the journal on silence: covers a dropped nudge
SEND_BATCH = 200
CLOSE_UNAUTHENTICATED = 4401


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
        if not is_signed_in(self.user):
            await self.close(
                code=CLOSE_UNAUTHENTICATED, reason="authentication required"
            )

    async def disconnect(self, code: int) -> None:
        for run_id in list(self.tails):
            await self._unfollow(run_id)

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
            frame = frames.parse(text_data)
            frame_type = frame.get("type")
            if not isinstance(frame_type, str) or frame_type not in self.HANDLERS:
                known = ", ".join(sorted(self.HANDLERS))
                raise FrameError(
                    "unknown_type",
                    f"unknown frame type {frame_type!r} (known: {known})",
                )
            handler = self.HANDLERS[frame_type]
            try:
                await handler(self, frames.validate(frame_type, frame))
            except FrameError:
                raise
            except Exception as error:  # a service error: the REST API's code and text
                raise frames.service_error(error) from None
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

    async def _send(self, **frame: Any) -> None:
        await self.send(text_data=json.dumps(frame))

    # -- frame handlers ---------------------------------------------------------------------

    async def handle_start(self, frame: dict[str, Any]) -> None:
        run = await astart_run(
            agent=frame["agent"],
            messages=frame["history"],
            owner=self.user,
            run_id=frame.get("runId"),
            title=frame.get("title", ""),
        )
        await self._follow(run.run_id, -1, starting=True)
        await self._send(type="started", runId=run.run_id, status=run.status)
        await acontinue_quietly(run.run_id)

    async def handle_subscribe(self, frame: dict[str, Any]) -> None:
        run_id = frame["runId"]
        run = await Run.objects.avisible(self.user, run_id)
        last_seq = frame.get("lastSeq")
        await self._follow(run_id, -1 if last_seq is None else max(-1, last_seq))
        await self._send(type="subscribed", runId=run_id, status=run.status)

    async def handle_unsubscribe(self, frame: dict[str, Any]) -> None:
        await self._unfollow(frame["runId"])

    async def handle_approval_response(self, frame: dict[str, Any]) -> None:
        run_id, approval_id = frame["runId"], frame["approvalId"]
        run = await Run.objects.avisible(self.user, run_id)
        approval = (
            await Approval.objects.select_related("run")
            .filter(run=run, approval_id=approval_id)
            .newest_first()
            .afirst()
        )
        if approval is None:
            raise FrameError(
                "not_found", f"run {run_id} has no approval {approval_id!r}"
            )
        recorded = await arecord_verdicts(self.user, [(approval, read_verdict(frame))])
        await self._send(
            type="approval-recorded",
            runId=run_id,
            approvalId=approval_id,
            status=recorded.decisions[0].approval.status,
            resuming=recorded.run_ready,
        )

    async def handle_cancel(self, frame: dict[str, Any]) -> None:
        run = await Run.objects.avisible(self.user, frame["runId"])
        if not await sync_to_async(can_resume_run)(self.user, run):
            raise NotPermitted("You may not cancel this run.")
        await live.cancel(run.run_id)

    async def handle_stop(self, frame: dict[str, Any]) -> None:
        """Stop the run for good, in whichever process holds it (unlike ``cancel``,
        which aborts a leg this process runs): ``stop-requested`` says whether it is
        stopped already or stops at its leg's next fence."""
        run = await astop_run(frame["runId"], user=self.user, reason=frame["reason"])
        await self._send(type="stop-requested", runId=run.run_id, status=run.status)

    async def handle_fork(self, frame: dict[str, Any]) -> None:
        """Fork the run at a step (``POST runs/<id>/fork/``): ``forked`` names the new
        run, which continues in the background; subscribe to follow it."""
        fork = await afork_run(
            frame["runId"],
            user=self.user,
            step=frame["step"],
            edit=frame["edit"],
            with_turn=frame["withTurn"],
            fork_run_id=frame.get("forkRunId"),
        )
        await self._send(
            type="forked",
            runId=frame["runId"],
            forkRunId=fork.run_id,
            status=fork.status,
        )

    async def handle_input(self, frame: dict[str, Any]) -> None:
        """Steer the run (``POST runs/<id>/inputs/``): ``input-queued`` once the input
        is durable; the run's stream says when a step boundary delivers it."""
        queued = await asend_input(
            frame["runId"], frame["text"], user=self.user, input_id=frame.get("inputId")
        )
        await self._send(
            type="input-queued",
            runId=frame["runId"],
            inputId=queued.input_id,
            seq=queued.seq,
        )

    HANDLERS = {
        "start": handle_start,
        "subscribe": handle_subscribe,
        "unsubscribe": handle_unsubscribe,
        "approval-response": handle_approval_response,
        "cancel": handle_cancel,
        "stop": handle_stop,
        "fork": handle_fork,
        "input": handle_input,
    }

    # -- following a run --------------------------------------------------------------------

    async def _follow(
        self, run_id: str, cursor: int, *, starting: bool = False
    ) -> None:
        previous = self.tails.pop(run_id, None)
        if previous is not None:
            previous.cancel()
        await self.channel_layer.group_add(live.run_group(run_id), self.channel_name)
        self.tails[run_id] = asyncio.ensure_future(
            self._tail(run_id, cursor, starting=starting)
        )

    async def _unfollow(self, run_id: str) -> None:
        task = self.tails.pop(run_id, None)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await self.channel_layer.group_discard(
                live.run_group(run_id), self.channel_name
            )

    async def run_nudge(self, event: dict[str, Any]) -> None:
        """A leg in some process journaled new parts (``deuz.run.<id>`` group message)."""
        live.feed.wake(event["runId"])

    async def _tail(self, run_id: str, cursor: int, *, starting: bool) -> None:
        """Send what the journal holds after ``cursor``, then whatever follows, forever."""
        run_id_json = json.dumps(run_id)
        async for update in follow(
            run_id, cursor, poll_seconds=POLL_SECONDS, starting=starting
        ):
            if isinstance(update, Unavailable):
                await self._error(
                    "journal_unavailable",
                    f"the run's stream is unavailable: {update.error}",
                )
                continue
            for index, (seq, data) in enumerate(update):
                if is_done(data):
                    await self.send(
                        text_data=f'{{"type":"done","runId":{run_id_json},"seq":{seq}}}'
                    )
                else:
                    await self.send(text_data=part_frame(run_id_json, seq, data))
                if index % SEND_BATCH == SEND_BATCH - 1:
                    await asyncio.sleep(0)  # let daphne flush what was queued
