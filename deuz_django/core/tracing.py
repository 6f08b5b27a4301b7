"""OpenTelemetry spans for runs, following the GenAI semantic conventions.

With ``opentelemetry-api`` installed (the ``otel`` extra) and a tracer provider set, a leg
is an ``invoke_agent {agent}`` span, each step a ``step`` span under it, each model call a
``chat {model}`` span and each tool call an ``execute_tool {tool}`` span under their step::

    invoke_agent support            gen_ai.conversation.id = run id, deuz.run.status
      step                          deuz.step.index, deuz.step.finish_reason
        chat gpt-4.1                gen_ai.request.model, gen_ai.usage.input_tokens, …
        execute_tool lookup_order   gen_ai.tool.name, gen_ai.tool.call.id
          invoke_agent researcher   (a sub-agent nests under its tool call)

Without the package nothing is imported, and without a tracer provider the wrappers hand
back what they were given: a run pays nothing for tracing it does not use.

A durable run keeps one trace across legs: :func:`run_trace` joins the trace a run stored
(a W3C ``traceparent``) or reports the one its first leg started, and
:func:`record_approval` adds the wait for a person as an ``await_approval {tool}`` span.
Spans are made current only while the wrapped code runs up to its next part, never across
a ``yield``, so a consumer's own spans are never parented by a half-finished step.
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .mcp._server import MCPTool
from .parts import (
    ErrorPart,
    FinishPart,
    StepFinishPart,
    StepStartPart,
    StreamPart,
    ToolApprovalRequestPart,
)
from .tools import Tool, ToolCall, ToolResult
from .usage import Usage

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import (
        TraceContextTextMapPropagator,
    )

    INSTALLED = True
except ImportError:  # the ``otel`` extra is not installed: no tracing at all
    INSTALLED = False

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span

    from .model import LanguageModel, ModelEvent

__all__ = [
    "RunTrace",
    "chat",
    "execute_tool",
    "invoke_agent",
    "record_approval",
    "run_trace",
    "step",
]

TRACER_NAME = "deuz_django"


@dataclass(slots=True)
class RunTrace:
    """The trace of the run being driven: the ``traceparent`` it joins, or — after its
    first leg started — the one that leg began (``started``), for the caller to store."""

    agent: str | None
    traceparent: str = ""
    started: bool = False


_run: contextvars.ContextVar[RunTrace | None] = contextvars.ContextVar(
    "deuz_run_trace", default=None
)


def _tracing() -> bool:
    """Whether spans would be recorded: the API is installed and a provider was set."""
    if not INSTALLED:
        return False
    return not isinstance(
        trace.get_tracer_provider(),
        trace.ProxyTracerProvider | trace.NoOpTracerProvider,
    )


def _start(name: str, attributes: dict[str, Any], **options: Any) -> Span:
    return trace.get_tracer(TRACER_NAME).start_span(
        name, attributes=attributes, **options
    )


@contextmanager
def _current(span: Span) -> Iterator[None]:
    """``span`` is the current span for the duration (in this task only)."""
    token = otel_context.attach(trace.set_span_in_context(span))
    try:
        yield
    finally:
        otel_context.detach(token)


def _fail(span: Span, exc: BaseException) -> None:
    span.set_attribute("error.type", type(exc).__qualname__)
    span.record_exception(exc)
    span.set_status(trace.StatusCode.ERROR, str(exc) or type(exc).__qualname__)


def _usage(span: Span, usage: Usage) -> None:
    span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)


def _provider(model: LanguageModel) -> str:
    return str(getattr(model, "provider", None) or type(model).__name__)


async def _close(iterator: AsyncIterator[Any]) -> None:
    """Close the wrapped generator now, as closing it unwrapped would (not at GC)."""
    closer = getattr(iterator, "aclose", None)
    if closer is not None:
        await closer()


type _Watch[Item] = tuple[Span, Callable[[Item], None]]


async def _within[Item](
    begin: Callable[[], _Watch[Item]], items: AsyncIterator[Item]
) -> AsyncIterator[Item]:
    """``items`` inside the span ``begin`` starts when the first one is asked for: each
    is produced with the span current (so what it starts nests under it) and shown to
    the watcher ``begin`` returned with the span; the span ends with the items, failed if
    they raise."""
    span, see = begin()
    try:
        while True:
            with _current(span):
                item = await anext(items, None)
            if item is None:
                break
            see(item)
            yield item
    except GeneratorExit:  # the consumer stopped reading: not a failure
        raise
    except BaseException as exc:
        _fail(span, exc)
        raise
    finally:
        await _close(items)
        span.end()


def _traceparent(span: Span) -> str:
    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier, trace.set_span_in_context(span))
    return carrier.get("traceparent", "")


def _parent(traceparent: str) -> Context | None:
    if not traceparent:
        return None
    return TraceContextTextMapPropagator().extract({"traceparent": traceparent})


# -- the run ---------------------------------------------------------------------------------


@contextmanager
def run_trace(traceparent: str, *, agent: str | None = None) -> Iterator[RunTrace]:
    """Drive a leg of a run inside its trace: the legs started here become children of
    ``traceparent`` (what an earlier leg stored); with ``""`` the first leg starts the
    trace and the yielded :class:`RunTrace` says so (``started``, ``traceparent``)."""
    run = RunTrace(agent, traceparent)
    token = _run.set(run)
    try:
        yield run
    finally:
        _run.reset(token)


def invoke_agent(
    parts: AsyncIterator[StreamPart],
    *,
    model: LanguageModel,
    run_id: str | None,
    agent_path: Sequence[str],
    resumed: bool,
) -> AsyncIterator[StreamPart]:
    """A leg's parts inside its ``invoke_agent`` span (a sub-agent's leg is named after
    the sub-agent, a root leg after the agent :func:`run_trace` names)."""
    if not _tracing():
        return parts
    return _invoke_agent(parts, model, run_id, tuple(agent_path), resumed)


def _invoke_agent(
    parts: AsyncIterator[StreamPart],
    model: LanguageModel,
    run_id: str | None,
    agent_path: tuple[str, ...],
    resumed: bool,
) -> AsyncIterator[StreamPart]:
    def begin() -> _Watch[StreamPart]:
        run = _run.get()
        agent = agent_path[-1] if agent_path else (run.agent if run else None)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": _provider(model),
            "gen_ai.request.model": model.model_id,
            "deuz.leg.resumed": resumed,
        }
        if agent:
            attributes["gen_ai.agent.name"] = agent
        if run_id:
            attributes["gen_ai.conversation.id"] = run_id
            attributes["deuz.run.id"] = run_id
        root = run is not None and not agent_path
        parent = _parent(run.traceparent) if root and run is not None else None
        span = _start(
            f"invoke_agent {agent}" if agent else "invoke_agent",
            attributes,
            context=parent,
        )
        if root and run is not None and not run.traceparent:
            run.traceparent, run.started = _traceparent(span), True
        pending: list[str] = []

        def see(part: StreamPart) -> None:
            if isinstance(part, ToolApprovalRequestPart):
                pending.append(part.request.tool_name)
            elif isinstance(part, FinishPart):
                _usage(span, part.usage)
                span.set_attribute("deuz.leg.finish_reason", part.finish_reason)
                status = "suspended" if pending else "completed"
                if part.finish_reason == "aborted":
                    status = "aborted"
                span.set_attribute("deuz.run.status", status)
                if pending:
                    span.add_event("suspended", {"deuz.approval.tools": pending})
            elif isinstance(part, ErrorPart):
                _fail(span, part.error)
                span.set_attribute("deuz.run.status", "failed")

        return span, see

    return _within(begin, parts)


# -- one step and its calls ------------------------------------------------------------------


def step(parts: AsyncIterator[StreamPart]) -> AsyncIterator[StreamPart]:
    """A step's parts inside its ``step`` span (the model call and its tool batch)."""
    return _step(parts) if _tracing() else parts


def _step(parts: AsyncIterator[StreamPart]) -> AsyncIterator[StreamPart]:
    def begin() -> _Watch[StreamPart]:
        span = _start("step", {})

        def see(part: StreamPart) -> None:
            if isinstance(part, StepStartPart):
                span.set_attribute("deuz.step.index", part.step_index)
            elif isinstance(part, StepFinishPart):
                span.set_attribute("deuz.step.finish_reason", part.finish_reason)
                _usage(span, part.usage)

        return span, see

    return _within(begin, parts)


def chat(
    events: AsyncIterator[ModelEvent], model: LanguageModel
) -> AsyncIterator[ModelEvent]:
    """A model call's events inside its ``chat {model}`` span."""
    return _chat(events, model) if _tracing() else events


def _chat(
    events: AsyncIterator[ModelEvent], model: LanguageModel
) -> AsyncIterator[ModelEvent]:
    def begin() -> _Watch[ModelEvent]:
        span = _start(
            f"chat {model.model_id}",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": _provider(model),
                "gen_ai.request.model": model.model_id,
            },
            kind=trace.SpanKind.CLIENT,
        )

        def see(event: ModelEvent) -> None:
            if isinstance(event, FinishPart):
                # The adapters do not report a dated model name; it is the one asked for.
                span.set_attribute("gen_ai.response.model", model.model_id)
                span.set_attribute(
                    "gen_ai.response.finish_reasons", (event.finish_reason,)
                )
                _usage(span, event.usage)

        return span, see

    return _within(begin, events)


async def execute_tool(
    call: ToolCall,
    work: Awaitable[ToolResult],
    *,
    tool: Tool | None,
    suspension: type[BaseException],
) -> ToolResult:
    """Await one tool call's outcome inside its ``execute_tool {tool}`` span; a result
    marked ``is_error`` (a failure, a denial, a timeout) sets the span's error status, a
    ``suspension`` (a sub-agent waiting for approval) does not."""
    if not _tracing():
        return await work
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.tool_name,
        "gen_ai.tool.call.id": call.tool_call_id,
        "gen_ai.tool.type": "extension" if isinstance(tool, MCPTool) else "function",
    }
    if isinstance(tool, MCPTool):
        attributes["deuz.mcp.server"] = tool.server
        attributes["deuz.mcp.tool"] = tool.remote_name
    span = _start(f"execute_tool {call.tool_name}", attributes)
    try:
        with _current(span):
            result = await work
        if result.is_error:
            span.set_attribute("error.type", "tool_error")
            span.set_status(trace.StatusCode.ERROR, str(result.result)[:500])
        return result
    except BaseException as exc:
        if isinstance(exc, suspension):
            span.set_attribute("deuz.tool.suspended", True)
        else:
            _fail(span, exc)
        raise
    finally:
        span.end()


# -- the wait for a person -------------------------------------------------------------------


def record_approval(
    traceparent: str,
    *,
    tool_name: str,
    tool_call_id: str,
    approval_id: str,
    status: str,
    requested_at_ns: int,
    decided_at_ns: int,
    decider: dict[str, str],
    reason: str = "",
) -> None:
    """An ``await_approval {tool}`` span in the run's trace, from the request to the
    verdict (explicit times: the wait spans processes and hours). ``decider`` names who
    decided (``deuz.approval.decider.*``: a user's id and username, or an operator)."""
    if not _tracing():
        return
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "await_approval",
        "gen_ai.tool.name": tool_name,
        "gen_ai.tool.call.id": tool_call_id,
        "deuz.approval.id": approval_id,
        "deuz.approval.status": status,
        "deuz.approval.approved": status == "approved",
        "deuz.approval.latency_ms": max(0, decided_at_ns - requested_at_ns) / 1e6,
    }
    attributes.update({f"deuz.approval.decider.{k}": v for k, v in decider.items()})
    if reason:
        attributes["deuz.approval.reason"] = reason[:500]
    span = _start(
        f"await_approval {tool_name}",
        attributes,
        context=_parent(traceparent),
        start_time=requested_at_ns,
    )
    span.end(end_time=decided_at_ns)
