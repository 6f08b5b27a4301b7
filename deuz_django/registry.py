"""The agents registry: how any process rebuilds the model and tools a run needs.

A run records the *name* of its agent; ``DEUZ["AGENTS"]`` maps names to the dotted path of
an :class:`AgentSpec` (or a zero-argument callable returning one, to build models lazily).
Checkpoints store data, not closures — this is where the closures come back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal, get_args

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from .conf import deuz_settings
from .core import LanguageModel, Tool, Usage
from .core.exceptions import DeuzError
from .core.tools import coerce_tools
from .deadlines import Deadline, DeadlineRules
from .exceptions import InvalidApprovalChain, InvalidDeadline, UnknownAgent
from .quorum import ApprovalChain
from .runs.limits import RunLimits
from .runs.limits import configured as configured_limits
from .runs.limits import settings_problem as limits_problem

logger = logging.getLogger("deuz_django")

# What an agent does with input sent while it runs (docs/steering.md): queue it for the
# next step boundary, also cut the model's turn in progress short for it, or refuse it.
Steering = Literal["enqueue", "interrupt", "reject"]
STEERING_POLICIES: tuple[str, ...] = get_args(Steering)


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentSpec:
    """An agent: its model, tools, system prompt and the loop options every leg uses,
    how long its gated calls may wait for a person (:mod:`deuz_django.deadlines`:
    ``deadline`` for every call, ``deadlines`` by tool path), its overrides of the
    run-wide limits (:mod:`deuz_django.runs.limits`) and what it does with input sent
    while it runs (``steering``: ``"enqueue"``, ``"interrupt"`` or ``"reject"``,
    :mod:`deuz_django.runs.steering`); ``approval_chains`` by tool path: calls that
    need several approvals, in stages (:mod:`deuz_django.quorum`)."""

    model: LanguageModel
    tools: Sequence[Tool] | Mapping[str, Tool] = ()
    system: str | None = None
    max_steps: int = 10
    options: Mapping[str, Any] = field(default_factory=dict)
    deadline: Deadline | None = None
    deadlines: Mapping[str, Deadline] = field(default_factory=dict)
    limits: Mapping[str, Any] = field(default_factory=dict)
    steering: Steering = "enqueue"
    approval_chains: Mapping[str, ApprovalChain] = field(default_factory=dict)

    def __post_init__(self) -> None:
        problem = limits_problem(self.limits, "AgentSpec.limits")
        if problem is not None:
            raise ImproperlyConfigured(problem)
        if self.steering not in STEERING_POLICIES:
            raise ImproperlyConfigured(
                "AgentSpec.steering: expected 'enqueue', 'interrupt' or 'reject', "
                f"got {self.steering!r}"
            )
        if self.deadline is not None and not isinstance(self.deadline, Deadline):
            raise InvalidDeadline(
                f"AgentSpec.deadline: expected a Deadline, got {self.deadline!r}"
            )
        if self.deadlines:
            tools = self.tool_set
            for path, deadline in self.deadlines.items():
                problem = _deadline_problem(tools, path, deadline)
                if problem is not None:
                    raise InvalidDeadline(f"AgentSpec.deadlines[{path!r}]: {problem}")
        for path, chain in self.approval_chains.items():
            problem = _chain_problem(self.tool_set, path, chain)
            if problem is not None:
                raise InvalidApprovalChain(
                    f"AgentSpec.approval_chains[{path!r}]: {problem}"
                )

    def approval_chain(
        self, tool_name: str, agent_path: Sequence[str]
    ) -> ApprovalChain | None:
        """The chain a call of ``tool_name`` inside ``agent_path`` is approved through."""
        return self.approval_chains.get("/".join([*agent_path, tool_name]))

    @property
    def tool_set(self) -> dict[str, Tool]:
        return coerce_tools(self.tools)

    @property
    def run_limits(self) -> RunLimits:
        """The project's run-wide limits with this agent's overrides."""
        return configured_limits().overridden(self.limits)

    @property
    def deadline_rules(self) -> DeadlineRules:
        return DeadlineRules(self.deadline, dict(self.deadlines))

    def call_options(self) -> dict[str, Any]:
        """Options for ``generate_text``/``resume_*`` (without messages and session)."""
        return {
            "model": self.model,
            "tools": self.tool_set,
            "max_steps": self.max_steps,
            **self.options,
        }


def agent_names() -> list[str]:
    return list(deuz_settings.AGENTS)


def load_agent(name: str) -> AgentSpec:
    """Build the agent registered as ``name``; raises :class:`UnknownAgent`."""
    path = deuz_settings.AGENTS.get(name)
    if path is None:
        known = ", ".join(sorted(deuz_settings.AGENTS)) or "none"
        raise UnknownAgent(f"Unknown agent {name!r} (registered: {known}).")
    try:
        target: object = import_string(path)
    except ImportError as error:
        raise UnknownAgent(
            f"DEUZ['AGENTS'][{name!r}] = {path!r} cannot be imported: {error}"
        ) from error
    spec = (
        target() if callable(target) and not isinstance(target, AgentSpec) else target
    )
    if not isinstance(spec, AgentSpec):
        raise UnknownAgent(f"DEUZ['AGENTS'][{name!r}] = {path!r} is not an AgentSpec.")
    return spec


@cache
def agent_tools(name: str) -> Mapping[str, Tool]:
    """The tools of the agent registered as ``name``, built once per process.

    Permission checks ask for a tool's policy (``approval_permission``, ...) on every
    verdict and every queue row; rebuilding the agent each time would construct its model
    too. An agent's tools are fixed for the life of a process (a deploy changes them);
    the cache is dropped when the ``DEUZ`` setting changes. Legs still build the whole
    agent with :func:`load_agent`, so nothing bound to an event loop is shared.
    """
    return load_agent(name).tool_set


Pricer = Callable[[Usage], float | None]


@cache
def agent_pricer(name: str) -> Pricer | None:
    """How the agent's ``deps.price_provider`` prices a usage (``None`` without one, or
    for an agent that cannot be built), built once per process like :func:`agent_tools`.

    A price provider is user code: a failing one is logged and prices nothing, so a page
    that shows costs never breaks.
    """
    try:
        spec = load_agent(name)
    except (LookupError, DeuzError):
        return None
    provider = getattr(spec.options.get("deps"), "price_provider", None)
    if provider is None:
        return None
    model_id = spec.model.model_id

    def price(usage: Usage) -> float | None:
        try:
            cost: float | None = provider.price_usage(model_id, usage)
        except Exception as error:
            logger.warning("deuz: pricing for agent %s failed: %s", name, error)
            return None
        return cost

    return price


@cache
def agent_deadlines(name: str) -> DeadlineRules:
    """The deadlines of the agent registered as ``name``, read once per process like
    :func:`agent_tools` (plain data: nothing of the agent's model is kept)."""
    return load_agent(name).deadline_rules


@cache
def agent_chains(name: str) -> Callable[[str, Sequence[str]], ApprovalChain | None]:
    """How the agent registered as ``name`` finds a call's approval chain, read once
    per process like :func:`agent_tools`."""
    return load_agent(name).approval_chain


@cache
def agent_steering(name: str) -> Steering:
    """The steering policy of the agent registered as ``name``, read once per process
    like :func:`agent_tools`."""
    return load_agent(name).steering


def forget_agents_on_setting_changed(*, setting: str, **kwargs: Any) -> None:
    """``setting_changed`` receiver, connected in ``AppConfig.ready``."""
    if setting == "DEUZ":
        agent_tools.cache_clear()
        agent_pricer.cache_clear()
        agent_deadlines.cache_clear()
        agent_steering.cache_clear()
        agent_chains.cache_clear()


def find_tool(
    tools: Mapping[str, Tool], name: str, agent_path: Sequence[str]
) -> Tool | None:
    """The tool a (possibly sub-agent's) gated call refers to, following ``agent_path``."""
    for agent in agent_path:
        holder = tools.get(agent)
        if holder is None or holder.sub_tools is None:
            return None
        tools = holder.sub_tools
    return tools.get(name)


def _chain_problem(tools: Mapping[str, Tool], path: Any, chain: Any) -> str | None:
    """Why ``approval_chains[path]`` cannot apply: an :class:`ApprovalChain` keyed by
    the path of a tool that needs approval."""
    if not isinstance(chain, ApprovalChain):
        return f"expected an ApprovalChain, got {chain!r}"
    if not isinstance(path, str) or not path:
        return "expected a tool path such as 'issue_refund' or 'researcher/save_note'"
    *agents, name = path.split("/")
    found = find_tool(tools, name, agents)
    if found is None or found.sub_tools is not None:
        return "the agent has no such tool (a sub-agent's tool is 'agent/tool')"
    if found.needs_approval is False:
        return f"{name} never needs approval, so its calls never wait for a person"
    return None


def _deadline_problem(
    tools: Mapping[str, Tool], path: Any, deadline: Any
) -> str | None:
    """Why ``deadlines[path]`` cannot apply: it must be a :class:`Deadline` keyed by the
    path of a tool that may need approval, or of a sub-agent."""
    if not isinstance(deadline, Deadline):
        return f"expected a Deadline, got {deadline!r}"
    if not isinstance(path, str) or not path:
        return "expected a tool path such as 'issue_refund' or 'researcher/save_note'"
    *agents, name = path.split("/")
    found = find_tool(tools, name, agents)
    if found is None:
        return "the agent has no such tool (a sub-agent's tool is 'agent/tool')"
    if found.sub_tools is None and found.needs_approval is False:
        return f"{name} never needs approval, so its calls never wait for a person"
    return None
