"""The agentic tool loop: one engine that streams canonical parts (SPEC §2–§6).

``generate_text`` drains this engine and ``stream_chat`` hands its parts out, so both entry
points share every rule by construction. A :class:`LoopRun` is one leg of a run: settle any
verdicts, then step — model call, approval gate, tool batch, stop checks, checkpoint — until
the model answers, a stop condition fires, or the run suspends.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._approval import (
    Denial,
    is_client_tool,
    is_gated,
    pending_requests,
    plan_settle,
    server_denials,
    sign_requests,
)
from ._awaitable import resolve
from ._execution import SubAgentSuspension, run_batch
from ._turn import Turn
from .abort import AbortSignal
from .approvals import ApprovalSignerLike, ToolApprovalRequest, ToolApprovalResponse
from .deps import Deps
from .durable._checkpointer import Checkpointer, load_checkpoint
from .durable.checkpoint import CheckpointStatus
from .durable.session import DurableSession, SessionStore
from .exceptions import CheckpointNotFoundError, RunCompletedError
from .messages import Message, ToolResultPart, coerce_messages
from .model import LanguageModel, ModelEvent, ModelRequest, ToolChoice, ToolDefinition
from .parts import (
    CostPart,
    ErrorPart,
    FinishPart,
    StepFinishPart,
    StepStartPart,
    StreamPart,
    ToolApprovalRequestPart,
    ToolCallPart,
    ToolOutputPart,
    ToolStatePart,
)
from .results import GenerateTextResult, StepResult
from .stop import StepInfo, StopCondition, condition_name, condition_needs_cost
from .tools import ServerApprover, Tool, ToolCall, ToolContext, ToolResult
from .usage import EMPTY_USAGE, FinishReason, Usage, sum_usage, with_total

MAX_SAME_TOOL_ERRORS = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class PrepareStepInfo:
    """What ``prepare_step`` sees: ``step_index`` and ``usage`` count the whole run."""

    step_index: int
    messages: tuple[Message, ...]
    usage: Usage


@dataclass(frozen=True, slots=True, kw_only=True)
class StepOverrides:
    """What ``prepare_step`` may change: ``messages`` for this and later steps, the rest
    for this step only."""

    messages: Sequence[Message | dict[str, Any]] | None = None
    active_tools: Sequence[str] | None = None
    tool_choice: ToolChoice | None = None
    model: LanguageModel | None = None


PrepareStep = Callable[
    [PrepareStepInfo], StepOverrides | Awaitable[StepOverrides | None] | None
]


@dataclass(frozen=True, slots=True)
class ResumePoint:
    """Where a leg's counters start: the checkpoint's boundary count and cumulative usage."""

    step_index: int
    usage: Usage


@dataclass(frozen=True, slots=True)
class ResumeSource:
    """Resume lazily from the store: the checkpoint is loaded when the leg starts (R7.4)."""

    store: SessionStore
    run_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopOptions:
    model: LanguageModel
    messages: tuple[Message, ...]
    tools: dict[str, Tool]
    max_steps: int = 1
    stop_when: tuple[StopCondition, ...] = ()
    prepare_step: PrepareStep | None = None
    approve_tool_call: ServerApprover | None = None
    approval_responses: tuple[ToolApprovalResponse, ...] | None = None
    approval_signer: ApprovalSignerLike | None = None
    approval_max_age_ms: float | None = None
    max_tool_concurrency: int = 5
    signal: AbortSignal | None = None
    session: DurableSession | None = None
    deps: Deps = field(default_factory=Deps)
    agent_path: tuple[str, ...] = ()
    root_run_id: str | None = None
    resume_from: ResumePoint | None = None
    resume_source: ResumeSource | None = None


class _Aborted(Exception):
    """The caller's signal fired; the leg ends with ``finish(aborted)`` and no checkpoint."""


async def _events(
    model: LanguageModel, request: ModelRequest, signal: AbortSignal | None
) -> AsyncIterator[ModelEvent]:
    """The model's events, cut short (and the model's stream closed) when ``signal`` aborts."""
    events = model.stream(request)
    if signal is None:
        async for event in events:
            yield event
        return
    abort = asyncio.ensure_future(signal.wait())

    async def pull() -> ModelEvent:
        return await anext(events)

    try:
        while True:
            step = asyncio.ensure_future(pull())
            await asyncio.wait({step, abort}, return_when=asyncio.FIRST_COMPLETED)
            if not step.done():
                step.cancel()
                await asyncio.gather(step, return_exceptions=True)
                raise _Aborted
            try:
                event = step.result()
            except StopAsyncIteration:
                return
            yield event
    finally:
        abort.cancel()
        closer = getattr(events, "aclose", None)
        if closer is not None:
            await closer()


class LoopRun:
    """One leg. Iterate :meth:`stream` once; then read :meth:`result`."""

    def __init__(self, options: LoopOptions) -> None:
        self.options = options
        self.deps = options.deps
        self.agentic = bool(options.tools) or options.resume_source is not None
        session = options.session
        if options.resume_source is not None:
            self.run_id: str | None = options.resume_source.run_id
        elif session is not None and self.agentic:
            self.run_id = session.run_id or self.deps.generate_id()
        else:
            self.run_id = None
        self.history = options.messages
        self.tools = options.tools
        self.leg_usage = EMPTY_USAGE
        self.steps: list[StepResult] = []
        self.response_messages: list[Message] = []
        self.pending: tuple[ToolApprovalRequest, ...] | None = None
        self.stopped_by: str | None = None
        self.finish_reason: FinishReason = "stop"
        self.error: BaseException | None = None
        self._done = False
        self._checkpointer: Checkpointer | None = None
        self._base_step_index = 0
        self._error_streaks: dict[str, int] = {}
        self._cost_warned = False
        self._previous_cost: float | None = None
        self._started_at = 0.0
        self._ended = False

    # -- public ---------------------------------------------------------------------------

    async def stream(self) -> AsyncIterator[StreamPart]:
        """The leg's canonical parts; a failure becomes a final ``error`` part (R3.22)."""
        try:
            async for part in self._drive():
                yield part
        except _Aborted:
            self.finish_reason = "aborted"
            yield self._finish()
        except Exception as exc:
            self.error = exc
            yield ErrorPart(exc)
        finally:
            self._done = True

    def result(self) -> GenerateTextResult:
        """The buffered result; raises the leg's error if it failed."""
        if self.error is not None:
            raise self.error
        if not self._done:
            raise RuntimeError("the leg has not finished; drain stream() first")
        last_tool_step = next((s for s in reversed(self.steps) if s.tool_calls), None)
        return GenerateTextResult(
            text=self.steps[-1].text if self.steps else "",
            steps=tuple(self.steps),
            usage=with_total(self.leg_usage),
            finish_reason=self.finish_reason,
            messages=self.history,
            response_messages=tuple(self.response_messages),
            tool_calls=last_tool_step.tool_calls if last_tool_step else None,
            tool_results=last_tool_step.tool_results if last_tool_step else None,
            pending_approvals=self.pending,
            stopped_by=self.stopped_by,
            run_id=self.run_id,
        )

    @property
    def cumulative_usage(self) -> Usage:
        if self._checkpointer is not None:
            return self._checkpointer.cumulative(self.leg_usage)
        return with_total(self.leg_usage)

    # -- the leg --------------------------------------------------------------------------

    async def _drive(self) -> AsyncIterator[StreamPart]:
        self._started_at = self.deps.clock.now()
        if not self.agentic:
            async for part in self._single_turn():
                yield part
            return
        await self._start_session()
        if self.options.approval_responses is not None:
            async for part in self._settle():
                yield part
        while not self._ended:
            self._check_abort()
            async for part in self._step():
                yield part

    async def _start_session(self) -> None:
        options = self.options
        resume_from = options.resume_from
        store: SessionStore | None = options.session.store if options.session else None
        if options.resume_source is not None:
            source = options.resume_source
            checkpoint = await load_checkpoint(source.store, source.run_id)
            if not checkpoint:
                raise CheckpointNotFoundError(source.run_id)
            if checkpoint.status == "completed":
                raise RunCompletedError(source.run_id)
            store = source.store
            self.history = checkpoint.messages
            resume_from = ResumePoint(checkpoint.step_index, checkpoint.usage)
        elif (
            resume_from is None
            and options.session is not None
            and options.session.run_id
        ):
            # D9: a call that names an existing run continues its counters.
            existing = await load_checkpoint(
                options.session.store, options.session.run_id
            )
            if existing is not None:
                resume_from = ResumePoint(existing.step_index, existing.usage)
        if resume_from is not None:
            self._base_step_index = resume_from.step_index
        if store is not None and self.run_id is not None:
            self._checkpointer = Checkpointer(
                store,
                self.run_id,
                self.deps,
                agent_path=options.agent_path,
                step_index=resume_from.step_index if resume_from else 0,
                base_usage=resume_from.usage if resume_from else EMPTY_USAGE,
            )
        if self.deps.price_provider is not None and resume_from is not None:
            self._previous_cost = self._price(options.model, resume_from.usage)

    async def _single_turn(self) -> AsyncIterator[StreamPart]:
        """A call without tools is one model turn: no steps, no checkpoint, no run id (R2.1)."""
        turn = Turn()
        request = ModelRequest(messages=self.history, signal=self.options.signal)
        try:
            async for event in _events(
                self.options.model, request, self.options.signal
            ):
                for part in turn.add(event):
                    yield part
        except _Aborted:
            self.leg_usage = turn.step_usage
            raise
        self.leg_usage = turn.step_usage
        self.finish_reason = turn.finish_reason or "stop"
        calls = turn.tool_calls()
        assistant = turn.assistant_message(calls)
        self._append(assistant)
        self._record(turn, calls, (), (assistant,))
        yield self._finish()

    # -- one step -------------------------------------------------------------------------

    def _end(self) -> None:
        self._ended = True

    async def _step(self) -> AsyncIterator[StreamPart]:
        options = self.options
        step_index = self._base_step_index + len(self.steps)
        yield StepStartPart(step_index)
        model, tool_definitions, tool_choice = (
            options.model,
            self._definitions(None),
            None,
        )
        if options.prepare_step is not None:
            overrides = await resolve(
                options.prepare_step(
                    PrepareStepInfo(
                        step_index=step_index,
                        messages=self.history,
                        usage=self.cumulative_usage,
                    )
                )
            )
            if overrides is not None:
                if overrides.messages is not None:
                    self.history = coerce_messages(overrides.messages)
                if overrides.active_tools is not None:
                    tool_definitions = self._definitions(overrides.active_tools)
                tool_choice = overrides.tool_choice
                model = overrides.model or model
        request = ModelRequest(
            messages=self.history,
            tools=tool_definitions,
            tool_choice=tool_choice,
            parallel_tool_calls=options.max_tool_concurrency > 1,
            signal=options.signal,
        )
        turn = Turn()
        try:
            async for event in _events(model, request, options.signal):
                for part in turn.add(event):
                    yield part
        except _Aborted:
            # D1: the aborted step is reported but never recorded or checkpointed.
            yield StepFinishPart(
                step_index, turn.finish_reason or "stop", turn.step_usage
            )
            raise
        self.leg_usage = sum_usage(self.leg_usage, turn.step_usage)
        finish_reason: FinishReason = turn.finish_reason or "stop"
        self.finish_reason = finish_reason
        yield StepFinishPart(step_index, finish_reason, turn.step_usage)
        cost_part = self._cost_part(model, step_index)
        if cost_part is not None:
            yield cost_part
        calls = turn.tool_calls()
        assistant = turn.assistant_message(calls)
        self._append(assistant)
        if not calls:
            # R3.6/R3.7: no tool_use parts means a natural completion, whatever the reason.
            self._record(turn, calls, (), (assistant,))
            await self._save("completed")
            yield self._finish()
            self._end()
            return
        for call in calls:
            yield ToolCallPart(call.tool_call_id, call.tool_name, call.args)
            yield ToolStatePart(call.tool_call_id, "input-complete", call.tool_name)
        denials, pending = await self._gate(calls)
        client_calls = [c for c in calls if is_client_tool(self.tools, c.tool_name)]
        if pending or client_calls:
            async for part in self._suspend_on_approvals(
                turn, calls, assistant, pending
            ):
                yield part
            return
        try:
            results: list[ToolResult] = []
            async for part in self._execute(calls, denials, results):
                yield part
        except SubAgentSuspension as suspension:
            self._record(turn, calls, (), (assistant,))
            async for part in self._suspend_on_children(suspension.requests):
                yield part
            return
        self._check_abort()
        tool_message = self._tool_message(results)
        self._append(tool_message)
        self._record(turn, calls, tuple(results), (assistant, tool_message))
        if self._runaway(results, denials):
            await self._save("completed")
            yield self._finish()
            self._end()
            return
        stopped_by = self._stop_reason(model)
        if stopped_by is not None:
            self.stopped_by = stopped_by
            await self._save("completed")
            yield self._finish()
            self._end()
            return
        await self._save("running")

    async def _gate(
        self, calls: tuple[ToolCall, ...]
    ) -> tuple[dict[str, Denial], list[ToolCall]]:
        """Server mode decides gated calls now; client mode leaves them pending (§5.2–5.3)."""
        if not any(self.tools.get(c.tool_name, _UNGATED).needs_approval for c in calls):
            return {}, []
        gated = [
            c
            for c in calls
            if await is_gated(self.tools, c, self.history, self.options.signal)
        ]
        if self.options.approve_tool_call is not None:
            return await server_denials(
                self.options.approve_tool_call, gated, self.history
            ), []
        return {}, gated

    async def _suspend_on_approvals(
        self,
        turn: Turn,
        calls: tuple[ToolCall, ...],
        assistant: Message,
        gated: list[ToolCall],
    ) -> AsyncIterator[StreamPart]:
        """R5.5–R5.8: nothing in the batch runs; the gated calls go out as requests."""
        requests = sign_requests(
            pending_requests(gated, self.options.agent_path),
            self.options.approval_signer,
            self._binding_run_id,
            self.deps,
        )
        for call in gated:
            yield ToolStatePart(call.tool_call_id, "awaiting-approval", call.tool_name)
        for request in requests:
            yield ToolApprovalRequestPart(request)
        self._record(turn, calls, (), (assistant,))
        self.pending = requests or None
        await self._save("suspended", requests)
        yield self._finish()
        self._end()

    async def _suspend_on_children(
        self, requests: tuple[ToolApprovalRequest, ...]
    ) -> AsyncIterator[StreamPart]:
        """R9.8: a durable sub-agent suspended; its tagged requests become the run's."""
        for request in requests:
            yield ToolApprovalRequestPart(request)
        self.pending = requests
        await self._save("suspended", requests)
        yield self._finish()
        self._end()

    # -- settle-on-resume -----------------------------------------------------------------

    async def _settle(self) -> AsyncIterator[StreamPart]:
        """R5.10: answer the trailing unanswered calls before the first model call."""
        plan = await plan_settle(
            self.history,
            self.options.approval_responses or (),
            self.tools,
            signer=self.options.approval_signer,
            max_age_ms=self.options.approval_max_age_ms,
            bound_run_id=self._binding_run_id if self._checkpointer else None,
            signal=self.options.signal,
        )
        if plan is None:
            return
        try:
            results: list[ToolResult] = []
            async for part in self._execute(plan.calls, plan.denials, results):
                yield part
        except SubAgentSuspension as suspension:
            # B9: the history stays as it was; the leg ends before any step.
            async for part in self._suspend_on_children(suspension.requests):
                yield part
            return
        self._check_abort()
        tool_message = self._tool_message(results)
        self._append(tool_message)
        self._runaway(results, plan.denials)

    # -- tool execution -------------------------------------------------------------------

    async def _execute(
        self,
        calls: Sequence[ToolCall],
        denials: dict[str, Denial],
        results: list[ToolResult],
    ) -> AsyncIterator[StreamPart]:
        """Run a batch, streaming ``executing`` states, forwarded sub-agent parts, then
        each result with its terminal state, in call order (R4.2)."""
        for call in calls:
            if call.tool_call_id not in denials and call.tool_name in self.tools:
                yield ToolStatePart(call.tool_call_id, "executing", call.tool_name)
        queue: asyncio.Queue[StreamPart | None] = asyncio.Queue()
        history = self.history

        def context(call: ToolCall) -> ToolContext:
            return self._tool_context(call, history, queue.put_nowait)

        async def run() -> list[ToolResult]:
            try:
                return await run_batch(
                    calls,
                    self.tools,
                    denials,
                    context,
                    self.deps,
                    self.options.max_tool_concurrency,
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
        results.extend(batch.result())
        for call, result in zip(calls, results, strict=True):
            yield ToolOutputPart(
                result.tool_call_id,
                result.tool_name,
                result.result,
                bool(result.is_error),
            )
            denial = denials.get(call.tool_call_id)
            yield ToolStatePart(
                call.tool_call_id,
                "error" if result.is_error else "complete",
                call.tool_name,
                denied=denial is not None,
                denied_reason=denial.reason if denial else None,
            )

    def _tool_context(
        self,
        call: ToolCall,
        history: tuple[Message, ...],
        emit: Callable[[StreamPart], None],
    ) -> ToolContext:
        options = self.options
        session = None
        if self._checkpointer is not None:
            session = DurableSession(
                self._checkpointer.store, self._checkpointer.run_id
            )
        return ToolContext(
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            messages=history,
            signal=options.signal,
            deps=self.deps,
            agent_path=options.agent_path,
            emit_part=emit,
            approve_tool_call=options.approve_tool_call,
            report_usage=self._report_usage,
            session=session,
            approval_responses=options.approval_responses,
            approval_signer=options.approval_signer,
            approval_max_age_ms=options.approval_max_age_ms,
            root_run_id=self._binding_run_id,
        )

    def _report_usage(self, usage: Usage) -> None:
        self.leg_usage = sum_usage(self.leg_usage, usage)

    # -- bookkeeping ----------------------------------------------------------------------

    @property
    def _binding_run_id(self) -> str | None:
        """The run id tokens bind: the root run's, also for sub-agents (D2)."""
        if self._checkpointer is None:
            return None
        return self.options.root_run_id or self.run_id

    def _definitions(self, active: Sequence[str] | None) -> tuple[ToolDefinition, ...]:
        names: Sequence[str] = list(self.tools)
        if active is not None:
            unknown = [n for n in active if n not in self.tools]
            for name in unknown:
                self.deps.logger.warning(f"active_tools: unknown tool {name!r} ignored")
            chosen = [n for n in active if n in self.tools]
            names = chosen or names  # R3.12: nothing matches → fail open
        return tuple(
            ToolDefinition(n, self.tools[n].description, self.tools[n].parameters)
            for n in names
        )

    def _append(self, message: Message) -> None:
        self.history = (*self.history, message)
        self.response_messages.append(message)

    @staticmethod
    def _tool_message(results: Sequence[ToolResult]) -> Message:
        return Message(
            "tool",
            tuple(
                ToolResultPart(r.tool_call_id, r.result, r.is_error) for r in results
            ),
        )

    def _record(
        self,
        turn: Turn,
        calls: tuple[ToolCall, ...],
        results: tuple[ToolResult, ...],
        response: tuple[Message, ...],
    ) -> None:
        self.steps.append(
            StepResult(
                step_type="initial" if not self.steps else "tool-result",
                text=turn.text_value,
                reasoning_text=turn.reasoning_text or None,
                tool_calls=calls,
                tool_results=results,
                finish_reason=turn.finish_reason or "stop",
                usage=turn.step_usage,
                response_messages=response,
            )
        )

    def _runaway(
        self, results: Sequence[ToolResult], denials: dict[str, Denial]
    ) -> bool:
        """D6: three consecutive steps in which the same tool failed end the run."""
        failed = {
            r.tool_name for r in results if r.is_error and r.tool_call_id not in denials
        }
        succeeded = {
            r.tool_name
            for r in results
            if not r.is_error and r.tool_call_id not in denials
        }
        streaks = self._error_streaks
        for name in list(streaks):
            if name not in failed:
                del streaks[name]
        for name in failed - succeeded:
            streaks[name] = streaks.get(name, 0) + 1
        for name in failed & succeeded:
            streaks.pop(name, None)
        return any(count >= MAX_SAME_TOOL_ERRORS for count in streaks.values())

    def _stop_reason(self, model: LanguageModel) -> str | None:
        """R3.18 with D6: the first condition that trips names the stop, max_steps first."""
        if len(self.steps) >= self.options.max_steps:
            return "max_steps"
        if not self.options.stop_when:
            return None
        cost = None
        if any(condition_needs_cost(c) for c in self.options.stop_when):
            if self.deps.price_provider is None:
                if not self._cost_warned:
                    self._cost_warned = True
                    self.deps.logger.warning(
                        "cost_exceeds: no deps.price_provider injected — "
                        "the condition never fires"
                    )
            else:
                cost = self._price(model, self.cumulative_usage)
        info = StepInfo(
            steps=tuple(self.steps),
            step_count=len(self.steps),
            usage=self.cumulative_usage,
            cost_usd=cost,
            elapsed_ms=self.deps.clock.now() - self._started_at,
        )
        for condition in self.options.stop_when:
            if condition(info):
                return condition_name(condition)
        return None

    def _price(self, model: LanguageModel, usage: Usage) -> float | None:
        provider = self.deps.price_provider
        if provider is None:
            return None
        try:
            return provider.price_usage(model.model_id, usage)
        except Exception as error:
            self.deps.logger.warning(f"price provider failed: {error}")
            return None

    def _cost_part(self, model: LanguageModel, step_index: int) -> CostPart | None:
        """R4.4: the cumulative price after each step, when a price provider is set."""
        if self.deps.price_provider is None:
            return None
        cost = self._price(model, self.cumulative_usage)
        if cost is None:
            return None
        previous = self._previous_cost or 0.0
        self._previous_cost = cost
        delta = max(0.0, round((cost - previous) * 1e6) / 1e6)
        return CostPart(cost, delta, None, step_index)

    def _check_abort(self) -> None:
        signal = self.options.signal
        if signal is not None and signal.aborted:
            raise _Aborted

    async def _save(
        self,
        status: CheckpointStatus,
        pending: tuple[ToolApprovalRequest, ...] | None = None,
    ) -> None:
        if self._checkpointer is not None:
            await self._checkpointer.save(status, self.history, self.leg_usage, pending)

    def _finish(self) -> FinishPart:
        metadata = {"deuz": {"stoppedBy": self.stopped_by}} if self.stopped_by else None
        return FinishPart(self.finish_reason, with_total(self.leg_usage), metadata)


_UNGATED = Tool(name="")
