"""A leg's state and its boundaries: a batch of tool calls run (or the leg suspended on
what it waits for), checkpoints saved, the leg ended (SPEC R3.13–R3.16, R5.5–R5.8, R6.5).

:class:`~.engine.LoopRun` drives the steps on top of it; the split keeps how a leg
*moves* (settle, model turn, gate) apart from how it *stops* and what it writes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence

from ..approvals import ToolApprovalRequest
from ..durable._checkpointer import Checkpointer
from ..durable.checkpoint import CheckpointStatus
from ..durable.session import DurableSession
from ..durable.step_journal import StepJournal
from ..exceptions import InputArrived
from ..parts import StreamPart, ToolApprovalRequestPart, ToolStatePart
from ..results import GenerateTextResult
from ..tools import Tool, ToolCall, ToolContext, ToolResult
from ..usage import Usage, with_total
from .approval import Denial, signed_requests
from .batch_stream import stream_batch
from .execution import SubAgentSuspension, reconcile_in_doubt
from .journaling import StepRecorder
from .leg import LegRecord
from .limits import PriceMeter, RunawayGuard, StopConditions
from .options import LoopOptions
from .steering import InputTaker


class LegBoundaries:
    """One leg's state, and the ways it reaches a boundary."""

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
        self._inputs: InputTaker | None = None
        self._base_step_index = 0
        self._started_at = 0.0
        self._guard = RunawayGuard()
        self._meter = PriceMeter(self.deps)
        self._stops = StopConditions(
            options.max_steps, options.stop_when, self._meter, self.deps
        )

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

    async def _run_or_suspend(
        self,
        asked: Sequence[ToolCall],
        executed: Sequence[ToolCall],
        denials: dict[str, Denial],
        results: list[ToolResult],
        recorder: StepRecorder | None,
        *,
        resumed: bool,
    ) -> AsyncIterator[StreamPart]:
        """Run the batch (``executed``: the calls as they run — a settle's with the
        edits and answers people gave; ``asked``: as the model made them) into
        ``results``, or end the leg suspended: on a sub-agent's requests, or on calls
        that started before a crash and left no outcome, of tools that are not safe to
        repeat and could not tell what became of them — never re-run silently, each
        becomes a pending approval a person settles ("it happened", "run it again",
        "mark it failed"), asked about as the model made it, which its token pins."""
        shared = self._batch_context(resumed)
        suspended: SubAgentSuspension | None = None
        try:
            if recorder is not None:
                # An in-doubt call (see :class:`StepRecorder`) its tool's ``reconcile``
                # cannot settle is left out: ``results`` then misses its result.
                executed = await reconcile_in_doubt(
                    executed, self.tools, denials, shared, recorder
                )
            async for part in stream_batch(
                executed,
                self.tools,
                denials,
                shared,
                self.deps,
                max_concurrency=self.options.max_tool_concurrency,
                signal=self.options.signal,
                results=results,
                recorder=recorder,
            ):
                yield part
        except SubAgentSuspension as suspension:
            suspended = suspension
        if suspended is not None:
            # Outside the ``except``: a sub-agent's suspension is a normal end, and
            # what saving it sets off (signals, notifications, their tasks' logs)
            # must not see it as an exception being handled.
            async for part in self._suspend(suspended.requests):
                yield part
            return
        answered = {r.tool_call_id for r in results}
        in_doubt = [c for c in asked if c.tool_call_id not in answered]
        if in_doubt:
            async for part in self._suspend(
                self._requests(in_doubt, {}), awaiting=in_doubt
            ):
                yield part

    def _requests(
        self, calls: Sequence[ToolCall], tools: Mapping[str, Tool]
    ) -> tuple[ToolApprovalRequest, ...]:
        """One signed request per call (R5.7)."""
        return signed_requests(
            calls, self.options, tools, self._binding_run_id, self.deps
        )

    async def _end(
        self,
        status: CheckpointStatus,
        pending: tuple[ToolApprovalRequest, ...] | None = None,
    ) -> AsyncIterator[StreamPart]:
        """The last boundary of the leg, saved before the ``finish`` part (R6.5) — unless
        the store refuses to complete a run that has input to answer: the boundary is
        saved ``running`` and the leg takes one more step, which delivers it (stop
        conditions bound what the model does on its own, not what a person asks)."""
        try:
            await self._save(status, pending)
        except InputArrived:
            self.leg.stopped_by = None
            await self._save("running")
            return
        yield self.leg.finish_part()
        self._ended = True

    # -- tool execution -------------------------------------------------------------------

    def _batch_context(self, resumed: bool) -> ToolContext:
        """R1.13: what every call of a batch sees of the leg (``resumed``: a settle's
        calls, from the checkpoint's history)."""
        options = self.options
        checkpointer = self._checkpointer
        return ToolContext(
            tool_call_id="",
            tool_name="",
            messages=self.leg.history,
            signal=options.signal,
            deps=self.deps,
            agent_path=options.agent_path,
            approve_tool_call=options.approve_tool_call,
            report_usage=self.leg.add_usage,
            session=None
            if checkpointer is None
            else DurableSession(checkpointer.store, checkpointer.run_id),
            approval_responses=options.approval_responses,
            approval_signer=options.approval_signer,
            approval_max_age_ms=options.approval_max_age_ms,
            root_run_id=self._binding_run_id,
            resumed=resumed,
            idempotency_scope=self._idempotency_scope,
        )

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
