"""The agentic tool loop: one engine that streams canonical parts (SPEC §2–§6).

``generate_text`` drains this engine and ``stream_chat`` hands its parts out, so both entry
points share every rule by construction. A :class:`LoopRun` is one leg of a run: settle any
verdicts, then step — model call, approval gate, tool batch, stop checks, checkpoint — until
the model answers, a stop condition fires, or the run suspends.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

from .. import tracing
from ..durable.step_journal import JournalStep
from ..messages import Message
from ..model import LanguageModel, ModelRequest
from ..parts import (
    ErrorPart,
    StepFinishPart,
    StepStartPart,
    StreamPart,
    ToolCallPart,
    ToolStatePart,
)
from ..tools import ToolCall, ToolResult
from . import abortable
from .approval import gate, is_client_tool
from .boundaries import LegBoundaries
from .execution import tool_message
from .journaling import StepRecorder, load_step, settle_recorder
from .options import step_request
from .session import start_leg
from .settle import plan_settle
from .single_turn import single_turn
from .steering import InputTaker, delivered_part
from .turn import Turn


class LoopRun(LegBoundaries):
    """One leg. Iterate :meth:`stream` once; then read :meth:`result`."""

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

    # -- the leg --------------------------------------------------------------------------

    async def _drive(self) -> AsyncIterator[StreamPart]:
        self._started_at = self.deps.clock.now()
        if not self.agentic:
            async for part in single_turn(self.options, self.leg, self._fence):
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
        """Load what the leg continues from and set up its checkpointer (R7.2, D9)."""
        started = await start_leg(self.options, self.run_id, self.deps)
        if started.history is not None:
            self.leg.history = started.history
        if started.start is not None:
            self._base_step_index = started.start.step_index
            self._meter.start_from(started.start.usage, self.options.model)
        self._checkpointer, self._journal = started.checkpointer, started.journal
        if started.inputs is not None and started.checkpointer is not None:
            self._inputs = InputTaker(
                started.inputs,
                started.checkpointer.run_id,
                self.options.interrupt,
                self.deps.logger,
            )

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
        recorder = (
            None
            if self._journal is None
            else await settle_recorder(
                self._journal, self._journaled_run_id, self.leg.history, self.tools
            )
        )
        results: list[ToolResult] = []
        # B9: a suspension here leaves the history as it was; the leg ends before any step.
        async for part in self._run_or_suspend(
            plan.calls,
            plan.executed_calls(),
            plan.denials,
            results,
            recorder,
            resumed=True,
        ):
            yield part
        if self._ended:
            return
        self.leg.append(tool_message(results))
        self._guard.record(results, plan.denials)  # R3.17: settle alone never stops

    # -- one step -------------------------------------------------------------------------

    async def _step(self) -> AsyncIterator[StreamPart]:
        step_index = self._base_step_index + len(self.leg.steps)
        yield StepStartPart(step_index)
        model, request, self.leg.history = await step_request(
            self.options,
            step_index,
            self.leg.history,
            lambda: self.cumulative_usage,
            self.deps.logger,
        )
        recorded = (
            await load_step(self._journal, self._journaled_run_id, step_index)
            if self._journal is not None
            else None
        )
        if self._inputs is not None:
            before = len(self.leg.history)
            async for part in self._deliver(step_index, recorded):
                yield part
            if (
                len(self.leg.history) != before
            ):  # a step with no input keeps its request
                request = replace(request, messages=self.leg.history)
        basis = len(self.leg.history)
        if recorded is not None and recorded.basis != basis:
            recorded = None  # a turn is only reused on the history it answered
        if recorded is not None:
            # The turn is in the step journal: the model answered it before a crash.
            turn, parts = Turn.replay(recorded.message)
            for part in parts:
                yield part
        else:
            turn = Turn()
            try:
                async for part in self._model_turn(step_index, turn, model, request):
                    yield part
            except abortable.Interrupted:
                # Discarded: not recorded, nothing runs; the step starts over (the
                # same index: a reader drops what it showed of it) with the input.
                yield StepFinishPart(step_index, "aborted", turn.step_usage)
                return
        yield self._step_finish(step_index, turn)
        if self._meter.enabled:
            cost = self._meter.cost_part(self.cumulative_usage, step_index, model)
            if cost is not None:
                yield cost
        calls = turn.tool_calls()
        assistant = recorded.message if recorded else turn.assistant_message(calls)
        self.leg.append(assistant)
        # Every turn is journaled, a final answer too: each step is a fork point.
        recorder = await self._step_recorder(recorded, step_index, basis, assistant)
        if not calls:
            # R3.6/R3.7: no tool_use parts means a natural completion, whatever the reason.
            self.leg.record(turn, calls, (), (assistant,))
            async for part in self._end("completed"):
                yield part
            return
        async for part in self._tool_phase(turn, calls, assistant, model, recorder):
            yield part

    async def _deliver(
        self, step_index: int, recorded: JournalStep | None
    ) -> AsyncIterator[StreamPart]:
        """The queued input, as user messages just before the step's model call."""
        assert self._inputs is not None
        for queued in await self._inputs.take(len(self.leg.history), recorded):
            self.leg.append(queued.message())
            yield delivered_part(queued, step_index)

    async def _model_turn(
        self, step_index: int, turn: Turn, model: LanguageModel, request: ModelRequest
    ) -> AsyncIterator[StreamPart]:
        """The model's answer to the step's request, streamed into ``turn``."""
        await self._fence()
        interrupter = self._inputs.interrupter if self._inputs is not None else None
        events = abortable.model_events(
            model,
            request,
            self.options.signal,
            None if interrupter is None else interrupter.begin_turn(),
        )
        try:
            async for event in tracing.chat(events, model):
                for part in turn.add(event):
                    yield part
        except abortable.Aborted:
            # D1: the aborted step is reported, but never recorded or checkpointed.
            yield self._step_finish(step_index, turn)
            raise
        finally:
            if interrupter is not None:
                interrupter.end_turn()

    async def _step_recorder(
        self,
        recorded: JournalStep | None,
        step_index: int,
        basis: int,
        assistant: Message,
    ) -> StepRecorder | None:
        """The step's record in the journal: the one replayed, or — durable before any
        tool runs, so a resume reuses this turn — the turn just made."""
        if self._journal is None:
            return None
        if recorded is not None:
            return StepRecorder(
                self._journal, self._journaled_run_id, recorded, self.tools
            )
        return await StepRecorder.record(
            self._journal,
            self._journaled_run_id,
            step_index,
            basis,
            assistant,
            self.tools,
        )

    def _step_finish(self, step_index: int, turn: Turn) -> StepFinishPart:
        """R3.5.6: the model call's usage joins the leg's; its reason is the leg's so far."""
        self.leg.add_usage(turn.step_usage)
        self.leg.finish_reason = turn.finish_reason or "stop"
        return StepFinishPart(step_index, self.leg.finish_reason, turn.step_usage)

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
            async for part in self._suspend(
                self._requests(gated, self.tools), awaiting=gated
            ):
                yield part
            return
        results: list[ToolResult] = []
        async for part in self._run_or_suspend(
            calls, calls, denials, results, recorder, resumed=False
        ):
            yield part
        if self._ended:
            self.leg.record(turn, calls, (), (assistant,))
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
            self.leg.steps, lambda: self.cumulative_usage, elapsed_ms, model
        )
        if self.leg.stopped_by is not None:
            async for part in self._end("completed"):
                yield part
            return
        await self._save("running")
