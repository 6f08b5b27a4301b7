"""The admin dashboard: each chart's numbers against known rows, who may see it, the agent
and period filters, bad filter input, an empty database, and a query count that does not
grow with the number of runs."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, time, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from deuz_django import dashboard
from deuz_django.core import Usage
from deuz_django.core.providers import DEFAULT_PRICES
from deuz_django.dashboard import Chart, Scope
from deuz_django.models import Approval, StandingRule
from tests.django.dashboard_support import approval, run, usage

pytestmark = pytest.mark.django_db

URL = "/admin/deuz_django/dashboard/"
VIEWER = ("deuz_django.view_run", "deuz_django.view_approval")


@pytest.fixture
def root(make_user: Callable[..., Any]) -> Any:
    return make_user("root", superuser=True)


def day(moment: Any) -> str:
    return timezone.localdate(moment).isoformat()


def built(user: Any, *, agent: str | None = None, period: int = 30) -> dict[str, Chart]:
    scope = Scope.for_user(user, agent=agent, period=period)
    return {chart.slug: chart for chart in dashboard.charts(scope)}


def at(chart: Chart, category: str) -> dict[str, float | None]:
    """Each series' value for one category."""
    index = chart.categories.index(category)
    return {s.name: s.values[index] for s in chart.series}


def totals(chart: Chart) -> dict[str, float]:
    return {s.name: sum(v or 0 for v in s.values) for s in chart.series}


# -- the numbers ----------------------------------------------------------------------------


def test_runs_by_status_counts_the_runs_started_each_day(root: Any) -> None:
    now = timezone.now()
    yesterday = now - timedelta(days=1)
    for i, status in enumerate(["completed", "completed", "suspended"]):
        run(f"today-{i}", status=status, created=now)
    run("yesterday", status="running", created=yesterday)
    run("long-ago", created=now - timedelta(days=40))  # outside the 30 days
    parent = run("parent", created=now)
    run("parent::researcher#c1", parent=parent, created=now)  # a sub-agent: not counted

    runs = built(root)["runs"]

    assert len(runs.categories) == 30
    assert runs.categories[-1] == day(now)
    assert at(runs, day(now)) == {
        "running": 0,
        "suspended": 1,
        "completed": 3,
        "stopped": 0,
    }
    assert at(runs, day(yesterday)) == {
        "running": 1,
        "suspended": 0,
        "completed": 0,
        "stopped": 0,
    }
    assert totals(runs) == {"running": 1, "suspended": 1, "completed": 3, "stopped": 0}


def test_waiting_approvals_are_bucketed_by_age(root: Any) -> None:
    now = timezone.now()
    host = run("host", status="suspended", created=now - timedelta(days=9))
    for approval_id, age in [
        ("fresh", timedelta(minutes=1)),
        ("minutes", timedelta(minutes=20)),
        ("hours", timedelta(hours=3)),
        ("hours-2", timedelta(hours=20)),
        ("days", timedelta(days=2)),
        ("weeks", timedelta(days=8)),
    ]:
        approval(host, approval_id, created=now - age)
    approval(
        host, "decided", created=now - timedelta(hours=1), decided_after=timedelta(1)
    )

    waiting = built(root)["waiting"]

    assert waiting.categories == (
        "< 5 min",
        "5–60 min",
        "1–24 h",
        "1–7 days",
        "> 7 days",
    )
    assert waiting.series[0].values == (1, 1, 2, 1, 1)
    assert waiting.notes == ("6 waiting; the oldest for 8d.",)


def test_decision_latency_has_nearest_rank_p50_and_p95_per_tool(root: Any) -> None:
    now = timezone.now()
    host = run("host", created=now - timedelta(hours=2))
    for i, seconds in enumerate([30, 10, 20, 40]):  # p50 = 20s, p95 = 40s
        approval(
            host,
            f"e{i}",
            tool="send_email",
            created=now - timedelta(hours=1),
            decided_after=timedelta(seconds=seconds),
        )
    for i in range(20):  # 1..20 minutes: p50 = rank 10, p95 = rank 19
        approval(
            host,
            f"r{i}",
            tool="issue_refund",
            created=now - timedelta(hours=1),
            decided_after=timedelta(minutes=i + 1),
            status="denied" if i % 2 else "approved",
        )
    approval(host, "waiting", tool="send_email", created=now)  # undecided: not counted
    approval(
        host,
        "expired",
        tool="send_email",
        created=now - timedelta(hours=1),
        decided_after=timedelta(hours=9),
        status="expired",  # the system's verdict, not a person's: not counted
    )
    automatic = approval(
        host,
        "by-rule",
        tool="send_email",
        created=now - timedelta(hours=1),
        decided_after=timedelta(0),
    )
    rule = StandingRule.objects.create(
        tool_name="send_email", action="approve", reason="x"
    )
    Approval.objects.filter(pk=automatic.pk).update(decided_by_rule=rule)  # no wait

    latency = built(root)["latency"]

    assert latency.categories == ("issue_refund", "send_email")
    assert at(latency, "send_email") == {"p50": 20.0, "p95": 40.0, "decisions": 4}
    assert at(latency, "issue_refund") == {"p50": 600.0, "p95": 1140.0, "decisions": 20}


def test_tokens_and_cost_are_summed_per_agent_and_day(root: Any) -> None:
    now = timezone.now()
    earlier = now - timedelta(days=3)
    run("s1", agent="support", created=now, tokens=usage(1000, 200))
    run("s2", agent="support", created=now, tokens=usage(3000, 800, cached_read=500))
    run("s3", agent="support", created=earlier, tokens=usage(10, 5))
    run("r1", agent="research", created=now, tokens=usage(2000, 1000))
    run("u1", agent="gated", created=now, tokens=usage(7, 3))  # no price provider
    run("empty", agent="support", created=now)  # no usage yet

    charts = built(root)
    tokens, cost = charts["tokens"], charts["cost"]

    assert at(tokens, day(now)) == {"gated": 10, "research": 3000, "support": 5500}
    assert at(tokens, day(earlier)) == {"gated": 0, "research": 0, "support": 15}
    support_today = DEFAULT_PRICES.price_usage(
        "gpt-4.1-mini",
        Usage(input_tokens=4000, output_tokens=1000, cached_read_tokens=500),
    )
    research_today = DEFAULT_PRICES.price_usage(
        "claude-haiku-4-5", Usage(input_tokens=2000, output_tokens=1000)
    )
    priced = {name: value for name, value in at(cost, day(now)).items() if value}
    assert priced == pytest.approx(
        {"research": research_today, "support": support_today}
    )
    [unpriced] = [s for s in cost.series if not s.plotted]
    assert unpriced.name == "gated"
    assert set(unpriced.values) == {None}
    assert at(cost, day(earlier))["support"] == pytest.approx(
        DEFAULT_PRICES.price_usage(
            "gpt-4.1-mini", Usage(input_tokens=10, output_tokens=5)
        )
    )
    assert cost.notes == ("No prices are set for gated, so their cost is not shown.",)


def test_failures_count_runs_with_a_last_error_and_list_the_latest(root: Any) -> None:
    now = timezone.now()
    run("ok", created=now)
    run("failed-1", created=now - timedelta(hours=2), error="ModelTimeoutError: late")
    run("failed-2", created=now - timedelta(hours=1), error="RateLimitError: 429")
    run("failed-old", created=now - timedelta(days=2), error="boom")

    scope = Scope.for_user(root, agent=None, period=30)
    failures = {c.slug: c for c in dashboard.charts(scope)}["failures"]

    assert at(failures, day(now - timedelta(hours=1)))["failed"] >= 1
    assert totals(failures) == {"failed": 3}
    assert [r.run_id for r in dashboard.recent_failures(scope)] == [
        "failed-2",
        "failed-1",
        "failed-old",
    ]


@override_settings(TIME_ZONE="Pacific/Auckland")
def test_days_are_the_sites_local_days(root: Any) -> None:
    with timezone.override("Pacific/Auckland"):
        midnight = timezone.make_aware(datetime.combine(timezone.localdate(), time.min))
        run("just-after", created=midnight + timedelta(minutes=5))
        run("just-before", created=midnight - timedelta(minutes=5))
        runs = built(root)["runs"]
        today = timezone.localdate()
    assert at(runs, today.isoformat())["completed"] == 1
    assert at(runs, (today - timedelta(days=1)).isoformat())["completed"] == 1


# -- filters --------------------------------------------------------------------------------


def test_the_agent_filter_narrows_runs_and_approvals(root: Any) -> None:
    now = timezone.now()
    mine = run("s", agent="support", created=now, tokens=usage(10, 10))
    theirs = run("r", agent="research", created=now, tokens=usage(20, 20))
    approval(mine, "a1", created=now)
    approval(theirs, "a2", created=now)

    charts = built(root, agent="support")

    assert totals(charts["runs"])["completed"] == 1
    assert totals(charts["waiting"]) == {"waiting": 1}
    assert [s.name for s in charts["tokens"].series] == ["support"]


def test_the_period_filter_drops_older_days(root: Any) -> None:
    now = timezone.now()
    run("recent", created=now - timedelta(days=2))
    run("older", created=now - timedelta(days=20))

    week, month = built(root, period=7)["runs"], built(root, period=30)["runs"]

    assert len(week.categories) == 7
    assert totals(week)["completed"] == 1
    assert totals(month)["completed"] == 2


def test_the_page_applies_the_filters_from_the_query_string(
    client: Any, root: Any
) -> None:
    now = timezone.now()
    run("s", agent="support", created=now)
    run("r", agent="research", created=now - timedelta(days=10))
    client.force_login(root)

    page = client.get(URL, {"agent": "research", "period": "7"})

    assert page.status_code == 200
    assert page.context["scope"].agent == "research"
    assert len(page.context["scope"].days) == 7
    runs = {v.chart.slug: v.chart for v in page.context["charts"]}["runs"]
    assert totals(runs)["completed"] == 0


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"period": "13"}, "Period: Select a valid choice. 13 is not one of"),
        ({"period": "week"}, "Period: Select a valid choice. week is not one of"),
        ({"agent": "nobody"}, "Agent: Select a valid choice. nobody is not one of"),
        ({"agent": "<script>x</script>"}, "&lt;script&gt;x&lt;/script&gt;"),
    ],
)
def test_bad_filters_get_a_clear_message_and_no_charts(
    client: Any, root: Any, query: dict[str, str], message: str
) -> None:
    client.force_login(root)
    page = client.get(URL, query)

    assert page.status_code == 400
    body = page.content.decode()
    assert "The dashboard cannot show these filters" in body
    assert message in body
    assert "<script>x</script>" not in body
    assert "deuz-chart-svg" not in body


# -- who may see it -------------------------------------------------------------------------


def test_anonymous_and_non_staff_users_are_sent_to_the_admin_login(
    client: Any, make_user: Callable[..., Any]
) -> None:
    assert client.get(URL)["Location"].startswith("/admin/login/")
    client.force_login(make_user("visitor", *VIEWER))  # permissions, but not staff
    assert client.get(URL)["Location"].startswith("/admin/login/")


def test_staff_without_the_view_permissions_get_403(
    client: Any, make_user: Callable[..., Any]
) -> None:
    client.force_login(make_user("clerk", "deuz_django.decide_approval", staff=True))
    assert client.get(URL).status_code == 403
    assert b"deuz_django/dashboard" not in client.get("/admin/").content


def test_each_view_permission_shows_its_own_charts(
    client: Any, make_user: Callable[..., Any]
) -> None:
    slugs = {}
    for name, perm in [("runs", "deuz_django.view_run"), ("queue", VIEWER[1])]:
        client.force_login(make_user(name, perm, staff=True))
        page = client.get(URL)
        assert page.status_code == 200
        slugs[name] = [v.chart.slug for v in page.context["charts"]]
        assert b'href="/admin/deuz_django/dashboard/"' in client.get("/admin/").content
    assert slugs == {
        "runs": ["runs", "tokens", "cost", "failures"],
        "queue": ["waiting", "latency"],
    }


def test_approvals_are_those_of_runs_the_user_may_see(
    make_user: Callable[..., Any],
) -> None:
    now = timezone.now()
    queue_only = make_user("queue", VIEWER[1], staff=True)  # sees their own runs only
    approval(run("mine", owner=queue_only, created=now), "a1", created=now)
    approval(run("other", created=now), "a2", created=now)

    assert totals(built(queue_only)["waiting"]) == {"waiting": 1}


# -- the page -------------------------------------------------------------------------------


def test_an_empty_database_renders_every_chart_as_empty(client: Any, root: Any) -> None:
    client.force_login(root)
    page = client.get(URL)

    assert page.status_code == 200
    body = page.content.decode()
    assert body.count("Nothing in this period.") == 6
    assert '<rect class="deuz-bar' not in body


def test_bars_carry_their_numbers_in_titles_and_tables(client: Any, root: Any) -> None:
    now = timezone.now()
    run("s1", created=now, tokens=usage(1200, 34))
    client.force_login(root)

    body = client.get(URL).content.decode()

    assert f"<title>{day(now)} · completed: 1</title>" in body
    assert f"<title>{day(now)} · support: 1,234</title>" in body
    assert f'<th scope="row">{day(now)}</th><td>1,234</td>' in body


def test_the_page_makes_the_same_queries_for_ten_runs_or_two_hundred(
    client: Any, root: Any
) -> None:
    client.force_login(root)
    now = timezone.now()

    def queries_with(count: int) -> int:
        for i in range(count):
            host = run(
                f"run-{count}-{i}",
                agent=("support", "research")[i % 2],
                created=now - timedelta(days=i % 25),
                tokens=usage(100, 10),
                error="boom" if i % 9 == 0 else "",
            )
            approval(
                host,
                f"a{i}",
                tool=f"tool_{i % 3}",
                created=now - timedelta(hours=i),
                decided_after=timedelta(seconds=i + 1) if i % 2 else None,
            )
        with CaptureQueriesContext(connection) as captured:
            assert client.get(URL).status_code == 200
        return len(captured.captured_queries)

    assert queries_with(10) == queries_with(200)


def test_the_run_list_links_to_the_dashboard(
    client: Any, make_user: Callable[..., Any]
) -> None:
    client.force_login(make_user("lead", *VIEWER, staff=True))
    page = client.get("/admin/deuz_django/run/")
    assert page.status_code == 200
    assert b'href="/admin/deuz_django/dashboard/" class="viewlink">Dashboard' in (
        page.content
    )
