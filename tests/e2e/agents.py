"""An agent with long tool inputs and results, for the admin's layout tests (registered as
``verbose`` in tests/settings.py): a report lookup whose result is many lines of JSON, then
a gated ``publish`` call whose input is a long text."""

from __future__ import annotations

from deuz_django.core import tool
from deuz_django.core.testing import reply
from deuz_django.registry import AgentSpec
from tests.django.agents import by_turn

QUERY = "quarterly refunds by region, product line and payment method " * 6
BODY = (
    "Refunds rose in the northern region after the spring launch; most were for "
    "late deliveries, which the new carrier contract should address. "
) * 12


@tool
def fetch_report(query: str) -> dict[str, object]:
    """Fetch a report: a long, nested JSON result."""
    return {
        "query": query,
        "rows": [
            {"region": f"region-{i}", "refunds": i * 7, "share": round(i / 60, 4)}
            for i in range(60)
        ],
    }


@tool(needs_approval=True)
def publish(title: str, body: str) -> str:
    """Publish a report (a person approves it)."""
    return f"Published '{title}'."


verbose = AgentSpec(
    model=by_turn(
        [
            reply(tool_calls=[("f1", "fetch_report", {"query": QUERY})]),
            reply(
                tool_calls=[("p1", "publish", {"title": "Refunds, Q3", "body": BODY})]
            ),
            reply(text="Published the report."),
        ]
    ),
    tools=[fetch_report, publish],
)
