"""The approval charts: calls waiting now by age, and decision latency by tool."""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta

from django.db.models import (
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    IntegerField,
    Min,
    Q,
    Window,
)
from django.db.models.functions import RowNumber

from ..models import ApprovalStatus
from .values import Chart, Scope, Series, format_duration

PERCENTILES = (50, 95)
# Waiting approvals by age: (label, at least, less than).
AGE_BUCKETS: tuple[tuple[str, timedelta, timedelta | None], ...] = (
    ("< 5 min", timedelta(0), timedelta(minutes=5)),
    ("5–60 min", timedelta(minutes=5), timedelta(hours=1)),
    ("1–24 h", timedelta(hours=1), timedelta(days=1)),
    ("1–7 days", timedelta(days=1), timedelta(days=7)),
    ("> 7 days", timedelta(days=7), None),
)


def approvals_waiting(scope: Scope) -> list[Chart]:
    assert scope.approvals is not None
    now = scope.now
    buckets = {}
    for i, (_, low, high) in enumerate(AGE_BUCKETS):
        older = Q(created_at__lte=now - low)
        buckets[f"b{i}"] = Count(
            "pk", filter=older if high is None else older & Q(created_at__gt=now - high)
        )
    found = scope.approvals.filter(status=ApprovalStatus.PENDING).aggregate(
        oldest=Min("created_at"), **buckets
    )
    waiting = tuple(found[f"b{i}"] for i in range(len(AGE_BUCKETS)))
    notes: tuple[str, ...] = ()
    if found["oldest"] is not None:
        age = int((now - found["oldest"]).total_seconds())
        notes = (f"{sum(waiting)} waiting; the oldest for {format_duration(age)}.",)
    return [
        Chart(
            slug="waiting",
            title="Approvals waiting",
            summary="Calls waiting for a verdict now, by how long they have waited "
            "(whatever the period).",
            category_label="Waiting for",
            categories=tuple(label for label, _, _ in AGE_BUCKETS),
            series=(Series("waiting", waiting),),
            notes=notes,
        )
    ]


def decision_latency(scope: Scope) -> list[Chart]:
    """p50/p95 of the time from a call's approval request to its verdict, per tool —
    a person's verdict: what standing rules and grants decided at once is no wait."""
    found, sizes = _latency_percentiles(scope)
    tools = sorted(sizes)
    return [
        Chart(
            slug="latency",
            title="Decision latency by tool",
            summary="Time from a call's approval request to its verdict (approved or "
            "denied in the period): median and 95th percentile.",
            category_label="Tool",
            categories=tuple(tools),
            series=(
                *(
                    Series(f"p{p}", tuple(found[t][p] for t in tools), unit="seconds")
                    for p in PERCENTILES
                ),
                Series("decisions", tuple(sizes[t] for t in tools), plotted=False),
            ),
            stacked=False,
            horizontal=True,
        )
    ]


def _latency_percentiles(
    scope: Scope,
) -> tuple[dict[str, dict[int, float]], dict[str, int]]:
    """Each tool's latency at every one of :data:`PERCENTILES` (seconds), and how many
    decisions it had."""
    found: dict[str, dict[int, float]] = defaultdict(dict)
    sizes: dict[str, int] = {}
    for tool, n, rank, delay in _at_percentile_ranks(scope):
        sizes[tool] = n
        for p in PERCENTILES:
            if rank == (n * p + 99) // 100:
                found[tool][p] = delay.total_seconds()
    return found, sizes


def _at_percentile_ranks(scope: Scope) -> list[tuple[str, int, int, timedelta]]:
    """(tool, decisions, rank, latency) of the decisions at a percentile's rank.

    Nearest-rank percentiles: a window numbers each tool's decisions by latency and counts
    them, and only the rows at rank ⌈p·n/100⌉ leave the database.
    """
    assert scope.approvals is not None
    latency = ExpressionWrapper(
        F("decided_at") - F("created_at"), output_field=DurationField()
    )
    by_tool = [F("tool_name")]
    ranked = (
        scope.approvals.filter(
            status__in=[ApprovalStatus.APPROVED, ApprovalStatus.DENIED],
            decided_at__gte=scope.start,
            decided_by_rule__isnull=True,
            decided_by_grant__isnull=True,
        )
        .order_by()
        .annotate(
            latency=latency,
            n=Window(Count("pk"), partition_by=by_tool),
            rank=Window(
                RowNumber(), partition_by=by_tool, order_by=[latency.asc(), "pk"]
            ),
        )
    )
    at_rank = Q()
    for p in PERCENTILES:
        at_rank |= Q(
            rank=ExpressionWrapper((F("n") * p + 99) / 100, output_field=IntegerField())
        )
    return list(ranked.filter(at_rank).values_list("tool_name", "n", "rank", "latency"))
