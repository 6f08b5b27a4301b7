"""Streaming one batch of tool calls: its parts in the R4.2 order, with what its calls
emit (a sub-agent's parts) as it comes, from the loop's thread or a sync tool's."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence

from ..abort import AbortSignal
from ..deps import Deps
from ..parts import StreamPart, ToolOutputPart, ToolStatePart
from ..tools import Tool, ToolCall, ToolContext, ToolResult
from . import abortable
from .approval import Denial
from .execution import call_context, run_batch
from .journaling import StepRecorder


async def stream_batch(
    calls: Sequence[ToolCall],
    tools: Mapping[str, Tool],
    denials: Mapping[str, Denial],
    shared: ToolContext,
    deps: Deps,
    *,
    max_concurrency: int,
    signal: AbortSignal | None,
    results: list[ToolResult],
    recorder: StepRecorder | None = None,
) -> AsyncIterator[StreamPart]:
    """Run a batch into ``results``, streaming its parts in the R4.2 order: ``executing``
    states, forwarded sub-agent parts as they come, then each result with its terminal state
    in call order. Each call's context is ``shared`` with the call's id, name and emitter.

    Raises :class:`SubAgentSuspension` when a sub-agent suspended (no result parts), and
    ``Aborted`` when the caller's signal fired before or during the batch.
    """
    abortable.check(signal)
    for call in calls:
        if call.tool_call_id not in denials and call.tool_name in tools:
            yield ToolStatePart(call.tool_call_id, "executing", call.tool_name)
    queue: asyncio.Queue[StreamPart | None] = asyncio.Queue()
    emit = _emitter(queue)

    async def run() -> list[ToolResult]:
        try:
            return await run_batch(
                calls,
                tools,
                denials,
                lambda call: call_context(shared, call, emit),
                deps,
                max_concurrency,
                signal,
                recorder,
            )
        finally:
            queue.put_nowait(None)

    batch = asyncio.ensure_future(run())
    try:
        while (part := await queue.get()) is not None:
            yield part
    finally:
        if not batch.done():
            batch.cancel()
            await asyncio.gather(batch, return_exceptions=True)
    done = batch.result()
    abortable.check(signal)
    results.extend(done)
    for part in _result_parts(calls, done, denials):
        yield part


def _emitter(
    queue: asyncio.Queue[StreamPart | None],
) -> Callable[[StreamPart], None]:
    """A call's ``emit_part``: puts a part on ``queue`` from the loop's thread, or from
    the worker thread a sync tool runs in."""
    loop = asyncio.get_running_loop()
    loop_thread = threading.get_ident()

    def emit(part: StreamPart) -> None:
        # A sync tool runs in a worker thread; its parts must enter the queue on the loop.
        if threading.get_ident() == loop_thread:
            queue.put_nowait(part)
        else:
            loop.call_soon_threadsafe(queue.put_nowait, part)

    return emit


def _result_parts(
    calls: Sequence[ToolCall],
    results: Sequence[ToolResult],
    denials: Mapping[str, Denial],
) -> Iterator[StreamPart]:
    """Each call's output, then its terminal state (a denial says so), in call order."""
    for call, result in zip(calls, results, strict=True):
        yield ToolOutputPart(
            result.tool_call_id, result.tool_name, result.result, bool(result.is_error)
        )
        denial = denials.get(call.tool_call_id)
        yield ToolStatePart(
            call.tool_call_id,
            "error" if result.is_error else "complete",
            call.tool_name,
            denied=denial is not None,
            denied_reason=denial.reason if denial else None,
        )
