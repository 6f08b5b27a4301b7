"""The two entry points, ``generate_text`` and ``stream_chat``, over one engine.

``generate_text`` drains the engine into a :class:`GenerateTextResult`; ``stream_chat``
returns a :class:`StreamChatResult` at once, whose work starts when something pulls on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Required, TypedDict, Unpack

from ._loop.engine import LoopRun
from ._loop.options import PrepareStep, ResumeSource, fresh_options, loop_options
from .abort import AbortSignal, TurnInterrupter
from .approvals import ApprovalSignerLike, ToolApprovalResponse
from .deps import Deps
from .durable.session import DurableSession
from .exceptions import InvalidInputError
from .messages import Message
from .model import LanguageModel
from .parts import ErrorPart, StreamPart, TextDeltaPart
from .results import GenerateTextResult
from .stop import StopCondition
from .tools import ServerApprover, Tool, ToolSet
from .usage import FinishReason, Usage


class CallOptions(TypedDict, total=False):
    """Options every loop call takes, resume legs included.

    A typing aid: the options themselves (defaults, checks) are declared once, as fields of
    the loop's options; a test keeps these keys the same.
    """

    model: Required[LanguageModel]
    tools: ToolSet | Sequence[Tool] | None
    max_steps: int
    stop_when: StopCondition | Sequence[StopCondition] | None
    prepare_step: PrepareStep | None
    approve_tool_call: ServerApprover | None
    approval_responses: Sequence[ToolApprovalResponse | dict[str, Any]] | None
    approval_signer: ApprovalSignerLike | None
    approval_max_age_ms: float | None
    max_tool_concurrency: int
    signal: AbortSignal | None
    interrupt: TurnInterrupter | None
    deps: Deps | None


class GenerateOptions(CallOptions, total=False):
    """A fresh call also takes ``messages`` or ``prompt``, ``system`` and ``session``."""

    messages: Sequence[Message | dict[str, Any]]
    prompt: str
    system: str | None
    session: DurableSession | None


async def drain(run: LoopRun) -> GenerateTextResult:
    async for _ in run.stream():
        pass
    return run.result()


async def generate_text(**options: Unpack[GenerateOptions]) -> GenerateTextResult:
    """Run the loop to the end of this leg and return its buffered result.

    A failure (model error, hook error) is raised; a suspension is not a failure — read
    ``result.pending_approvals``.
    """
    return await drain(LoopRun(fresh_options(dict(options))))


def stream_chat(**options: Unpack[GenerateOptions]) -> StreamChatResult:
    """Start a streaming leg; returns at once with ``run_id`` set (on durable calls).

    Invalid options surface as an ``error`` part and rejected awaitables, never a raise.
    """
    try:
        run = LoopRun(fresh_options(dict(options)))
    except (InvalidInputError, TypeError) as error:
        return StreamChatResult.failed(error, run_id=_session_run_id(options))
    return StreamChatResult(run)


def _session_run_id(options: Any) -> str | None:
    session = options.get("session") if isinstance(options, dict) else None
    return session.run_id if isinstance(session, DurableSession) else None


def resume_run(store: Any, run_id: str, options: dict[str, Any]) -> LoopRun:
    """A leg that resumes ``run_id`` from ``store`` (the checkpoint loads when it starts)."""
    options = {**options, "approval_responses": options.get("approval_responses") or ()}
    return LoopRun(
        loop_options(
            options,
            fresh=False,
            messages=(),
            resume_source=ResumeSource(store, run_id),
        )
    )


class StreamChatResult:
    """A streaming leg: iterate ``full_stream`` or ``text_stream``, await the rest.

    Work starts on the first pull (iteration, an awaited property, or :meth:`consume`) and
    runs in its own task, so it keeps going — and keeps checkpointing — when a reader stops
    reading. Several readers may iterate; each sees every part from the start.
    """

    def __init__(self, run: LoopRun | None, *, run_id: str | None = None) -> None:
        self._run = run
        self.run_id: str | None = run.run_id if run is not None else run_id
        self._parts: list[StreamPart] = []
        self._finished = False
        self._wakeup: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._outcome: asyncio.Future[GenerateTextResult] | None = None
        self._failure: BaseException | None = None
        self._driven = False

    @classmethod
    def failed(
        cls, error: BaseException, *, run_id: str | None = None
    ) -> StreamChatResult:
        result = cls(None, run_id=run_id)
        result._parts.append(ErrorPart(error))
        result._failure = error
        result._finished = True
        return result

    # -- pulling --------------------------------------------------------------------------

    def _start(self) -> None:
        if (
            self._task is None
            and not self._driven
            and not self._finished
            and self._run is not None
        ):
            self._task = asyncio.ensure_future(self._pump(self._run))

    async def _pump(self, run: LoopRun) -> None:
        async for _ in self._produce(run):
            pass

    async def _produce(self, run: LoopRun) -> AsyncIterator[StreamPart]:
        try:
            async for part in run.stream():
                self._parts.append(part)
                self._wake()
                yield part
        except GeneratorExit:
            raise
        except BaseException as error:
            self._failure = error
            raise
        finally:
            self._finished = True
            self._wake()
            self._settle_outcome()

    def drive(self) -> AsyncIterator[StreamPart]:
        """Run the leg in the calling task and yield its parts, with no background task.

        For a caller that owns the leg's lifetime (the Django run service): one task
        switch less per part. Iterate it to the end; other readers still see every part.
        Only before the leg started (else ``RuntimeError``).
        """
        if self._run is None:
            return self._iterate()  # a leg that failed before starting: its error part
        if self._task is not None or self._driven:
            raise RuntimeError("this leg already started; read full_stream instead")
        self._driven = True
        return self._produce(self._run)

    def _wake(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)
        self._wakeup = None

    def _settle_outcome(self) -> None:
        if self._outcome is None or self._outcome.done():
            return
        try:
            self._outcome.set_result(self._result())
        except BaseException as error:
            self._outcome.set_exception(error)

    def _result(self) -> GenerateTextResult:
        if self._failure is not None:
            raise self._failure
        assert self._run is not None
        return self._run.result()

    async def _iterate(self) -> AsyncIterator[StreamPart]:
        self._start()
        index = 0
        while True:
            while index < len(self._parts):
                yield self._parts[index]
                index += 1
            if self._finished:
                return
            if self._wakeup is None:
                self._wakeup = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._wakeup)

    @property
    def full_stream(self) -> AsyncIterator[StreamPart]:
        """Every canonical part of the leg, from the first."""
        return self._iterate()

    @property
    def text_stream(self) -> AsyncIterator[str]:
        """The text deltas only; raises the leg's error when it meets an ``error`` part."""

        async def texts() -> AsyncIterator[str]:
            async for part in self._iterate():
                if isinstance(part, TextDeltaPart):
                    yield part.text
                elif isinstance(part, ErrorPart):
                    raise part.error

        return texts()

    def result(self) -> asyncio.Future[GenerateTextResult]:
        """The leg's buffered result (what ``generate_text`` would have returned)."""
        if self._outcome is None:
            self._outcome = asyncio.get_running_loop().create_future()
            if self._finished:
                self._settle_outcome()
            else:
                self._start()
        return self._outcome

    @property
    def usage(self) -> Awaitable[Usage]:
        return self._field(lambda r: r.usage)

    @property
    def finish_reason(self) -> Awaitable[FinishReason]:
        return self._field(lambda r: r.finish_reason)

    @property
    def text(self) -> Awaitable[str]:
        return self._field(lambda r: r.text)

    def _field[T](self, pick: Callable[[GenerateTextResult], T]) -> asyncio.Future[T]:
        outcome = self.result()
        field: asyncio.Future[T] = asyncio.get_running_loop().create_future()

        def copy(done: asyncio.Future[GenerateTextResult]) -> None:
            if field.cancelled():
                return
            if done.cancelled():
                field.cancel()
            elif (error := done.exception()) is not None:
                field.set_exception(error)
            else:
                field.set_result(pick(done.result()))

        outcome.add_done_callback(copy)
        return field

    async def consume(self) -> None:
        """Drain the leg; never raises (the failure stays on the awaitables)."""
        async for _ in self._iterate():
            pass
