"""A call without tools: one model turn — no steps, no checkpoint, no run id (R2.1)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

from .. import tracing
from ..model import ModelRequest
from ..parts import StreamPart
from . import abortable
from .leg import LegRecord
from .options import LoopOptions
from .turn import Turn


async def single_turn(
    options: LoopOptions, leg: LegRecord, fence: Callable[[], Awaitable[None]]
) -> AsyncIterator[StreamPart]:
    """The turn's parts, then the leg's ``finish``; ``leg`` records the turn."""
    turn = Turn()
    signal = options.signal
    request = ModelRequest(messages=leg.history, signal=signal)
    await fence()
    try:
        async for event in tracing.chat(
            abortable.model_events(options.model, request, signal), options.model
        ):
            for part in turn.add(event):
                yield part
    finally:
        leg.usage = turn.step_usage
    leg.finish_reason = turn.finish_reason or "stop"
    calls = turn.tool_calls()
    assistant = turn.assistant_message(calls)
    leg.append(assistant)
    leg.record(turn, calls, (), (assistant,))
    yield leg.finish_part()
