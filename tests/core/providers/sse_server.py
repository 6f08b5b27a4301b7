"""A local HTTP server that replays recorded provider streams, for the adapter tests.

>>> with SSEServer() as server:
...     server.push(sse("openai_text"), json_error(429, {...}))
...     model = OpenAIChatModel("gpt-4.1-mini", base_url=f"{server.url}/v1", ...)
...     server.requests[0].body  # the JSON the SDK sent

Each request gets the next scripted :class:`Reply`. A stream is sent with chunked
transfer encoding, one chunk per recorded event, as the providers do; a reply can end
cleanly, drop the connection mid-body, stall until the client gives up, or never answer.
The server runs in a thread, so it outlives any one event loop.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

FIXTURES = Path(__file__).parent / "fixtures"
End = Literal["done", "drop", "stall"]


def load_events(name: str) -> list[bytes]:
    """The events of ``fixtures/<name>.sse``, each with its blank-line terminator."""
    text = (FIXTURES / f"{name}.sse").read_text("utf-8")
    return [f"{event}\n\n".encode() for event in text.strip("\n").split("\n\n")]


@dataclass(frozen=True)
class Reply:
    """One scripted response. ``end``: ``done`` (the body ends properly, after however
    many events were given), ``drop`` (the connection is cut inside the chunked body),
    ``stall`` (the connection stays open, nothing more is sent). ``hang`` never sends
    headers at all."""

    status: int = 200
    chunks: tuple[bytes, ...] = ()
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "text/event-stream"),)
    end: End = "done"
    interval: float = 0.0
    hang: bool = False


def sse(
    source: str | list[bytes],
    *,
    limit: int | None = None,
    end: End = "done",
    interval: float = 0.0,
) -> Reply:
    """A stream of recorded events (a fixture name or the events), the first ``limit``."""
    events = load_events(source) if isinstance(source, str) else source
    return Reply(chunks=tuple(events[:limit]), end=end, interval=interval)


def openai_events(*chunks: dict[str, Any], done: bool = True) -> list[bytes]:
    """OpenAI's framing for ad-hoc chunks: ``data: {json}`` events and ``[DONE]``."""
    events = [f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks]
    return [*events, b"data: [DONE]\n\n"] if done else events


def anthropic_events(*events: dict[str, Any]) -> list[bytes]:
    """Anthropic's framing: an ``event:`` line naming the type, then ``data: {json}``."""
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


def json_error(
    status: int, body: dict[str, Any], headers: tuple[tuple[str, str], ...] = ()
) -> Reply:
    return Reply(
        status=status,
        chunks=(json.dumps(body).encode(),),
        headers=(("Content-Type", "application/json"), *headers),
    )


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class SSEServer:
    """Serves scripted replies on 127.0.0.1 and records every request."""

    requests: list[Recorded] = field(default_factory=list)
    disconnected: threading.Event = field(default_factory=threading.Event)
    _replies: deque[Reply] = field(default_factory=deque)
    _closing: threading.Event = field(default_factory=threading.Event)
    _connections: set[socket.socket] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._http = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._http.owner = self
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}"
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    def __enter__(self) -> SSEServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def push(self, *replies: Reply) -> None:
        self._replies.extend(replies)

    def close(self) -> None:
        self._closing.set()
        self._http.shutdown()
        with self._lock:
            for connection in self._connections:
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)
        self._http.server_close()
        self._thread.join()

    @property
    def bodies(self) -> list[Any]:
        return [request.body for request in self.requests]

    def _next(self) -> Reply:
        if not self._replies:
            return json_error(500, {"error": {"message": "no scripted reply left"}})
        return self._replies.popleft()


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = False
    block_on_close = True
    owner: SSEServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client hanging up mid-reply is expected; nothing to print."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        with self.server.owner._lock:
            self.server.owner._connections.add(self.connection)

    def finish(self) -> None:
        with self.server.owner._lock:
            self.server.owner._connections.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def do_POST(self) -> None:
        owner = self.server.owner
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        owner.requests.append(
            Recorded(
                "POST",
                self.path,
                {k.lower(): v for k, v in self.headers.items()},
                json.loads(raw) if raw else None,
            )
        )
        reply = owner._next()
        if reply.hang:
            self._wait_for_hangup()
            return
        try:
            self._send(reply)
        except OSError:
            owner.disconnected.set()
            self.close_connection = True

    def _send(self, reply: Reply) -> None:
        self.send_response(reply.status)
        for name, value in reply.headers:
            self.send_header(name, value)
        if reply.status != 200:  # error bodies are small and sized
            body = b"".join(reply.chunks)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for index, chunk in enumerate(reply.chunks):
            if (
                index
                and reply.interval
                and not self._client_still_there(reply.interval)
            ):
                self.server.owner.disconnected.set()
                self.close_connection = True
                return
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()
        if reply.end == "done":
            self.wfile.write(b"0\r\n\r\n")
        elif reply.end == "drop":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        else:
            self._wait_for_hangup()

    def _wait_for_hangup(self) -> None:
        while not self.server.owner._closing.is_set():
            if not self._client_still_there(0.02):
                self.server.owner.disconnected.set()
                break
        self.close_connection = True

    def _client_still_there(self, seconds: float) -> bool:
        """Wait ``seconds``; ``False`` as soon as the client closes the connection."""
        readable, _, _ = select.select([self.connection], [], [], seconds)
        if not readable:
            return True
        try:
            return bool(self.connection.recv(1, socket.MSG_PEEK))
        except OSError:
            return False
