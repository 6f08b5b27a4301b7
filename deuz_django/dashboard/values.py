"""The dashboard's values: a :class:`Chart` of :class:`Series` over categories, and the
:class:`Scope` a chart is built for (whose rows, which agent, which days)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta

from django.db.models.functions import TruncDate
from django.utils import timezone

from ..models import Approval, ApprovalQuerySet, Run, RunQuerySet
from ..models.visibility import Person
from ..permissions import VIEW_ANY_RUN

VIEW_APPROVALS = "deuz_django.view_approval"
PERIODS = (7, 30, 90, 365)  # days
DEFAULT_PERIOD = 30


@dataclass(frozen=True, slots=True)
class Series:
    """One named row of values over a chart's categories; ``unit`` says how to print them.

    A series that is not ``plotted`` appears in the chart's table only (e.g. sample sizes).
    """

    name: str
    values: tuple[float | None, ...]
    unit: str = "count"  # count | tokens | usd | seconds
    plotted: bool = True
    tone: str | None = None  # a colour with a meaning (a run status, "failed")


@dataclass(frozen=True, slots=True)
class Chart:
    slug: str
    title: str
    summary: str
    category_label: str
    categories: tuple[str, ...]
    series: tuple[Series, ...]
    stacked: bool = True
    horizontal: bool = False
    notes: tuple[str, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not any(v for s in self.series if s.plotted for v in s.values)


@dataclass(frozen=True, slots=True)
class Scope:
    """What the dashboard looks at: the rows the user may see (``None`` when the user may not
    see that kind at all), narrowed to one agent, over the period's days."""

    runs: RunQuerySet | None
    approvals: ApprovalQuerySet | None
    agent: str | None
    days: tuple[date, ...]
    now: datetime = field(default_factory=timezone.now)

    @classmethod
    def for_user(cls, user: Person, *, agent: str | None, period: int) -> Scope:
        runs = Run.objects.for_user(user)
        approvals = Approval.objects.for_user(user)
        if agent:
            runs = runs.filter(agent=agent)
            approvals = approvals.filter(run__agent=agent)
        today = timezone.localdate()
        return cls(
            runs=runs if user.has_perm(VIEW_ANY_RUN) else None,
            approvals=approvals if user.has_perm(VIEW_APPROVALS) else None,
            agent=agent or None,
            days=tuple(today - timedelta(days=n) for n in reversed(range(period))),
        )

    @property
    def start(self) -> datetime:
        """The period's first moment: local midnight of its first day."""
        return timezone.make_aware(datetime.combine(self.days[0], time.min))

    def per_day(self, counts: dict[date, float]) -> tuple[float, ...]:
        """Values for every day of the period, 0 where ``counts`` has none."""
        return tuple(counts.get(day, 0) for day in self.days)

    def daily(
        self,
        slug: str,
        title: str,
        summary: str,
        series: Iterable[Series],
        *,
        notes: tuple[str, ...] = (),
    ) -> Chart:
        """A chart over the period's days (ISO dates, oldest first)."""
        return Chart(
            slug=slug,
            title=title,
            summary=summary,
            category_label="Day",
            categories=tuple(day.isoformat() for day in self.days),
            series=tuple(series),
            notes=notes,
        )


def created_day() -> TruncDate:
    """The local day a row was created on (the site's ``TIME_ZONE``)."""
    return TruncDate("created_at", tzinfo=timezone.get_current_timezone())


def format_duration(seconds: float) -> str:
    """``45s``, ``12m 5s``, ``3h 20m``, ``2d 4h``: two units at most."""
    whole = round(seconds)
    for size, unit, smaller, small_unit in (
        (86400, "d", 3600, "h"),
        (3600, "h", 60, "m"),
        (60, "m", 1, "s"),
    ):
        if whole >= size:
            rest = (whole % size) // smaller
            return f"{whole // size}{unit}" + (f" {rest}{small_unit}" if rest else "")
    return f"{whole}s"
