"""Limits over a whole run, across all its legs: what stops a runaway no person watches.

``max_steps`` bounds one leg (the reference's rule); a run that keeps suspending and
resuming — a model that asks again each leg, rules that approve each ask — could still
go on forever. These bound the run itself::

    DEUZ = {"RUN_LIMITS": {"STEPS": 500, "LEGS": 100, "EXECUTIONS_PER_TOOL": 50,
                           "TOKENS": None, "COST_USD": None}}

and an agent may tighten or loosen them (``AgentSpec(limits={"EXECUTIONS_PER_TOOL":
3})``). ``None`` switches a limit off. Each is checked where it can be exceeded: legs
when a leg starts, steps (checkpoint boundaries), tokens and cost at the fence before
every model call and tool execution, executions of one tool (sub-agents' included) when
one is about to start. One reached stops the run (:mod:`deuz_django.runs.stopping`) with the
limit as its reason, and a person is told; nothing continues it on its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..conf import deuz_settings
from ..core import Usage

KEYS = {
    "STEPS": "steps",
    "LEGS": "legs",
    "EXECUTIONS_PER_TOOL": "executions_per_tool",
    "TOKENS": "tokens",
    "COST_USD": "cost_usd",
}


@dataclass(frozen=True, slots=True)
class RunLimits:
    """The limits of one agent's runs (``None``: no limit)."""

    steps: int | None = 500
    legs: int | None = 100
    executions_per_tool: int | None = 50
    tokens: int | None = None
    cost_usd: float | None = None

    def overridden(self, overrides: Mapping[str, Any] | None) -> RunLimits:
        """These limits with ``overrides`` (settings-style keys) applied."""
        if not overrides:
            return self
        return replace(self, **{KEYS[key]: value for key, value in overrides.items()})

    def step_problem(
        self, step_index: int, usage: Usage, cost_usd: float | None
    ) -> str | None:
        """Why the run may not call its model or run a tool again now (``None``: it
        may): the boundaries it saved, its tokens or its cost reached a limit."""
        if self.steps is not None and step_index >= self.steps:
            return f"the run reached its limit of {self.steps} steps"
        if self.tokens is not None and usage.total_tokens >= self.tokens:
            return f"the run reached its limit of {self.tokens} tokens"
        if (
            self.cost_usd is not None
            and cost_usd is not None
            and cost_usd >= self.cost_usd
        ):
            return f"the run reached its limit of ${self.cost_usd:g}"
        return None

    def legs_problem(self, legs_started: int) -> str | None:
        if self.legs is not None and legs_started > self.legs:
            return f"the run reached its limit of {self.legs} legs"
        return None

    def executions_problem(self, tool_name: str, executed: int) -> str | None:
        """Why one more execution of ``tool_name`` may not start after ``executed``."""
        if self.executions_per_tool is not None and executed >= (
            self.executions_per_tool
        ):
            return (
                f"the run reached its limit of {self.executions_per_tool} executions "
                f"of {tool_name}"
            )
        return None


def settings_problem(value: Any, where: str) -> str | None:
    """Why ``value`` is not a valid ``RUN_LIMITS`` mapping (``None``: it is)."""
    if not isinstance(value, Mapping):
        return f"{where}: expected a dict, got {value!r}"
    for key, limit in value.items():
        if key not in KEYS:
            known = ", ".join(KEYS)
            return f"{where}: unknown limit {key!r} (known: {known})"
        numeric = isinstance(limit, int | float) and not isinstance(limit, bool)
        if limit is not None and (not numeric or limit <= 0):
            return (
                f"{where}[{key!r}]: expected a positive number or None, got {limit!r}"
            )
        if limit is not None and key != "COST_USD" and not isinstance(limit, int):
            return f"{where}[{key!r}]: expected a whole number, got {limit!r}"
    return None


def configured() -> RunLimits:
    """The project's limits: the defaults with ``DEUZ["RUN_LIMITS"]`` applied."""
    return RunLimits().overridden(deuz_settings.RUN_LIMITS)
