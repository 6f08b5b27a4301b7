"""Injected dependencies: the clock, id generation, logging, pricing, blocking calls.

Everything the loop would otherwise read from globals comes in through ``deps=Deps(...)`` so
tests can pin time, ids and log output.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .usage import Usage


@runtime_checkable
class Clock(Protocol):
    """Milliseconds since the epoch, and a sleep measured on the same clock."""

    def now(self) -> float: ...

    async def sleep(self, ms: float) -> None: ...


class SystemClock:
    """The wall clock in whole milliseconds, as JS ``Date.now()``, with ``asyncio.sleep``."""

    def now(self) -> int:
        return time.time_ns() // 1_000_000

    async def sleep(self, ms: float) -> None:
        await asyncio.sleep(ms / 1000)


class Logger(Protocol):
    """What the runtime logs through: a :class:`logging.Logger` fits."""

    def error(
        self, msg: str, /, *args: object, extra: Mapping[str, object] | None = None
    ) -> None: ...

    def warning(
        self, msg: str, /, *args: object, extra: Mapping[str, object] | None = None
    ) -> None: ...


@runtime_checkable
class PriceProvider(Protocol):
    """Prices a usage in USD for a model id; ``None`` when the model is unknown."""

    def price_usage(self, model_id: str, usage: Usage) -> float | None: ...


def _random_id() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True, slots=True, kw_only=True)
class Deps:
    clock: Clock = field(default_factory=SystemClock)
    generate_id: Callable[[], str] = _random_id
    logger: Logger = field(default_factory=lambda: logging.getLogger("deuz_django"))
    price_provider: PriceProvider | None = None
    # Runs a sync tool off the event loop: ``await run_blocking(fn, *args)``. A thread by
    # default; the Django app closes the thread's database connections after each call.
    run_blocking: Callable[..., Awaitable[Any]] = asyncio.to_thread
    # Awaited immediately before every model call and every tool execution; raising stops
    # the leg there. A durable host checks that this leg still holds its lease.
    fence: Callable[[], Awaitable[None]] | None = None
