"""Tools: what a model may call, how its arguments are checked, and who must approve it.

``@tool`` builds a :class:`Tool` from a typed function: the JSON Schema comes from the
signature (through pydantic) and arguments are validated before the function runs; a
validation failure becomes an ``is_error`` result the model can react to. ``Tool(...)``
takes a raw JSON Schema instead, whose arguments are passed through unvalidated (SPEC R1.12).
A tool without ``execute`` is a client tool: the run suspends so the client can answer it.

Sync functions run in a worker thread, so a tool may use blocking libraries (and Django's
ORM) without stalling the event loop.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, overload

import pydantic

from .abort import AbortSignal
from .approvals import ToolApprovalResponse
from .deps import Deps, Logger
from .exceptions import InvalidInputError
from .messages import Message
from .model import ToolDefinition
from .reconciliation import Reconciliation
from .usage import Usage

if TYPE_CHECKING:
    from .approvals import ApprovalSignerLike
    from .durable.session import DurableSession
    from .parts import StreamPart
    from .questions import QuestionSource


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call the model made (SPEC R1.14); ``edited_from`` is the model's input when a
    person edited ``args`` before approving the call; ``answer`` is a person's answer to
    a question tool's call (``None``: none given); ``decision`` the id of the recorded
    decision an approved call runs on (``None``: none was recorded)."""

    tool_call_id: str
    tool_name: str
    args: Any
    edited_from: Any = None
    answer: Any = None
    decision: str | None = None


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The outcome of one call; ``is_error`` is None on success (R3.14.7)."""

    tool_call_id: str
    tool_name: str
    result: Any
    is_error: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NeedsApprovalContext:
    """What a ``needs_approval`` predicate may look at (R1.13)."""

    tool_call_id: str
    messages: tuple[Message, ...]
    signal: AbortSignal | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolContext:
    """Handed to ``execute``: the call, the history so far, and the run's seams (R1.13).

    ``resumed`` is True when the call comes from a checkpoint's history and runs again on
    resume (settle), rather than having been issued by the model in this leg.
    ``answer`` is a person's answer to the call of a question tool.

    :attr:`idempotency_key` names the call for the services it touches: pass it on, and a
    call that runs again (after a crash, on resume) has its effect once::

        @tool(needs_approval=True, description="Charge the customer's card.")
        def charge(amount_cents: int, ctx: ToolContext) -> str:
            payment = stripe.PaymentIntent.create(
                amount=amount_cents,
                currency="eur",
                customer=CUSTOMER_ID,
                idempotency_key=ctx.idempotency_key,  # run twice, charged once
            )
            return payment.id

    ``idempotency_scope`` is where the call sits (set by the loop): the root run's id, or
    for a call inside a sub-agent the key of the call that started the sub-agent.
    """

    tool_call_id: str
    tool_name: str
    messages: tuple[Message, ...]
    signal: AbortSignal | None
    deps: Deps
    agent_path: tuple[str, ...] = ()
    emit_part: Callable[[StreamPart], None] | None = None
    approve_tool_call: ServerApprover | None = None
    report_usage: Callable[[Usage], None] = lambda usage: None
    session: DurableSession | None = None
    approval_responses: tuple[ToolApprovalResponse, ...] | None = None
    approval_signer: ApprovalSignerLike | None = None
    approval_max_age_ms: float | None = None
    root_run_id: str | None = None
    resumed: bool = False
    idempotency_scope: str = ""
    answer: Any = None

    @property
    def idempotency_key(self) -> str:
        """One stable key per call: the same on every retry, leg, process and resume.

        The SHA-256 of the call's place in the run — its ``idempotency_scope``, agent path
        and tool call id — as 32 hex characters: opaque (no run id reaches a third party)
        and short enough for APIs that limit a key's length. Without a durable session the
        scope is empty: the key is still stable for the call within its run, but only as
        unique as the model's tool call ids.
        """
        place = json.dumps([self.idempotency_scope, self.agent_path, self.tool_call_id])
        return hashlib.sha256(place.encode()).hexdigest()[:32]


ServerApprover = Callable[[ToolCall, tuple[Message, ...]], bool | Awaitable[bool]]
NeedsApproval = bool | Callable[[Any, NeedsApprovalContext], bool | Awaitable[bool]]
Execute = Callable[[Any, ToolContext], Any]
Reconcile = Callable[[Any, ToolContext], Reconciliation | Awaitable[Reconciliation]]


class ToolArgumentsError(InvalidInputError):
    """The arguments a model sent do not fit the tool's signature."""

    def __init__(self, issues: Sequence[str]) -> None:
        super().__init__("; ".join(issues))
        self.issues = tuple(issues)


def _empty_object_schema() -> dict[str, Any]:
    return {"type": "object", "properties": {}}


@dataclass(frozen=True, slots=True, kw_only=True)
class Tool:
    """A tool the model can call.

    ``needs_approval`` gates the call (a bool, or a predicate over the arguments);
    ``approval_permission`` names the Django permission an approver must hold;
    ``approval_by_owner`` is False when the run's owner may not approve their own call
    (separation of duties); ``timeout_ms`` abandons a call that runs longer.
    ``idempotent``: the tool is safe to run again if a crash leaves its outcome unknown.
    ``reconcile``: for a tool that is not, how to find out what became of such a call —
    called like ``execute`` (same arguments, same ``ctx.idempotency_key``), it answers
    with a :class:`~deuz_django.core.reconciliation.Reconciliation`, and the call goes
    to a person only when it cannot tell (or raises, or outlasts ``timeout_ms``). It
    never runs the tool.
    ``editable``: a person deciding its approval may edit its input before approving.
    ``question``: the call asks a person (a :class:`~deuz_django.core.questions.Question`,
    or a function building one from the input): the run suspends until it is answered,
    and the answer is its result (``execute``, if given, receives it as ``ctx.answer``).
    ``sub_tools`` lists the tools of the sub-agent behind an ``agent_tool``, so approval
    rules of a nested gated call can be found from its agent path.
    """

    name: str
    description: str | None = None
    parameters: dict[str, Any] = field(default_factory=_empty_object_schema)
    execute: Execute | None = None
    validate: Callable[[Any], Any] | None = None
    needs_approval: NeedsApproval = False
    approval_permission: str | None = None
    approval_by_owner: bool = True
    timeout_ms: float | None = None
    idempotent: bool = False
    reconcile: Reconcile | None = None
    editable: bool = False
    question: QuestionSource | None = None
    sub_tools: Mapping[str, Tool] | None = None

    def __post_init__(self) -> None:
        if self.idempotent and self.reconcile is not None:
            # An idempotent call in doubt simply runs again: its reconcile would never
            # be asked.
            raise InvalidInputError(
                f"tool {self.name!r}: idempotent=True and reconcile exclude each other"
            )

    def edit_problems(self, edited: Any) -> tuple[str, ...]:
        """Why ``edited`` may not replace a call's input (none: it may) — the one check
        every layer makes, the core as it settles and each surface as it records the
        verdict: the tool must be ``editable``, the input must pass its schema (one
        problem per field, ``amount: …``)."""
        if not self.editable:
            return (f"the input of {self.name} calls may not be edited",)
        if self.validate is not None:
            try:
                self.validate(edited)
            except ToolArgumentsError as error:
                return error.issues
        return ()


ToolSet = Mapping[str, Tool]


def coerce_tools(tools: ToolSet | Sequence[Tool] | None) -> dict[str, Tool]:
    """Accept a mapping of name to tool, or a sequence of tools keyed by their names."""
    if tools is None:
        return {}
    if isinstance(tools, Mapping):
        out = dict(tools)
        for key, value in out.items():
            if not isinstance(value, Tool):
                raise InvalidInputError(
                    f"tools[{key!r}]: expected a Tool, got {value!r}"
                )
        return out
    out = {}
    for i, value in enumerate(tools):
        if not isinstance(value, Tool):
            raise InvalidInputError(f"tools[{i}]: expected a Tool, got {value!r}")
        if value.name in out:
            raise InvalidInputError(f"tools[{i}]: duplicate tool name {value.name!r}")
        out[value.name] = value
    return out


def tool_definitions(
    tools: Mapping[str, Tool], active: Sequence[str] | None, logger: Logger
) -> tuple[ToolDefinition, ...]:
    """What the model is told about ``tools``, filtered to ``active`` when given (R3.12):
    an unknown name is logged and ignored, and a filter matching nothing sends them all."""
    names: Sequence[str] = list(tools)
    if active is not None:
        for name in active:
            if name not in tools:
                logger.warning(f"active_tools: unknown tool {name!r} ignored")
        names = [n for n in active if n in tools] or names
    return tuple(
        ToolDefinition(n, tools[n].description, tools[n].parameters) for n in names
    )


# -- @tool --------------------------------------------------------------------------------


def _strip_titles(schema: Any) -> Any:
    """pydantic adds a ``title`` to every schema node; models don't need them."""
    if isinstance(schema, dict):
        return {
            key: _strip_titles(value)
            for key, value in schema.items()
            if not (key == "title" and isinstance(value, str))
        }
    if isinstance(schema, list):
        return [_strip_titles(item) for item in schema]
    return schema


def _issue(error: Any) -> str:
    location = ".".join(str(part) for part in error["loc"])
    return f"{location}: {error['msg']}" if location else str(error["msg"])


def _parameters(fn: Callable[..., Any]) -> tuple[dict[str, Any], str | None]:
    """``fn``'s parameters as pydantic fields, and the name of the one annotated
    :class:`ToolContext`, which receives the call's context and is not shown to the model."""
    hints = typing.get_type_hints(fn)
    fields: dict[str, Any] = {}
    context_param: str | None = None
    for param in inspect.signature(fn).parameters.values():
        annotation = hints.get(param.name, Any)
        if annotation is ToolContext:
            context_param = param.name
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(
                f"@tool {fn.__name__}: *args/**kwargs cannot be described to a model"
            )
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (annotation, default)
    return fields, context_param


def _validator(
    arguments: type[pydantic.BaseModel], field_names: tuple[str, ...]
) -> Callable[[Any], dict[str, Any]]:
    """Check a model's arguments against ``arguments``; every issue is reported, so the
    model can correct them all at once."""

    def validate(args: Any) -> dict[str, Any]:
        try:
            model = arguments.model_validate(args)
        except pydantic.ValidationError as exc:
            raise ToolArgumentsError([_issue(e) for e in exc.errors()]) from None
        return {key: getattr(model, key) for key in field_names}

    return validate


def _executor(fn: Callable[..., Any], context_param: str | None) -> Execute:
    """``fn`` called with validated arguments (and the context, when it asks for it);
    a coroutine function stays one, so the loop awaits it rather than using a thread."""

    def call(args: dict[str, Any], ctx: ToolContext) -> Any:
        if context_param is not None:
            return fn(**args, **{context_param: ctx})
        return fn(**args)

    if not inspect.iscoroutinefunction(fn):
        return call

    async def call_async(args: dict[str, Any], ctx: ToolContext) -> Any:
        return await call(args, ctx)

    return call_async


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    needs_approval: NeedsApproval = False,
    approval_permission: str | None = None,
    approval_by_owner: bool = True,
    timeout_ms: float | None = None,
    idempotent: bool = False,
    reconcile: Reconcile | None = None,
    editable: bool = False,
    question: QuestionSource | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    needs_approval: NeedsApproval = False,
    approval_permission: str | None = None,
    approval_by_owner: bool = True,
    timeout_ms: float | None = None,
    idempotent: bool = False,
    reconcile: Reconcile | None = None,
    editable: bool = False,
    question: QuestionSource | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Build a :class:`Tool` from a typed function; its docstring's first paragraph describes it.

    A parameter annotated :class:`ToolContext` receives the call's context and is not shown
    to the model. A ``reconcile`` receives the arguments as a validated dict.
    """

    def decorate(func: Callable[..., Any]) -> Tool:
        fields, context_param = _parameters(func)
        arguments = pydantic.create_model(
            f"{func.__name__}_arguments",
            __config__=pydantic.ConfigDict(extra="forbid"),
            **fields,
        )
        doc = inspect.getdoc(func)
        return Tool(
            name=name or func.__name__,
            description=description or (doc.split("\n\n")[0].strip() if doc else None),
            parameters=_strip_titles(arguments.model_json_schema()),
            execute=_executor(func, context_param),
            validate=_validator(arguments, tuple(fields)),
            needs_approval=needs_approval,
            approval_permission=approval_permission,
            approval_by_owner=approval_by_owner,
            timeout_ms=timeout_ms,
            idempotent=idempotent,
            reconcile=reconcile,
            editable=editable,
            question=question,
        )

    return decorate(fn) if fn is not None else decorate
