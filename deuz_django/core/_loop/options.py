"""What one leg of the loop is given: the call options, declared once (SPEC §2, DESIGN §3).

:class:`LoopOptions` is the one list of options. Each option a caller passes by name is a
field marked with :func:`_option`, with its default and its check beside it; the keys a
call accepts, their defaults and their validation are all read from these fields. The
public ``CallOptions``/``GenerateOptions`` are typing aids for the same keys, and a test
keeps them in step with this list.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import MISSING, Field, dataclass, field, fields, replace
from typing import Any

from .._awaitable import resolve
from ..abort import AbortSignal, TurnInterrupter
from ..approvals import (
    ApprovalSignerLike,
    ToolApprovalResponse,
    coerce_approval_responses,
)
from ..deps import Deps, Logger
from ..durable._checkpointer import ResumePoint
from ..durable.session import DurableSession, SessionStore
from ..exceptions import InvalidInputError
from ..messages import Message, coerce_messages
from ..model import LanguageModel, ModelRequest, ToolChoice
from ..stop import StopCondition
from ..tools import ServerApprover, Tool, coerce_tools, tool_definitions
from ..usage import Usage


@dataclass(frozen=True, slots=True, kw_only=True)
class PrepareStepInfo:
    """What ``prepare_step`` sees: ``step_index`` and ``usage`` count the whole run."""

    step_index: int
    messages: tuple[Message, ...]
    usage: Usage


@dataclass(frozen=True, slots=True, kw_only=True)
class StepOverrides:
    """What ``prepare_step`` may change: ``messages`` for this and later steps, the rest
    for this step only. A dict with these keys does as well."""

    messages: Sequence[Message | dict[str, Any]] | None = None
    active_tools: Sequence[str] | None = None
    tool_choice: ToolChoice | None = None
    model: LanguageModel | None = None


Overrides = StepOverrides | Mapping[str, Any] | None
PrepareStep = Callable[[PrepareStepInfo], Overrides | Awaitable[Overrides]]
_OVERRIDE_KEYS = tuple(f.name for f in fields(StepOverrides))


def step_overrides(value: object) -> StepOverrides | None:
    """What ``prepare_step`` returned, as :class:`StepOverrides`: it may also return a dict
    of the same keys, or ``None`` (R3.11)."""
    if isinstance(value, Mapping):
        unknown = [key for key in value if key not in _OVERRIDE_KEYS]
        if unknown:
            raise InvalidInputError(
                f"prepare_step: unknown key {unknown[0]!r} in the returned dict "
                f"(expected {', '.join(_OVERRIDE_KEYS)})"
            )
        value = StepOverrides(**value)
    elif value is not None and not isinstance(value, StepOverrides):
        raise InvalidInputError(
            "prepare_step: expected StepOverrides, a dict or None, "
            f"got {type(value).__name__}"
        )
    if value is not None and isinstance(value.active_tools, str | bytes):
        raise InvalidInputError("prepare_step: active_tools: expected a list of names")
    return value


@dataclass(frozen=True, slots=True)
class ResumeSource:
    """Resume lazily from the store: the checkpoint is loaded when the leg starts (R7.4)."""

    store: SessionStore
    run_id: str


# -- the checks of the caller options --------------------------------------------------

Check = Callable[[str, Any], Any]


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInputError(f"{name}: expected a positive integer, got {value!r}")
    return value


def _concurrency(name: str, value: Any) -> int:
    """R3.13: the cap is ``max(1, …)``, so 0 runs the calls one at a time."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInputError(
            f"{name}: expected a non-negative integer, got {value!r}"
        )
    return value


def _milliseconds(name: str, value: Any) -> float | None:
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, int | float)
    ):
        raise InvalidInputError(f"{name}: expected a number of milliseconds")
    return value


def _stop_conditions(name: str, value: Any) -> tuple[StopCondition, ...]:
    if value is None:
        return ()
    return (value,) if callable(value) else tuple(value)


def _tools(name: str, value: Any) -> dict[str, Tool]:
    return coerce_tools(value)


def _verdicts(name: str, value: Any) -> tuple[ToolApprovalResponse, ...] | None:
    return coerce_approval_responses(value)


def _deps(name: str, value: Any) -> Deps:
    return value or Deps()


def _option(check: Check | None = None, *, fresh: bool = False) -> dict[str, Any]:
    """The field metadata that makes a field a caller option, set by name.

    ``check`` validates (and may convert) the caller's value; a ``fresh`` option is taken
    by a new call only, not by a resume of a stored run.
    """
    return {"option": "fresh" if fresh else "call", "check": check}


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopOptions:
    """One leg's options. ``single_turn`` is the R2.1 routing of a tool-less public call;
    sub-agents and resume legs always run the loop."""

    # What a caller passes (R2.2, R2.3, R10.7 give the defaults).
    model: LanguageModel = field(metadata=_option())
    tools: dict[str, Tool] = field(default_factory=dict, metadata=_option(_tools))
    max_steps: int = field(default=1, metadata=_option(_positive_int))
    stop_when: tuple[StopCondition, ...] = field(
        default=(), metadata=_option(_stop_conditions)
    )
    prepare_step: PrepareStep | None = field(default=None, metadata=_option())
    approve_tool_call: ServerApprover | None = field(default=None, metadata=_option())
    approval_responses: tuple[ToolApprovalResponse, ...] | None = field(
        default=None, metadata=_option(_verdicts)
    )
    approval_signer: ApprovalSignerLike | None = field(default=None, metadata=_option())
    approval_max_age_ms: float | None = field(
        default=None, metadata=_option(_milliseconds)
    )
    max_tool_concurrency: int = field(default=5, metadata=_option(_concurrency))
    signal: AbortSignal | None = field(default=None, metadata=_option())
    interrupt: TurnInterrupter | None = field(default=None, metadata=_option())
    deps: Deps = field(default_factory=Deps, metadata=_option(_deps))
    session: DurableSession | None = field(default=None, metadata=_option(fresh=True))
    # Set by the entry points and sub-agents, never by name.
    messages: tuple[Message, ...]
    single_turn: bool = False
    agent_path: tuple[str, ...] = ()
    root_run_id: str | None = None
    idempotency_scope: str | None = None
    resume_from: ResumePoint | None = None
    resume_source: ResumeSource | None = None


_OPTIONS: tuple[Field[Any], ...] = tuple(
    f for f in fields(LoopOptions) if "option" in f.metadata
)
_REQUIRED = tuple(
    f.name for f in _OPTIONS if f.default is MISSING and f.default_factory is MISSING
)
# A new call gives its history as ``messages`` or ``prompt``, with an optional ``system``.
HISTORY_OPTIONS = frozenset({"messages", "prompt", "system"})
CALL_OPTIONS = frozenset(f.name for f in _OPTIONS if f.metadata["option"] == "call")
FRESH_OPTIONS = HISTORY_OPTIONS | {f.name for f in _OPTIONS}


def loop_options(
    options: Mapping[str, Any],
    *,
    fresh: bool,
    messages: tuple[Message, ...] | None = None,
    **internal: Any,
) -> LoopOptions:
    """Validate a caller's options, naming the bad option on error.

    ``fresh`` calls take every option; a resume takes no history and no session.
    """
    unknown = sorted(set(options) - (FRESH_OPTIONS if fresh else CALL_OPTIONS))
    if unknown:
        raise TypeError(f"unexpected option(s): {', '.join(unknown)}")
    missing = [name for name in _REQUIRED if name not in options]
    if missing:
        raise TypeError(f"missing required option: {', '.join(missing)}")
    if messages is None:
        messages = input_messages(options)
    values: dict[str, Any] = {}
    for option in _OPTIONS:
        if option.name in options:
            value = options[option.name]
            check: Check | None = option.metadata["check"]
            values[option.name] = value if check is None else check(option.name, value)
    return LoopOptions(messages=messages, **values, **internal)


def fresh_options(options: Mapping[str, Any]) -> LoopOptions:
    """A new call's options; R2.1 routes a call without tools to a single model turn."""
    validated = loop_options(options, fresh=True)
    return replace(validated, single_turn=not validated.tools)


def input_messages(options: Mapping[str, Any]) -> tuple[Message, ...]:
    """A new call's history: exactly one of ``messages`` or ``prompt``, after ``system``."""
    has_messages = options.get("messages") is not None
    prompt = options.get("prompt")
    if has_messages == (prompt is not None):
        raise InvalidInputError("pass exactly one of messages or prompt")
    if prompt is not None:
        if not isinstance(prompt, str):
            raise InvalidInputError("prompt: expected a string")
        history: tuple[Message, ...] = (Message("user", prompt),)
    else:
        history = coerce_messages(options["messages"])
    system = options.get("system")
    if system is not None:
        if not isinstance(system, str):
            raise InvalidInputError("system: expected a string")
        history = (Message("system", system), *history)
    return history


async def step_request(
    options: LoopOptions,
    step_index: int,
    history: tuple[Message, ...],
    usage: Callable[[], Usage],
    logger: Logger,
) -> tuple[LanguageModel, ModelRequest, tuple[Message, ...]]:
    """The model and request of step ``step_index``, and the history it answers:
    ``prepare_step`` may rewrite the history, and pick tools or model (R3.11). The
    run's ``usage`` is asked for only when there is a ``prepare_step`` to show it to."""
    model = options.model
    definitions = tool_definitions(options.tools, None, logger)
    tool_choice = None
    if options.prepare_step is not None:
        info = PrepareStepInfo(step_index=step_index, messages=history, usage=usage())
        overrides = step_overrides(await resolve(options.prepare_step(info)))
        if overrides is not None:
            if overrides.messages is not None:
                history = coerce_messages(overrides.messages)
            if overrides.active_tools is not None:
                definitions = tool_definitions(
                    options.tools, overrides.active_tools, logger
                )
            tool_choice = overrides.tool_choice
            model = overrides.model or model
    return (
        model,
        ModelRequest(
            messages=history,
            tools=definitions,
            tool_choice=tool_choice,
            # R2.3: the reference's ``(maxToolConcurrency || 5) > 1``.
            parallel_tool_calls=(options.max_tool_concurrency or 5) > 1,
            signal=options.signal,
        ),
        history,
    )
