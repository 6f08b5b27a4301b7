"""The run charts: runs by status, tokens and cost by agent, failures — per day of the
period, over root runs (a sub-agent's usage is already in its root's)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from datetime import date
from typing import Any

from django.db.models import BigIntegerField, Count, QuerySet, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Coalesce

from ..core.usage import Usage
from ..models import Run, RunStatus
from ..registry import Pricer, agent_pricer
from .values import Chart, Scope, Series, created_day

RECENT_FAILURES = 10
# Run.usage keys (the core's camelCase JSON form) summed per agent and day.
USAGE_KEYS = {
    "input_tokens": "inputTokens",
    "output_tokens": "outputTokens",
    "cached_read_tokens": "cachedReadTokens",
    "cache_write_tokens": "cacheWriteTokens",
    "cache_write_1h_tokens": "cacheWrite1hTokens",
    "total_tokens": "totalTokens",
}


def _runs_in_period(scope: Scope) -> QuerySet[Run]:
    assert scope.runs is not None
    # order_by(): the model's default ordering would join the GROUP BY.
    return scope.runs.filter(created_at__gte=scope.start).order_by()


def runs_by_status(scope: Scope) -> list[Chart]:
    rows = (
        _runs_in_period(scope)
        .annotate(day=created_day())
        .values_list("day", "status")
        .annotate(n=Count("pk"))
    )
    counts: dict[str, dict[date, float]] = defaultdict(dict)
    for day, status, n in rows:
        counts[status][day] = n
    return [
        scope.daily(
            "runs",
            "Runs by status",
            "Runs started each day, by their status now.",
            (
                Series(str(label), scope.per_day(counts[value]), tone=value)
                for value, label in RunStatus.choices
            ),
        )
    ]


def failures(scope: Scope) -> list[Chart]:
    rows = (
        _runs_in_period(scope)
        .exclude(last_error="")
        .annotate(day=created_day())
        .values_list("day")
        .annotate(n=Count("pk"))
    )
    failed = scope.per_day(dict(rows.values_list("day", "n")))
    return [
        scope.daily(
            "failures",
            "Failed runs",
            "Runs started each day whose last leg ended in an error.",
            [Series("failed", failed, tone="failed")],
        )
    ]


def recent_failures(scope: Scope) -> list[Run]:
    """The latest failed runs of the period, for the list under the failures chart."""
    if scope.runs is None:
        return []
    return list(
        _runs_in_period(scope)
        .exclude(last_error="")
        .order_by("-created_at")
        .only("run_id", "agent", "title", "last_error", "created_at")[:RECENT_FAILURES]
    )


def _usage_sum(key: str) -> Coalesce:
    return Coalesce(Sum(Cast(KT(f"usage__{key}"), BigIntegerField())), 0)


def tokens_and_cost(scope: Scope) -> list[Chart]:
    """Tokens and cost per agent and day. Cost is priced from the day's token sums (prices
    are per token, so the price of a sum is the sum of the runs' prices)."""
    rows = (
        _runs_in_period(scope)
        .annotate(day=created_day())
        .values("agent", "day")
        .annotate(**{attr: _usage_sum(key) for attr, key in USAGE_KEYS.items()})
    )
    tokens: dict[str, dict[date, float]] = defaultdict(dict)
    costs: dict[str, dict[date, float]] = defaultdict(dict)
    unpriced: set[str] = set()
    pricers: dict[str, Pricer | None] = {}
    for values in rows:
        # The usage sums are annotations the Django plugin cannot name from a ** dict.
        row: Mapping[str, Any] = values
        agent, day = row["agent"], row["day"]
        tokens[agent][day] = row["total_tokens"]
        if agent not in pricers:
            pricers[agent] = agent_pricer(agent)
        price = pricers[agent]
        usage = Usage(**{attr: int(row[attr]) for attr in USAGE_KEYS})
        cost = price(usage) if price is not None else None
        if cost is None:
            unpriced.add(agent)
        else:
            costs[agent][day] = costs[agent].get(day, 0) + cost
    agents = sorted(tokens)
    notes: tuple[str, ...] = ()
    if unpriced:
        # Said to the staff who read the dashboard; how to set prices is for the
        # developers, in the docs (docs/dashboard.md).
        notes = (
            "No prices are set for "
            + ", ".join(sorted(unpriced))
            + ", so their cost is not shown.",
        )
    return [
        scope.daily(
            "tokens",
            "Tokens by agent",
            "Total tokens of the runs started each day, by agent.",
            (Series(a, scope.per_day(tokens[a]), unit="tokens") for a in agents),
        ),
        scope.daily(
            "cost",
            "Cost by agent",
            "What those tokens cost (USD), by agent.",
            # An unpriced agent keeps its column (and colour), empty, with the note.
            (
                Series(a, scope.per_day(costs[a]), unit="usd")
                if a not in unpriced
                else Series(a, (None,) * len(scope.days), unit="usd", plotted=False)
                for a in agents
            ),
            notes=notes,
        ),
    ]
