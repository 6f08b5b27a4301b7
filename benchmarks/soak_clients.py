"""The soak's simulated people: customers who start runs over REST and follow them over
the WebSocket, and a staff member who decides approvals over REST.

Both talk to whichever daphne answers, as behind a load balancer: a request or a socket
that finds its daphne gone tries another (and the same one again once it is back). A
follower keeps what every frame of its run carried, so the soak can hold it against the
journal at the end: a gap, a repeat or a part out of order is counted as it arrives.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import random
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import WebSocketException

from benchmarks.soak_agent import effect_line

GIVE_UP_SECONDS = 60.0  # a daphne that stays unreachable this long is a failed soak
RETRY_SECONDS = 0.1
RUN_SECONDS = 120.0  # a run not completed this long after its start is stuck
RECONNECT_SHARE = 0.25  # runs whose follower drops its socket once, at a random part
OTHER_DAPHNE_SHARE = 0.5  # runs followed on another daphne than the one that started it
DECISION_DELAY = (0.2, 2.0)  # seconds a staff member takes to decide, uniform
STAFF_POLL_SECONDS = 0.5
UNREACHABLE = (urllib.error.URLError, http.client.HTTPException, OSError)


class Unreachable(Exception):
    """No daphne answered for ``GIVE_UP_SECONDS``."""


def other(ports: list[int], port: int) -> int:
    """Another daphne's port than ``port`` (the same one when there is no other)."""
    return random.choice([p for p in ports if p != port] or [port])


def _failover(ports: list[int], first: int | None) -> Iterator[int]:
    """Ports to try, ``first`` first, then the others, round after round."""
    while True:
        order = random.sample(ports, len(ports))
        if first in order:
            order.remove(first)
            order.insert(0, first)
        yield from order


class Api:
    """The REST API as one user (token authentication), on any daphne that answers."""

    def __init__(self, ports: list[int], token: str, pool: ThreadPoolExecutor) -> None:
        self.ports = ports
        self.token = token
        self.pool = pool

    async def call(
        self, method: str, path: str, body: Any = None, *, port: int | None = None
    ) -> tuple[int, Any]:
        """The status and JSON body of the first daphne that answers."""
        deadline = time.monotonic() + GIVE_UP_SECONDS
        loop = asyncio.get_running_loop()
        for candidate in _failover(self.ports, port):
            try:
                return await loop.run_in_executor(
                    self.pool, self._call, candidate, method, path, body
                )
            except UNREACHABLE:
                if time.monotonic() > deadline:
                    raise Unreachable(f"{method} {path}: no daphne answered") from None
                await asyncio.sleep(RETRY_SECONDS)
        raise AssertionError("unreachable")  # _failover never ends

    def _call(self, port: int, method: str, path: str, body: Any) -> tuple[int, Any]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}{path}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={
                "Authorization": f"Token {self.token}",
                "Content-Type": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.load(response)
        except urllib.error.HTTPError as error:
            with error:
                return error.code, json.loads(error.read() or b"null")


@dataclass
class RunRecord:
    """What one customer saw of one run."""

    run_id: str
    started_at: float = 0.0
    parts: dict[int, Any] = field(default_factory=dict)  # seq -> part, or "done"
    cursor: int = -1  # the last seq received in order
    anomalies: list[str] = field(default_factory=list)  # gaps, repeats, errors
    first_part_s: float | None = None
    resume_latencies: list[float] = field(default_factory=list)
    reconnects: int = 0  # the socket dropped on purpose
    dropped: int = 0  # the socket was dropped by its daphne (killed)
    status: str = ""

    def receive(self, seq: int, part: Any) -> None:
        if seq != self.cursor + 1:
            self.anomalies.append(f"seq {seq} after {self.cursor}")
        if seq in self.parts:
            return
        self.parts[seq] = part
        self.cursor = max(self.cursor, seq)


class Customer:
    """Starts runs one after another and follows each to its end over one socket."""

    def __init__(
        self,
        api: Api,
        ports: list[int],
        cookie: str,
        verdicts_sent: dict[str, float],
    ) -> None:
        self.api = api
        self.ports = ports
        self.cookie = cookie
        self.verdicts_sent = verdicts_sent  # run id -> when staff sent its last verdict
        self.socket: ClientConnection | None = None
        self.port = random.choice(ports)

    async def close(self) -> None:
        if self.socket is not None:
            await self.socket.close()

    async def run(self, run_id: str, order: str) -> RunRecord:
        record = RunRecord(run_id)
        rest_port = random.choice(self.ports)
        if random.random() < OTHER_DAPHNE_SHARE:
            self.port = other(self.ports, rest_port)
        else:
            self.port = rest_port
        await self._connect(record)
        record.started_at = time.monotonic()
        status, body = await self.api.call(
            "POST",
            "/api/deuz/runs/",
            {"agent": "soak", "text": f"Please refund order {order}", "runId": run_id},
            port=rest_port,
        )
        # 409: an earlier try reached a daphne that died before it could answer.
        if status != 201 and not (status == 409 and body.get("code") == "run_exists"):
            record.anomalies.append(f"start answered {status}: {body}")
            return record
        drop_at = random.randint(1, 70) if random.random() < RECONNECT_SHARE else None
        await self._subscribe(record)
        try:
            async with asyncio.timeout(RUN_SECONDS):
                await self._follow(record, drop_at)
        except TimeoutError:
            record.anomalies.append(f"not completed after {RUN_SECONDS} s")
        if record.status not in ("", "completed"):
            record.anomalies.append(f"ended as {record.status}")
        await self._send({"type": "unsubscribe", "runId": run_id})
        return record

    async def _follow(self, record: RunRecord, drop_at: int | None) -> None:
        """Until the run completed and the leg that just ended finished its last step.

        A leg's ``finish`` cannot tell: one that suspends before any step (on a call a
        crash left in doubt) finishes with ``stop`` too, and the run may have completed
        meanwhile, while this client still reads an earlier leg.
        """
        after_done = False
        last_step = -1
        while not record.status:
            try:
                raw = await self.socket.recv() if self.socket else None
            except (WebSocketException, OSError):
                raw = None
            if raw is None:
                record.dropped += 1
                await self._reconnect(record, other(self.ports, self.port))
                continue
            frame = json.loads(raw)
            if frame.get("runId") != record.run_id:
                continue  # a frame of the customer's previous run, still in flight
            now = time.monotonic()
            if "part" in frame:
                if record.first_part_s is None:
                    record.first_part_s = now - record.started_at
                if after_done and (sent := self.verdicts_sent.pop(record.run_id, None)):
                    record.resume_latencies.append(now - sent)
                after_done = False
                part = frame["part"]
                if part.get("type") == "step-finish":
                    last_step = max(last_step, part["step"])
                record.receive(frame["seq"], part)
            elif frame.get("type") == "done":
                record.receive(frame["seq"], "done")
                after_done = True
                record.status = await self._ended(record.run_id, last_step)
            elif frame.get("type") == "error":
                record.anomalies.append(f"error frame: {frame}")
            if drop_at is not None and record.cursor >= drop_at:
                drop_at = None
                record.reconnects += 1
                await self._reconnect(record, other(self.ports, self.port))

    async def _ended(self, run_id: str, last_step: int) -> str:
        """The run's status if this client saw its end, ``""`` while more is to come."""
        status, body = await self.api.call("GET", f"/api/deuz/runs/{run_id}/")
        if status != 200:
            return f"HTTP {status}"
        if body["status"] == "failed":
            return "failed"
        if body["status"] == "completed" and body["stepIndex"] == last_step + 1:
            return "completed"
        return ""

    async def _reconnect(self, record: RunRecord, port: int) -> None:
        if self.socket is not None:
            with contextlib.suppress(WebSocketException, OSError):
                await self.socket.close()
        self.socket = None
        self.port = port
        await self._connect(record)
        await self._subscribe(record)

    async def _connect(self, record: RunRecord) -> None:
        """A socket on ``self.port``, or on any daphne that answers."""
        if self.socket is not None:
            return
        deadline = time.monotonic() + GIVE_UP_SECONDS
        for port in _failover(self.ports, self.port):
            try:
                self.socket = await connect(
                    f"ws://127.0.0.1:{port}/ws/deuz/",
                    origin=f"http://127.0.0.1:{port}",  # type: ignore[arg-type]
                    additional_headers={"Cookie": self.cookie},
                    proxy=None,
                    max_size=None,
                )
                self.port = port
                return
            except (WebSocketException, OSError):
                if time.monotonic() > deadline:
                    raise Unreachable(
                        f"{record.run_id}: no daphne took a socket"
                    ) from None
                await asyncio.sleep(RETRY_SECONDS)

    async def _subscribe(self, record: RunRecord) -> None:
        frame = {"type": "subscribe", "runId": record.run_id, "lastSeq": record.cursor}
        if not await self._send(frame):
            record.dropped += 1
            await self._reconnect(record, other(self.ports, self.port))

    async def _send(self, frame: dict[str, Any]) -> bool:
        try:
            assert self.socket is not None
            await self.socket.send(json.dumps(frame))
        except (WebSocketException, OSError):
            self.socket = None
            return False
        return True


@dataclass
class StaffStats:
    decided: int = 0
    in_doubt_happened: int = 0  # outcome unknown, found in the effects: "it happened"
    in_doubt_run_again: int = 0  # outcome unknown, not found: "run it again"
    anomalies: list[str] = field(default_factory=list)


class Staff:
    """Polls the pending approvals and decides each after a random delay: approves the
    refunds; answers a call in doubt by looking for its effect, as a person would check
    the payment system."""

    def __init__(
        self, api: Api, effects: Path, verdicts_sent: dict[str, float]
    ) -> None:
        self.api = api
        self.effects = effects
        self.verdicts_sent = verdicts_sent
        self.stats = StaffStats()
        self._seen: set[tuple[str, ...]] = set()
        self._deciding: set[asyncio.Task[None]] = set()

    async def work(self, until: Callable[[], bool]) -> None:
        while not until():
            status, body = await self.api.call(
                "GET", "/api/deuz/approvals/?pageSize=200"
            )
            if status != 200:
                self.stats.anomalies.append(f"approvals answered {status}: {body}")
            for approval in body.get("results", []) if status == 200 else []:
                key = tuple(
                    str(approval[k])
                    for k in ("runId", "approvalId", "kind", "createdAt")
                )
                if key not in self._seen:
                    self._seen.add(key)
                    task = asyncio.create_task(self._decide(approval))
                    self._deciding.add(task)
                    task.add_done_callback(self._deciding.discard)
            await asyncio.sleep(STAFF_POLL_SECONDS)
        await asyncio.gather(*self._deciding)

    async def _decide(self, approval: dict[str, Any]) -> None:
        await asyncio.sleep(random.uniform(*DECISION_DELAY))
        run_id = approval["runId"]
        verdict = {
            "approvalId": approval["approvalId"],
            "approved": True,
            "token": approval["token"],
        }
        if approval["kind"] == "outcome_unknown":
            line = effect_line(approval["toolName"], run_id, approval["toolCallId"])
            if line in self.effects.read_text().splitlines(keepends=True):
                verdict["result"] = "done (found in the effects log)"
                self.stats.in_doubt_happened += 1
            else:
                self.stats.in_doubt_run_again += 1
        self.verdicts_sent[run_id] = time.monotonic()
        status, body = await self.api.call(
            "POST", f"/api/deuz/runs/{run_id}/verdicts/", {"verdicts": [verdict]}
        )
        # 409: an earlier try reached a daphne that died before it could answer.
        if status in (200, 202) or (
            status == 409 and body.get("code") == "approval_already_decided"
        ):
            self.stats.decided += 1
        else:
            self.stats.anomalies.append(
                f"verdict on {run_id} answered {status}: {body}"
            )
