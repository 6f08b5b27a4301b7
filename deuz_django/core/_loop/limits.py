"""When a leg stops on its own: the runaway guard, stop conditions and the price meter
(SPEC R3.17–R3.19, R4.4, D6)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ..deps import Deps
from ..model import LanguageModel
from ..parts import CostPart
from ..results import StepResult
from ..stop import StepInfo, StopCondition, condition_name, condition_needs_cost
from ..tools import ToolResult
from ..usage import Usage

MAX_SAME_TOOL_ERRORS = 3


class RunawayGuard:
    """D6: three consecutive steps in which the same tool failed end the run.

    A step counts for a tool when one of its non-denied calls failed and none succeeded;
    any other step (the tool succeeded, was only denied, or was not called) breaks the
    streak. Counters live for one leg (R7.5).
    """

    def __init__(self) -> None:
        self._streaks: dict[str, int] = {}

    def record(
        self, results: Sequence[ToolResult], denied: Mapping[str, object]
    ) -> bool:
        """Count one step's results; ``True`` when a tool has now failed three steps running."""
        counted = [r for r in results if r.tool_call_id not in denied]
        failed = {r.tool_name for r in counted if r.is_error}
        failed -= {r.tool_name for r in counted if not r.is_error}
        self._streaks = {name: self._streaks.get(name, 0) + 1 for name in failed}
        return any(count >= MAX_SAME_TOOL_ERRORS for count in self._streaks.values())


class PriceMeter:
    """Prices the run's cumulative usage through ``deps.price_provider`` (R4.4).

    A provider that raises is logged as a warning and prices nothing.
    """

    def __init__(self, deps: Deps) -> None:
        self._deps = deps
        self._previous = 0.0

    @property
    def enabled(self) -> bool:
        return self._deps.price_provider is not None

    def start_from(self, usage: Usage, model: LanguageModel) -> None:
        """On a resume leg, deltas are measured from the price of the base usage."""
        self._previous = self.price(usage, model) or 0.0

    def price(self, usage: Usage, model: LanguageModel) -> float | None:
        provider = self._deps.price_provider
        if provider is None:
            return None
        try:
            return provider.price_usage(model.model_id, usage)
        except Exception as error:
            self._deps.logger.warning(f"price provider failed: {error}")
            return None

    def cost_part(
        self, usage: Usage, step_index: int, model: LanguageModel
    ) -> CostPart | None:
        """The cumulative price after a step and what this step added."""
        cost = self.price(usage, model)
        if cost is None:
            return None
        delta = max(0.0, round((cost - self._previous) * 1e6) / 1e6)
        self._previous = cost
        return CostPart(cost, delta, None, step_index)


class StopConditions:
    """R3.18 with D6: after a tool step, the first condition that trips names the stop —
    ``max_steps`` first, then the caller's conditions in order."""

    def __init__(
        self,
        max_steps: int,
        conditions: Sequence[StopCondition],
        meter: PriceMeter,
        deps: Deps,
    ) -> None:
        self._max_steps = max_steps
        self._conditions = tuple(conditions)
        self._meter = meter
        self._deps = deps
        self._needs_cost = any(condition_needs_cost(c) for c in self._conditions)
        self._warned = False

    def first_tripped(
        self,
        steps: Sequence[StepResult],
        cumulative_usage: Callable[[], Usage],
        elapsed_ms: float,
        model: LanguageModel,
    ) -> str | None:
        """``steps`` are this leg's; the run's cumulative usage is asked for only when
        there are conditions to show it to."""
        if len(steps) >= self._max_steps:
            return "max_steps"
        if not self._conditions:
            return None
        usage = cumulative_usage()
        info = StepInfo(
            steps=tuple(steps),
            step_count=len(steps),
            usage=usage,
            cost_usd=self._cost(usage, model),
            elapsed_ms=elapsed_ms,
        )
        for condition in self._conditions:
            if condition(info):
                return condition_name(condition)
        return None

    def _cost(self, usage: Usage, model: LanguageModel) -> float | None:
        if not self._needs_cost:
            return None
        if not self._meter.enabled:
            if not self._warned:
                self._warned = True
                self._deps.logger.warning(
                    "cost_exceeds: no deps.price_provider injected — "
                    "the condition never fires"
                )
            return None
        return self._meter.price(usage, model)
