"""Running one batch of tool calls: concurrency, outcomes, timeouts, and what becomes of
a call a crash left in doubt (SPEC R3.13–R3.16)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from .. import tracing
from ..abort import AbortController, AbortSignal, any_signal
from ..approvals import ToolApprovalRequest, edited_result
from ..deps import Deps
from ..exceptions import ReplayDiverged
from ..messages import Message, ToolResultPart
from ..parts import StreamPart
from ..reconciliation import Reconciliation
from ..tools import Tool, ToolArgumentsError, ToolCall, ToolContext, ToolResult
from .approval import Denial
from .journaling import StepRecorder


class SubAgentSuspension(Exception):
    """A durable sub-agent suspended on approvals; it ends the step, it is not a tool error."""

    def __init__(self, requests: Sequence[ToolApprovalRequest]) -> None:
        super().__init__(f"{len(requests)} sub-agent approval(s) pending")
        self.requests = tuple(requests)


def format_ms(ms: float) -> str:
    """Milliseconds the way the reference prints numbers (``50``, not ``50.0``)."""
    return str(int(ms)) if float(ms).is_integer() else str(ms)


def denial_text(denial: Denial) -> str:
    if denial.reason:
        return f"Tool call denied. Reason: {denial.reason}"
    return "Tool call denied."


def unknown_tool_text(name: str, tools: Mapping[str, Tool]) -> str:
    if not tools:
        return f'No such tool: "{name}". No tools are available.'
    return f'No such tool: "{name}". Available tools: {", ".join(tools)}.'


def tool_message(results: Sequence[ToolResult]) -> Message:
    """The one tool message that answers a batch, results in call order (R3.8.6)."""
    return Message(
        "tool",
        tuple(ToolResultPart(r.tool_call_id, r.result, r.is_error) for r in results),
    )


async def _invoke(
    fn: Callable[[Any, ToolContext], Any], args: Any, ctx: ToolContext
) -> Any:
    """Call a tool's function (``execute``, ``reconcile``): an async one is awaited in
    place, a sync one runs off the loop (``deps.run_blocking``)."""
    if inspect.iscoroutinefunction(fn):
        return await fn(args, ctx)
    result = await ctx.deps.run_blocking(fn, args, ctx)
    if inspect.isawaitable(result):
        result = await result
    return result


async def _within(
    fn: Callable[[Any, ToolContext], Any],
    args: Any,
    ctx: ToolContext,
    cap_ms: float | None,
    deps: Deps,
) -> tuple[bool, Any]:
    """``(timed_out, value)``: with a ``cap_ms``, race the tool's function against the
    injected clock; on expiry abort its signal and abandon it."""
    if cap_ms is None or cap_ms <= 0:
        return False, await _invoke(fn, args, ctx)
    timeout = AbortController()
    signal = any_signal(ctx.signal, timeout.signal)
    ctx = replace(ctx, signal=signal)
    work = asyncio.ensure_future(_invoke(fn, args, ctx))
    timer = asyncio.ensure_future(deps.clock.sleep(cap_ms))
    try:
        await asyncio.wait({work, timer}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        timer.cancel()
    if work.done():
        return False, work.result()
    timeout.abort(TimeoutError(f"Tool execution exceeded {format_ms(cap_ms)}ms."))
    work.cancel()
    work.add_done_callback(_swallow)
    return True, None


def _swallow(task: asyncio.Future[Any]) -> None:
    """An abandoned execution's late result or exception is dropped on purpose."""
    if not task.cancelled():
        task.exception()


async def run_one(
    call: ToolCall,
    tools: Mapping[str, Tool],
    denials: Mapping[str, Denial],
    ctx: ToolContext,
    deps: Deps,
) -> ToolResult:
    """One call's outcome, in the reference's precedence order (R3.14); for a call a
    person edited, wrapped so the model is told (:func:`edited_result`)."""
    return _as_told(call, await _outcome(call, tools, denials, ctx, deps))


def _as_told(call: ToolCall, result: ToolResult) -> ToolResult:
    """The result the model is told: for a call a person edited, wrapped so it says so
    (:func:`edited_result`)."""
    if call.edited_from is None:
        return result
    return replace(result, result=edited_result(result.result, call.args))


async def _outcome(
    call: ToolCall,
    tools: Mapping[str, Tool],
    denials: Mapping[str, Denial],
    ctx: ToolContext,
    deps: Deps,
) -> ToolResult:
    def error(text: str) -> ToolResult:
        return ToolResult(call.tool_call_id, call.tool_name, text, True)

    denial = denials.get(call.tool_call_id)
    if denial is not None:
        return error(denial_text(denial))
    declared = tools.get(call.tool_name)
    if declared is None:
        return error(unknown_tool_text(call.tool_name, tools))
    execute = declared.execute
    if execute is None:
        if call.answer is not None:  # a question tool's result is a person's answer
            return ToolResult(call.tool_call_id, call.tool_name, call.answer)
        return error("No server-side executor.")
    args = call.args
    if declared.validate is not None:
        try:
            args = declared.validate(args)
        except ToolArgumentsError as exc:
            return error(f"Invalid arguments: {exc}")
    try:
        timed_out, value = await _within(execute, args, ctx, declared.timeout_ms, deps)
    except (SubAgentSuspension, ReplayDiverged):
        raise  # not the call's failure: the step ends (suspended), or the leg does
    except Exception as exc:
        message = str(exc)
        return error(message or f"Tool '{call.tool_name}' threw during execution.")
    if timed_out:
        assert declared.timeout_ms is not None
        return error(
            f"Tool '{call.tool_name}' timed out after "
            f"{format_ms(declared.timeout_ms)}ms and was abandoned."
        )
    return ToolResult(call.tool_call_id, call.tool_name, value)


async def reconcile_in_doubt(
    calls: Sequence[ToolCall],
    tools: Mapping[str, Tool],
    denials: Mapping[str, Denial],
    shared: ToolContext,
    recorder: StepRecorder,
) -> list[ToolCall]:
    """The calls of a batch that may run: each call in doubt
    (:meth:`StepRecorder.in_doubt`) is first put to its tool's ``reconcile``.

    "Happened": its outcome is recorded, and the batch uses it as any recorded outcome
    (the tool does not run). "Did not happen": it runs — its start record stands, this
    is the one execution it was allowed. "Cannot tell", a ``reconcile`` that raises, or
    none: it is left out, so the run suspends on it for a person.
    """
    runnable: list[ToolCall] = []
    for call in calls:
        if recorder.in_doubt(call, denials):
            declared = tools.get(call.tool_name)
            found = await _reconcile(declared, call, call_context(shared, call))
            if found.status == "cannot-tell":
                continue
            if found.status == "happened":
                outcome = ToolResult(
                    call.tool_call_id,
                    call.tool_name,
                    found.result,
                    found.is_error or None,
                )
                await recorder.record_reconciled(_as_told(call, outcome))
        runnable.append(call)
    return runnable


async def _reconcile(
    declared: Tool | None, call: ToolCall, ctx: ToolContext
) -> Reconciliation:
    """What the tool finds out about its call; "cannot tell" when there is no tool or
    no ``reconcile``, when the arguments no longer validate, or the reconcile fails or
    runs past the tool's ``timeout_ms``."""
    if declared is None or declared.reconcile is None:
        return Reconciliation.cannot_tell()
    try:
        args = call.args if declared.validate is None else declared.validate(call.args)
        timed_out, found = await _within(
            declared.reconcile, args, ctx, declared.timeout_ms, ctx.deps
        )
        if timed_out:
            raise TimeoutError("no answer within the tool's timeout_ms")
        if not isinstance(found, Reconciliation):
            raise TypeError(f"expected a Reconciliation, got {found!r}")
    except Exception as exc:
        ctx.deps.logger.warning(
            f"reconcile of {call.tool_name} call {call.tool_call_id!r} failed, "
            f"a person decides: {exc!r}"
        )
        return Reconciliation.cannot_tell()
    return found


def call_context(
    shared: ToolContext,
    call: ToolCall,
    emit_part: Callable[[StreamPart], None] | None = None,
) -> ToolContext:
    """The batch's ``shared`` context for one call: what its tool's functions see, and
    where a streamed batch's call sends its parts (none for a ``reconcile``). One
    ``replace`` a call: a copy of the context costs a few µs, a fair part of a step."""
    return replace(
        shared,
        tool_call_id=call.tool_call_id,
        tool_name=call.tool_name,
        answer=call.answer,
        emit_part=emit_part,
    )


async def run_batch(
    calls: Sequence[ToolCall],
    tools: Mapping[str, Tool],
    denials: Mapping[str, Denial],
    make_context: Callable[[ToolCall], ToolContext],
    deps: Deps,
    max_concurrency: int,
    signal: AbortSignal | None = None,
    recorder: StepRecorder | None = None,
) -> list[ToolResult]:
    """Run calls with a worker pool; results in call order (R3.13).

    Every call runs even when a sub-agent suspends, so two suspending sub-agents in one batch
    both surface their requests; the batch's results are then discarded (R9.9). Once
    ``signal`` aborts, no further call starts (D1) and the batch is incomplete. With a
    ``recorder`` a call with a recorded outcome is not run again, and every executing
    call's start and outcome are journaled around it; ``deps.fence`` is awaited before
    each execution.
    """
    results: list[ToolResult | None] = [None] * len(calls)
    suspensions: dict[int, SubAgentSuspension] = {}
    next_index = 0

    async def worker() -> None:
        nonlocal next_index
        while next_index < len(calls) and not (signal is not None and signal.aborted):
            index = next_index
            next_index += 1
            call = calls[index]
            try:
                results[index] = await _run_call(
                    call, tools, denials, make_context, deps, recorder
                )
            except SubAgentSuspension as suspension:
                suspensions[index] = suspension

    width = max(1, min(max_concurrency, len(calls)))
    if width == 1:
        await worker()
    else:
        await asyncio.gather(*(worker() for _ in range(width)))
    if suspensions:
        raise SubAgentSuspension(
            [r for index in sorted(suspensions) for r in suspensions[index].requests]
        )
    return [r for r in results if r is not None]


async def _run_call(
    call: ToolCall,
    tools: Mapping[str, Tool],
    denials: Mapping[str, Denial],
    make_context: Callable[[ToolCall], ToolContext],
    deps: Deps,
    recorder: StepRecorder | None,
) -> ToolResult:
    """One call of a batch: its recorded outcome when it has one, so it never runs
    twice; else run behind the fence, its start and outcome journaled around it when
    the recorder journals it."""
    if recorder is not None and (done := recorder.recorded(call)) is not None:
        return done
    journal = (
        recorder if recorder is not None and recorder.executes(call, denials) else None
    )
    if deps.fence is not None and call.tool_call_id not in denials:
        await deps.fence()
    if journal is not None:
        await journal.start(call)
    result = await tracing.execute_tool(
        call,
        run_one(call, tools, denials, make_context(call), deps),
        tool=tools.get(call.tool_name),
        suspension=SubAgentSuspension,
    )
    if journal is not None:
        await journal.finish(result)
    return result
