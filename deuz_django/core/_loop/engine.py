"""The agentic tool loop: one engine that streams canonical parts (SPEC §2–§6).

``generate_text`` drains this engine and ``stream_chat`` hands its parts out, so both entry
points share every rule by construction. A :class:`LoopRun` is one leg of a run: settle any
verdicts, then step — model call, approval gate, tool batch, stop checks, checkpoint — until
the model answers, a stop condition fires, or the run suspends.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from .. import tracing
from .._awaitable import resolve
from ..approvals import ToolApprovalRequest
from ..durable._checkpointer import (
    Checkpointer,
    ResumePoint,
    load_best_effort,
    load_resumable,
)
from ..durable.checkpoint import CheckpointStatus
from ..durable.session import DurableSession, SessionStore
from ..durable.step_journal import StepJournal
from ..messages import Message, coerce_messages
from ..model import LanguageModel, ModelRequest
from ..parts import (
    ErrorPart,
    StepFinishPart,
    StepStartPart,
    StreamPart,
    ToolApprovalRequestPart,
    ToolCallPart,
    ToolStatePart,
)
from ..results import GenerateTextResult
from ..tools import ToolCall, ToolContext, ToolResult, tool_definitions
from ..usage import Usage, with_total
from . import abortable
from .approval import Denial, gate, is_client_tool, pending_requests, sign_requests
from .execution import (
    SubAgentSuspension,
    reconcile_in_doubt,
    stream_batch,
    tool_message,
)
from .journaling import StepRecorder, journal_of, latest_for, load_turn
from .leg import LegRecord
from .limits import PriceMeter, RunawayGuard, StopConditions
from .options import LoopOptions, PrepareStepInfo, step_overrides
from .settle import plan_settle
from .turn import Turn


class LoopRun:
    """One leg. Iterate :meth:`stream` once; then read :meth:`result`."""

    def __init__(self, options: LoopOptions) -> None:
        self.options = options
        self.deps = options.deps
        self.agentic = not options.single_turn
        session = options.session
        if options.resume_source is not None:
            self.run_id: str | None = options.resume_source.run_id
        elif session is not None and self.agentic:
            self.run_id = session.run_id or self.deps.generate_id()
        else:
            self.run_id = None
        # Where the leg's calls sit: the root run, or the sub-agent's call (its key).
        self._idempotency_scope = options.idempotency_scope or self.run_id or ""
        self.tools = options.tools
        self.leg = LegRecord(options.messages)
        self.error: BaseException | None = None
        self._done = False
        self._ended = False
        self._checkpointer: Checkpointer | None = None
        self._journal: StepJournal | None = None
        self._base_step_index = 0
        self._started_at = 0.0
        self._guard = RunawayGuard()
        self._meter = PriceMeter(self.deps)
        self._stops = StopConditions(
            options.max_steps, options.stop_when, self._meter, self.deps
        )

    # -- public ---------------------------------------------------------------------------

    def stream(self) -> AsyncIterator[StreamPart]:
        """The leg's canonical parts; a failure becomes a final ``error`` part (R3.22)."""
        return tracing.invoke_agent(
            self._stream(),
            model=self.options.model,
            run_id=self.run_id,
            agent_path=self.options.agent_path,
            resumed=self.options.resume_source is not None,
        )

    async def _stream(self) -> AsyncIterator[StreamPart]:
        try:
            async for part in self._drive():
                yield part
        except abortable.Aborted:
            self.leg.finish_reason = "aborted"
            if self.agentic:  # R3.21: an aborted single turn emits no finish part
                yield self.leg.finish_part()
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
        return self.leg.result(self.run_id)

    @property
    def cumulative_usage(self) -> Usage:
        """The run's usage so far: earlier legs (when durable) plus this leg."""
        if self._checkpointer is not None:
            return self._checkpointer.cumulative(self.leg.usage)
        return with_total(self.leg.usage)

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
            abortable.check(self.options.signal)
            async for part in tracing.step(self._step()):
                yield part

    async def _start_session(self) -> None:
        """Load what the leg continues from (R7.2, D5, D9) and set up its checkpointer."""
        options = self.options
        start = options.resume_from
        store: SessionStore | None = options.session.store if options.session else None
        if options.resume_source is not None:
            store = options.resume_source.store
            checkpoint = await load_resumable(store, options.resume_source.run_id)
            self.leg.history = checkpoint.messages
            start = ResumePoint.of(checkpoint)
        elif start is None and options.session and options.session.run_id:
            # D9: a call that names an existing run continues its counters.
            existing = await load_best_effort(
                options.session.store, options.session.run_id, self.deps
            )
            start = ResumePoint.of(existing) if existing else None
        if start is not None:
            self._base_step_index = start.step_index
            self._meter.start_from(start.usage, options.model)
        if store is not None and self.run_id is not None:
            self._checkpointer = Checkpointer(
                store,
                self.run_id,
                self.deps,
                agent_path=options.agent_path,
                start=start,
            )
            self._journal = journal_of(store)

    async def _single_turn(self) -> AsyncIterator[StreamPart]:
        """A call without tools is one model turn: no steps, no checkpoint, no run id (R2.1)."""
        turn = Turn()
        signal = self.options.signal
        request = ModelRequest(messages=self.leg.history, signal=signal)
        await self._fence()
        try:
            async for event in tracing.chat(
                abortable.model_events(self.options.model, request, signal),
                self.options.model,
            ):
                for part in turn.add(event):
                    yield part
        finally:
            self.leg.usage = turn.step_usage
        self.leg.finish_reason = turn.finish_reason or "stop"
        calls = turn.tool_calls()
        assistant = turn.assistant_message(calls)
        self.leg.append(assistant)
        self.leg.record(turn, calls, (), (assistant,))
        yield self.leg.finish_part()

    async def _settle(self) -> AsyncIterator[StreamPart]:
        """R5.10: answer the trailing unanswered calls before the first model call."""
        plan = await plan_settle(
            self.leg.history,
            [
                response
                for response in self.options.approval_responses or ()
                if response.answers_agent(self.options.agent_path)
            ],
            self.tools,
            signer=self.options.approval_signer,
            max_age_ms=self.options.approval_max_age_ms,
            bound_run_id=self._binding_run_id,
            signal=self.options.signal,
        )
        if plan is None:
            return
        recorder = await self._settle_recorder()
        results: list[ToolResult] = []
        try:
            async for part in self._execute(
                plan.executed_calls(), plan.denials, results, True, recorder
            ):
                yield part
        except SubAgentSuspension as suspension:
            # B9: the history stays as it was; the leg ends before any step.
            async for part in self._suspend(suspension.requests):
                yield part
            return
        if len(results) < len(plan.calls):  # in-doubt calls: B9 as well
            async for part in self._suspend_in_doubt(plan.calls, results):
                yield part
            return
        self.leg.append(tool_message(results))
        self._guard.record(results, plan.denials)  # R3.17: settle alone never stops

    # -- one step -------------------------------------------------------------------------

    async def _step(self) -> AsyncIterator[StreamPart]:
        step_index = self._base_step_index + len(self.leg.steps)
        yield StepStartPart(step_index)
        model, request = await self._prepare(step_index)
        basis = len(self.leg.history)
        recorded = (
            await load_turn(self._journal, self._journaled_run_id, step_index, basis)
            if self._journal is not None
            else None
        )
        if recorded is not None:
            # The turn is in the step journal: the model answered it before a crash.
            turn, parts = Turn.replay(recorded.message)
            for part in parts:
                yield part
        else:
            turn = Turn()
            await self._fence()
            try:
                async for event in tracing.chat(
                    abortable.model_events(model, request, self.options.signal), model
                ):
                    for part in turn.add(event):
                        yield part
            except abortable.Aborted:
                # D1: the aborted step is reported, but never recorded or checkpointed.
                yield self._step_finish(step_index, turn)
                raise
        yield self._step_finish(step_index, turn)
        if self._meter.enabled:
            cost = self._meter.cost_part(self.cumulative_usage, step_index, model)
            if cost is not None:
                yield cost
        calls = turn.tool_calls()
        assistant = recorded.message if recorded else turn.assistant_message(calls)
        self.leg.append(assistant)
        recorder: StepRecorder | None = None
        if recorded is not None and self._journal is not None:
            recorder = StepRecorder(
                self._journal, self._journaled_run_id, recorded, self.tools
            )
        elif calls and self._journal is not None:
            # Durable before any tool runs, so a resume reuses this turn.
            recorder = await StepRecorder.record(
                self._journal,
                self._journaled_run_id,
                step_index,
                basis,
                assistant,
                self.tools,
            )
        if not calls:
            # R3.6/R3.7: no tool_use parts means a natural completion, whatever the reason.
            self.leg.record(turn, calls, (), (assistant,))
            async for part in self._end("completed"):
                yield part
            return
        async for part in self._tool_phase(turn, calls, assistant, model, recorder):
            yield part

    def _step_finish(self, step_index: int, turn: Turn) -> StepFinishPart:
        """R3.5.6: the model call's usage joins the leg's; its reason is the leg's so far."""
        self.leg.add_usage(turn.step_usage)
        self.leg.finish_reason = turn.finish_reason or "stop"
        return StepFinishPart(step_index, self.leg.finish_reason, turn.step_usage)

    async def _prepare(self, step_index: int) -> tuple[LanguageModel, ModelRequest]:
        """R3.11: ``prepare_step`` may rewrite the history, and pick tools or model."""
        options = self.options
        model = options.model
        definitions = tool_definitions(self.tools, None, self.deps.logger)
        tool_choice = None
        if options.prepare_step is not None:
            info = PrepareStepInfo(
                step_index=step_index,
                messages=self.leg.history,
                usage=self.cumulative_usage,
            )
            overrides = step_overrides(await resolve(options.prepare_step(info)))
            if overrides is not None:
                if overrides.messages is not None:
                    self.leg.history = coerce_messages(overrides.messages)
                if overrides.active_tools is not None:
                    definitions = tool_definitions(
                        self.tools, overrides.active_tools, self.deps.logger
                    )
                tool_choice = overrides.tool_choice
                model = overrides.model or model
        return model, ModelRequest(
            messages=self.leg.history,
            tools=definitions,
            tool_choice=tool_choice,
            # R2.3: the reference's ``(maxToolConcurrency || 5) > 1``.
            parallel_tool_calls=(options.max_tool_concurrency or 5) > 1,
            signal=options.signal,
        )

    async def _tool_phase(
        self,
        turn: Turn,
        calls: tuple[ToolCall, ...],
        assistant: Message,
        model: LanguageModel,
        recorder: StepRecorder | None,
    ) -> AsyncIterator[StreamPart]:
        """R3.8: gate the calls, then break or execute, then the guard and stop checks."""
        for call in calls:
            yield ToolCallPart(call.tool_call_id, call.tool_name, call.args)
            yield ToolStatePart(call.tool_call_id, "input-complete", call.tool_name)
        denials, gated = await gate(
            calls,
            self.tools,
            self.leg.history,
            self.options.signal,
            self.options.approve_tool_call,
        )
        if gated or any(is_client_tool(self.tools, c.tool_name) for c in calls):
            # R5.5: nothing in the batch runs; only the gated calls go out as requests.
            self.leg.record(turn, calls, (), (assistant,))
            requests = sign_requests(
                pending_requests(gated, self.options.agent_path, self.tools),
                self.options.approval_signer,
                self._binding_run_id,
                self.deps,
            )
            async for part in self._suspend(requests, awaiting=gated):
                yield part
            return
        results: list[ToolResult] = []
        try:
            async for part in self._execute(calls, denials, results, False, recorder):
                yield part
        except SubAgentSuspension as suspension:
            self.leg.record(turn, calls, (), (assistant,))
            async for part in self._suspend(suspension.requests):
                yield part
            return
        if len(results) < len(calls):
            self.leg.record(turn, calls, (), (assistant,))
            async for part in self._suspend_in_doubt(calls, results):
                yield part
            return
        answer = tool_message(results)
        self.leg.append(answer)
        self.leg.record(turn, calls, tuple(results), (assistant, answer))
        if self._guard.record(results, denials):
            async for part in self._end("completed"):
                yield part
            return
        elapsed_ms = self.deps.clock.now() - self._started_at
        self.leg.stopped_by = self._stops.first_tripped(
            self.leg.steps, self.cumulative_usage, elapsed_ms, model
        )
        if self.leg.stopped_by is not None:
            async for part in self._end("completed"):
                yield part
            return
        await self._save("running")

    async def _suspend(
        self,
        requests: tuple[ToolApprovalRequest, ...],
        *,
        awaiting: Sequence[ToolCall] = (),
    ) -> AsyncIterator[StreamPart]:
        """B7–B9: the requests go out, the suspended checkpoint is saved, the leg ends
        (R5.8, R9.8)."""
        for call in awaiting:
            yield ToolStatePart(call.tool_call_id, "awaiting-approval", call.tool_name)
        for request in requests:
            yield ToolApprovalRequestPart(request)
        self.leg.pending = requests or None
        async for part in self._end("suspended", requests):
            yield part

    async def _suspend_in_doubt(
        self, calls: Sequence[ToolCall], results: Sequence[ToolResult]
    ) -> AsyncIterator[StreamPart]:
        """Calls that started before a crash and left no outcome, of tools that are not
        safe to repeat and could not tell what became of them, are never re-run
        silently: each becomes a pending approval, which a person settles ("it
        happened", "run it again", "mark it failed")."""
        answered = {r.tool_call_id for r in results}
        in_doubt = [c for c in calls if c.tool_call_id not in answered]
        requests = sign_requests(
            pending_requests(in_doubt, self.options.agent_path, {}),
            self.options.approval_signer,
            self._binding_run_id,
            self.deps,
        )
        async for part in self._suspend(requests, awaiting=in_doubt):
            yield part

    async def _end(
        self,
        status: CheckpointStatus,
        pending: tuple[ToolApprovalRequest, ...] | None = None,
    ) -> AsyncIterator[StreamPart]:
        """The last boundary of the leg, saved before the ``finish`` part (R6.5)."""
        await self._save(status, pending)
        yield self.leg.finish_part()
        self._ended = True

    # -- tool execution -------------------------------------------------------------------

    async def _execute(
        self,
        calls: Sequence[ToolCall],
        denials: dict[str, Denial],
        results: list[ToolResult],
        resumed: bool,
        recorder: StepRecorder | None = None,
    ) -> AsyncIterator[StreamPart]:
        """Run the batch; an in-doubt call (see :class:`StepRecorder`) that its tool's
        ``reconcile`` cannot settle is left out, so ``results`` then holds fewer results
        than there are calls."""
        options = self.options
        checkpointer = self._checkpointer
        shared = ToolContext(  # R1.13: what every call of the batch sees of the leg
            tool_call_id="",
            tool_name="",
            messages=self.leg.history,
            signal=options.signal,
            deps=self.deps,
            agent_path=options.agent_path,
            approve_tool_call=options.approve_tool_call,
            report_usage=self.leg.add_usage,
            session=DurableSession(checkpointer.store, checkpointer.run_id)
            if checkpointer
            else None,
            approval_responses=options.approval_responses,
            approval_signer=options.approval_signer,
            approval_max_age_ms=options.approval_max_age_ms,
            root_run_id=self._binding_run_id,
            resumed=resumed,
            idempotency_scope=self._idempotency_scope,
        )
        if recorder is not None:
            calls = await reconcile_in_doubt(
                calls, self.tools, denials, shared, recorder
            )
        async for part in stream_batch(
            calls,
            self.tools,
            denials,
            shared,
            self.deps,
            max_concurrency=options.max_tool_concurrency,
            signal=options.signal,
            results=results,
            recorder=recorder,
        ):
            yield part

    # -- bookkeeping ----------------------------------------------------------------------

    @property
    def _binding_run_id(self) -> str | None:
        """The run id tokens bind: the root run's, also for sub-agents (D2)."""
        if self._checkpointer is None:
            return None
        return self.options.root_run_id or self.run_id

    @property
    def _journaled_run_id(self) -> str:
        assert self._checkpointer is not None
        return self._checkpointer.run_id

    async def _settle_recorder(self) -> StepRecorder | None:
        """The journal of the step whose turn the settle answers (its latest)."""
        if self._journal is None:
            return None
        trailing = next(
            (m for m in reversed(self.leg.history) if m.role == "assistant"), None
        )
        step = await latest_for(self._journal, self._journaled_run_id, trailing)
        if step is None:
            return None
        return StepRecorder(self._journal, self._journaled_run_id, step, self.tools)

    async def _fence(self) -> None:
        if self.deps.fence is not None:
            await self.deps.fence()

    async def _save(
        self,
        status: CheckpointStatus,
        pending: tuple[ToolApprovalRequest, ...] | None = None,
    ) -> None:
        if self._checkpointer is not None:
            await self._checkpointer.save(
                status, self.leg.history, self.leg.usage, pending
            )
