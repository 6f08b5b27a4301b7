"""The numbers behind the admin dashboard, aggregated in the database.

Every chart is a :class:`Chart` — categories (days, age buckets, tools) and one or more
:class:`Series` over them — built by one function of a :class:`Scope` (whose rows, which
agent, which days): the run charts in ``runs``, the approval charts in ``approvals``, the
types in ``values``. ``CHARTS`` lists the builders in page order, each with the kind of
rows it reads; a new chart (recoveries, say) is one more builder and one more entry.

Queries group by day (``TruncDate``) and sum ``usage`` keys through JSON key transforms in
the database; percentiles are taken there too (a window ranks each tool's latencies and
only the ranked rows come back), so no query loads a row per run. The indexes they use are
declared on the models (``deuz_run_*``, ``deuz_approval_*``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..models import Run
from ..models.visibility import Person
from ..permissions import VIEW_ANY_RUN, is_signed_in
from ..registry import agent_names
from .approvals import approvals_waiting, decision_latency
from .runs import failures, recent_failures, runs_by_status, tokens_and_cost
from .values import (
    DEFAULT_PERIOD,
    PERIODS,
    VIEW_APPROVALS,
    Chart,
    Scope,
    Series,
    format_duration,
)

__all__ = [
    "CHARTS",
    "DEFAULT_PERIOD",
    "PERIODS",
    "Chart",
    "Scope",
    "Series",
    "agent_choices",
    "can_view_dashboard",
    "charts",
    "format_duration",
    "recent_failures",
]


def can_view_dashboard(user: Person | None) -> bool:
    """Staff who may see runs or approvals; each chart is shown to those who may see its rows."""
    return is_signed_in(user) and (
        user.has_perm(VIEW_ANY_RUN) or user.has_perm(VIEW_APPROVALS)
    )


# The page, in order: (the kind of rows a builder reads, the builder).
CHARTS: Sequence[tuple[str, Callable[[Scope], list[Chart]]]] = (
    ("runs", runs_by_status),
    ("approvals", approvals_waiting),
    ("approvals", decision_latency),
    ("runs", tokens_and_cost),
    ("runs", failures),
)


def charts(scope: Scope) -> list[Chart]:
    """Every chart the scope's user may see, in page order."""
    allowed = {
        "runs": scope.runs is not None,
        "approvals": scope.approvals is not None,
    }
    return [chart for kind, build in CHARTS if allowed[kind] for chart in build(scope)]


def agent_choices(user: Person | None) -> list[str]:
    """Agents to filter by: the registered ones and any the user's runs name."""
    seen = set(agent_names())
    seen.update(
        Run.objects.for_user(user).order_by().values_list("agent", flat=True).distinct()
    )
    return sorted(seen)
