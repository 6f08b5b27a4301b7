"""Agents of the browser tests (registered in tests/settings.py).

``verbose``, with long tool inputs and results, for the admin's layout tests: a report
lookup whose result is many lines of JSON, then a gated ``publish`` call whose input is a
long text. ``editor``, for the chat component's edit-then-approve: a gated call of an
``editable`` tool that its run's owner may approve."""

from __future__ import annotations

from deuz_django.core import ModelRequest, ToolResultPart, tool
from deuz_django.core.testing import FunctionModel, ScriptedReply, reply
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


@tool(needs_approval=True, editable=True)
def transfer(to: str, amount: float) -> str:
    """Transfer money (the owner approves, and may change the amount first)."""
    return f"Transferred {amount:.2f} to {to}."


def _transferred(request: ModelRequest) -> ScriptedReply:
    last = request.messages[-1]
    if last.role != "tool":
        return reply(tool_calls=[("t1", "transfer", {"to": "ann", "amount": 50.0})])
    [part] = [p for p in last.parts if isinstance(p, ToolResultPart)]
    # An edited call's result says so: {"result", "editedInput", "note"}.
    result = part.result["result"] if isinstance(part.result, dict) else part.result
    return reply(text=f"Done: {result}")


# ``editor``: a gated call of an editable tool, then what the call returned.
editor = AgentSpec(model=FunctionModel(_transferred), tools=[transfer])
