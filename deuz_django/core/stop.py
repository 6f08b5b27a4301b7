"""Stop conditions, checked after every step that executed tools (SPEC R3.18, R3.19).

A condition is any callable taking a :class:`StepInfo` and returning a bool; its ``name``
attribute (``"custom"`` when absent) is reported as the result's ``stopped_by``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .usage import Usage

if TYPE_CHECKING:
    from .results import StepResult


@dataclass(frozen=True, slots=True, kw_only=True)
class StepInfo:
    """``steps``/``step_count`` cover this leg; ``usage`` and ``cost_usd`` the whole run."""

    steps: tuple[StepResult, ...]
    step_count: int
    usage: Usage
    cost_usd: float | None
    elapsed_ms: float


StopCondition = Callable[[StepInfo], bool]


@dataclass(frozen=True, slots=True)
class _Condition:
    name: str
    check: Callable[[StepInfo], bool]
    needs_cost: bool = False

    def __call__(self, info: StepInfo) -> bool:
        return self.check(info)


def step_count_is(n: int) -> StopCondition:
    """Stop once this leg ran ``n`` steps."""
    return _Condition("step_count_is", lambda info: info.step_count >= n)


def has_tool_call(tool_name: str) -> StopCondition:
    """Stop after a step that called ``tool_name``."""

    def check(info: StepInfo) -> bool:
        return bool(info.steps) and any(
            call.tool_name == tool_name for call in info.steps[-1].tool_calls
        )

    return _Condition("has_tool_call", check)


def total_tokens_exceed(n: int) -> StopCondition:
    """Stop once the run's cumulative total tokens reach ``n``."""
    return _Condition("total_tokens_exceed", lambda info: info.usage.total_tokens >= n)


def cost_exceeds(usd: float) -> StopCondition:
    """Stop once the run's cumulative price reaches ``usd`` (needs ``deps.price_provider``)."""
    return _Condition(
        "cost_exceeds",
        lambda info: info.cost_usd is not None and info.cost_usd >= usd,
        needs_cost=True,
    )


def duration_exceeds(ms: float) -> StopCondition:
    """Stop once this leg has run for ``ms`` milliseconds."""
    return _Condition("duration_exceeds", lambda info: info.elapsed_ms >= ms)


def condition_name(condition: StopCondition) -> str:
    name = getattr(condition, "name", None)
    return name if isinstance(name, str) and name else "custom"


def condition_needs_cost(condition: StopCondition) -> bool:
    return bool(getattr(condition, "needs_cost", False))
