"""Shared test doubles for the core suite: a clock, ids, a logger, raw models, collectors.

Every loop test injects these through ``Deps`` so time, ids and log output are pinned.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

from deuz_django.core import Deps, StreamChatResult, StreamPart, Tool
from deuz_django.core.durable import AgentCheckpoint, InMemorySessionStore
from deuz_django.core.model import ModelEvent, ModelRequest
from deuz_django.core.parts import SubAgentPart, ToolStatePart
from deuz_django.core.usage import Usage

START_MS = 1_700_000_000_000


class FakeClock:
    """Milliseconds that move only when told; ``sleep`` advances them at once."""

    def __init__(self, start: float = START_MS) -> None:
        self.ms = start

    def now(self) -> float:
        return self.ms

    async def sleep(self, ms: float) -> None:
        self.ms += ms
        await asyncio.sleep(0)


class NeverClock(FakeClock):
    """A clock whose timers never fire: a tool timeout can only lose the race."""

    async def sleep(self, ms: float) -> None:
        await asyncio.Event().wait()


class Ids:
    """``generate_id`` returning ``id-1``, ``id-2``, ..."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> str:
        self.count += 1
        return f"id-{self.count}"


class RecordingLogger:
    """Keeps every error and warning with the keyword arguments it was given."""

    def __init__(self) -> None:
        self.errors: list[tuple[str, dict[str, Any]]] = []
        self.warnings: list[tuple[str, dict[str, Any]]] = []

    def error(self, msg: str, /, *args: object, **kwargs: Any) -> None:
        self.errors.append((msg, kwargs))

    def warning(self, msg: str, /, *args: object, **kwargs: Any) -> None:
        self.warnings.append((msg, kwargs))


def make_deps(**overrides: Any) -> Deps:
    fields: dict[str, Any] = {
        "clock": FakeClock(),
        "generate_id": Ids(),
        "logger": RecordingLogger(),
    }
    return Deps(**(fields | overrides))


def usage(input_tokens: int, output_tokens: int) -> Usage:
    return Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens,
    )


class RawModel:
    """Plays raw event lists, one list per call, for shapes ``reply()`` cannot script."""

    def __init__(self, turns: Sequence[Sequence[ModelEvent]]) -> None:
        self.turns = [list(t) for t in turns]
        self.requests: list[ModelRequest] = []

    @property
    def model_id(self) -> str:
        return "raw"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        for event in self.turns[len(self.requests) - 1]:
            yield event


class HangingModel:
    """Streams ``before``, calls ``on_hang`` (e.g. an abort), then waits forever."""

    def __init__(self, before: Sequence[ModelEvent] = (), on_hang: Any = None) -> None:
        self.before = list(before)
        self.on_hang = on_hang
        self.requests: list[ModelRequest] = []
        self.closed = False

    @property
    def model_id(self) -> str:
        return "hanging"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        try:
            for event in self.before:
                yield event
            if self.on_hang is not None:
                self.on_hang()
            await asyncio.Event().wait()
        finally:
            self.closed = True


class Probe:
    """A server tool's ``execute`` that records every call's arguments and context."""

    def __init__(self, value: Any = "ok", *, error: str | None = None) -> None:
        self.value = value
        self.error = error
        self.calls: list[Any] = []
        self.contexts: list[Any] = []

    def tool(self, name: str, **fields: Any) -> Tool:
        async def execute(args: Any, ctx: Any) -> Any:
            self.calls.append(args)
            self.contexts.append(ctx)
            if self.error is not None:
                raise RuntimeError(self.error)
            return self.value

        return Tool(name=name, execute=execute, **fields)


async def collect(stream: StreamChatResult) -> list[StreamPart]:
    return [part async for part in stream.full_stream]


def token(part: StreamPart) -> str:
    """A compact name for a part: ``tool-state:executing``, ``sub-agent[coder]:text-delta``."""
    if isinstance(part, ToolStatePart):
        return f"tool-state:{part.state}"
    if isinstance(part, SubAgentPart):
        return f"sub-agent[{'/'.join(part.agent_path)}]:{token(part.part)}"
    return part.type


def tokens(parts: Sequence[StreamPart]) -> list[str]:
    return [token(p) for p in parts]


def json_parts(parts: Sequence[StreamPart]) -> list[dict[str, Any]]:
    return [p.to_json() for p in parts]


class RecordingStore(InMemorySessionStore):
    """The in-memory store that also keeps every checkpoint it was given, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.saved: list[AgentCheckpoint] = []

    def save(self, checkpoint: AgentCheckpoint) -> None:
        self.saved.append(checkpoint)
        super().save(checkpoint)

    def saved_for(self, run_id: str) -> list[AgentCheckpoint]:
        return [c for c in self.saved if c.run_id == run_id]
