"""The WebSocket against real daphne processes: drops, reloads, second tabs, crashes.

Each test runs its own site (tests.live_site) and talks to it like a browser would: a
session cookie, an Origin header, JSON text frames.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from tests.live_site import Daphne, LiveSite

CHUNKS = 40


@pytest.fixture
def site(tmp_path: Path) -> Iterator[LiveSite]:
    live = LiveSite(
        tmp_path,
        DEUZ_TEST_CHUNKS=str(CHUNKS),
        DEUZ_TEST_CHUNK_DELAY="0.03",
        DEUZ_LEASE_SECONDS="2",
    )
    yield live
    live.close()


Opener = Callable[[Daphne, str], Awaitable[ClientConnection]]


@pytest.fixture
async def socket() -> AsyncIterator[Opener]:
    """Open WebSockets like a browser tab (session cookie, Origin); all closed at the end."""
    opened: list[ClientConnection] = []

    async def open_socket(server: Daphne, cookie: str) -> ClientConnection:
        ws = await connect(
            server.ws,
            origin=server.http,  # type: ignore[arg-type]
            additional_headers={"Cookie": cookie},
            proxy=None,
        )
        opened.append(ws)
        return ws

    yield open_socket
    for ws in opened:
        await ws.close()


async def frames(
    ws: ClientConnection, seconds: float = 20
) -> AsyncIterator[dict[str, Any]]:
    async with asyncio.timeout(seconds):
        async for message in ws:
            yield json.loads(message)


async def start(ws: ClientConnection, agent: str = "streamer") -> str:
    await ws.send(json.dumps({"type": "start", "agent": agent, "text": "go"}))
    async for frame in frames(ws):
        if frame.get("type") == "started":
            return str(frame["runId"])
    raise AssertionError("no started frame")


async def collect_until(
    ws: ClientConnection,
    parts: dict[int, dict[str, Any]],
    *,
    stop_after_seq: int | None = None,
) -> int:
    """Gather frames by seq (leg ends as ``{"type": "done"}``) until the run's final leg
    ended (returns that sentinel's seq) or ``stop_after_seq`` arrived."""
    async for frame in frames(ws):
        if "seq" not in frame:
            continue
        seq = int(frame["seq"])
        assert seq not in parts, f"seq {seq} delivered twice"
        parts[seq] = frame.get("part", {"type": "done"})
        if stop_after_seq is not None and seq >= stop_after_seq:
            return seq
        if (
            frame.get("type") == "done"
            and parts.get(seq - 1, {}).get("finishReason") == "stop"
        ):
            return seq
    raise AssertionError("stream ended early")


def streamed_text(parts: dict[int, dict[str, Any]]) -> str:
    """The answer as a client shows it: a repeated step-start discards the partial step."""
    text: list[str] = []
    step_text: dict[int, list[str]] = {}
    current = None
    for seq in sorted(parts):
        part = parts[seq]
        if part["type"] == "step-start":
            current = part["step"]
            step_text[current] = []
        elif part["type"] == "text-delta":
            assert current is not None
            step_text[current].append(part["text"])
    for step in sorted(step_text):
        text.extend(step_text[step])
    return "".join(text)


EXPECTED = "".join(f"w{i} " for i in range(CHUNKS))


async def test_a_dropped_client_reconnects_with_its_last_seq_and_misses_nothing(
    site: LiveSite, socket: Opener
) -> None:
    server = site.daphne()
    cookie = site.user("ann")
    parts: dict[int, dict[str, Any]] = {}
    ws = await socket(server, cookie)
    run_id = await start(ws)
    await collect_until(ws, parts, stop_after_seq=15)
    await ws.close()  # the connection drops mid-run; the run goes on
    await asyncio.sleep(0.3)
    ws = await socket(server, cookie)
    await ws.send(
        json.dumps({"type": "subscribe", "runId": run_id, "lastSeq": max(parts)})
    )
    done = await collect_until(ws, parts)
    await ws.close()
    assert sorted(parts) == list(
        range(done + 1)
    )  # gapless, no duplicates (checked on arrival)
    assert streamed_text(parts) == EXPECTED


async def test_a_second_tab_streams_the_same_run_live(
    site: LiveSite, socket: Opener
) -> None:
    server = site.daphne()
    cookie = site.user("ann")
    first = await socket(server, cookie)
    run_id = await start(first)
    second = await socket(server, cookie)
    await second.send(json.dumps({"type": "subscribe", "runId": run_id, "lastSeq": -1}))
    seen: list[dict[int, dict[str, Any]]] = [{}, {}]
    await asyncio.gather(collect_until(first, seen[0]), collect_until(second, seen[1]))
    assert seen[0] == seen[1]
    assert streamed_text(seen[1]) == EXPECTED


async def test_another_users_run_is_not_found(site: LiveSite, socket: Opener) -> None:
    server = site.daphne()
    owner = await socket(server, site.user("ann"))
    run_id = await start(owner)
    stranger = await socket(server, site.user("eve"))
    await stranger.send(
        json.dumps({"type": "subscribe", "runId": run_id, "lastSeq": -1})
    )
    async for frame in frames(stranger):
        assert frame == {
            "type": "error",
            "code": "not_found",
            "message": f"No run '{run_id}'.",
            "frame": "subscribe",
        }
        break


async def test_a_decision_made_elsewhere_streams_live_to_the_connected_client(
    site: LiveSite, socket: Opener
) -> None:
    server = site.daphne()
    cookie = site.user("ann")
    ws = await socket(server, cookie)
    run_id = await start(ws, "asker")
    parts: dict[int, dict[str, Any]] = {}
    await collect_until(ws, parts, stop_after_seq=0)
    while parts[max(parts)]["type"] != "done":
        await collect_until(ws, parts, stop_after_seq=max(parts) + 1)
    request = next(p for p in parts.values() if p["type"] == "tool-approval-request")
    # An operator approves from a shell, in another process: the leg runs there.
    site.manage(
        "deuz",
        "resume",
        run_id,
        "--approve",
        request["approvalId"],
        "--operator",
        "ops",
    )
    done = await collect_until(ws, parts)
    assert sorted(parts) == list(range(done + 1))
    texts = "".join(p["text"] for p in parts.values() if p["type"] == "text-delta")
    assert texts == "".join(f"sent{i} " for i in range(CHUNKS))
    assert any(
        p["type"] == "tool-result" and p["output"] == "sent to ann@example.com"
        for p in parts.values()
    )


async def test_a_killed_server_is_continued_once_by_the_next_one(
    site: LiveSite, socket: Opener
) -> None:
    server = site.daphne()
    port = server.port
    cookie = site.user("ann")
    ws = await socket(server, cookie)
    run_id = await start(ws)
    parts: dict[int, dict[str, Any]] = {}
    await collect_until(ws, parts, stop_after_seq=20)  # inside the streamed answer
    server.kill()
    replacement = site.daphne(port)  # a deploy: same address, new process
    ws = await socket(replacement, cookie)
    await ws.send(
        json.dumps({"type": "subscribe", "runId": run_id, "lastSeq": max(parts)})
    )
    done = await collect_until(ws, parts)
    await ws.close()
    assert sorted(parts) == list(range(done + 1))
    step_starts = [
        parts[s]["step"] for s in sorted(parts) if parts[s]["type"] == "step-start"
    ]
    assert step_starts == [
        0,
        1,
        1,
    ]  # the interrupted step is re-run once, announced again
    assert streamed_text(parts) == EXPECTED
    effects = site.script(
        """
        from deuz_django.models import Run
        run = Run.objects.get(parent=None)
        print(json.dumps([run.status, run.step_index, run.message_count]))
        """
    )
    assert effects == ["completed", 2, 4]


async def test_two_servers_behind_redis_share_live_parts(
    tmp_path: Path, socket: Opener
) -> None:
    site = LiveSite(
        tmp_path,
        DEUZ_TEST_CHUNKS=str(CHUNKS),
        DEUZ_TEST_CHUNK_DELAY="0.03",
        REDIS_URL=os.environ.get("DEUZ_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"),
    )
    try:
        one, two = site.daphne(), site.daphne()
        cookie = site.user("ann")
        starter = await socket(one, cookie)
        run_id = await start(starter)
        follower = await socket(two, cookie)
        await follower.send(
            json.dumps({"type": "subscribe", "runId": run_id, "lastSeq": -1})
        )
        parts: dict[int, dict[str, Any]] = {}
        done = await collect_until(follower, parts)
        assert sorted(parts) == list(range(done + 1))
        assert streamed_text(parts) == EXPECTED
    finally:
        site.close()


def sse_get(server: Daphne, path: str, cookie: str, last_event_id: int) -> str:
    """A plain HTTP client reading an SSE response to its end."""
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    connection.request(
        "GET", path, headers={"Cookie": cookie, "Last-Event-ID": str(last_event_id)}
    )
    response = connection.getresponse()
    assert response.status == 200
    assert response.getheader("x-deuz-stream") == "v2"
    body = response.read().decode()
    connection.close()
    return body


async def test_the_sse_stream_continues_a_crashed_run_once(
    site: LiveSite, socket: Opener
) -> None:
    server = site.daphne()
    cookie = site.user("ann")
    ws = await socket(server, cookie)
    run_id = await start(ws)
    parts: dict[int, dict[str, Any]] = {}
    await collect_until(ws, parts, stop_after_seq=20)
    server.kill()
    replacement = site.daphne(server.port)
    body = await asyncio.to_thread(
        sse_get, replacement, f"/api/deuz/runs/{run_id}/stream", cookie, max(parts)
    )
    blocks = [b.split("\n") for b in body.split("\n\n") if b]
    seqs = [int(lines[0][4:]) for lines in blocks]
    assert seqs[0] == max(parts) + 1
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    assert blocks[-1][1] == "data: [DONE]"
    for lines in blocks[:-1]:
        parts[int(lines[0][4:])] = json.loads(lines[1][6:])
    assert streamed_text(parts) == EXPECTED


async def test_frames_over_the_app_limit_get_too_large_and_over_daphnes_are_dropped(
    site: LiveSite, socket: Opener
) -> None:
    """The documented limits: the app answers frames up to daphne's message limit
    (``--websocket_max_message_size``, 1 MiB by default) — over its own 256 KiB with
    ``too_large``; daphne drops a connection whose frame exceeds its limit before the
    app sees it."""
    from deuz_django.streaming.frames import MAX_FRAME_BYTES

    server = site.daphne()
    ws = await socket(server, site.user("ann"))
    big = json.dumps(
        {"type": "start", "agent": "streamer", "text": "x" * MAX_FRAME_BYTES}
    )
    await ws.send(big)
    async for frame in frames(ws):
        assert (frame["type"], frame["code"]) == ("error", "too_large")
        break
    await ws.send(json.dumps({"type": "subscribe", "runId": "missing"}))
    async for frame in frames(ws):
        assert frame["code"] == "not_found"  # still open
        break

    async def oversized_frame() -> None:
        await ws.send("x" * (1024 * 1024 + 1))  # daphne may drop it while it is sent
        await ws.recv()

    with pytest.raises(ConnectionClosed):
        await asyncio.wait_for(oversized_frame(), 10)
    assert ws.close_code in (1006, 1009)
