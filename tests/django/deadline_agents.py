"""Agents with deadlines (registered in tests/settings.py).

``timed``: like ``gated`` (a staff-approved ``refund`` and an owner-approved
``send_email``), with a reminder after 30 minutes and an escalation to the group "Finance
leads" at 4 hours (4 more hours, then a timeout) for refunds, and a one-hour timeout for
every other gated call. ``timed_nested``: the researcher sub-agent's gated ``send_email``
times out after 10 minutes (its key is the sub-agent). Tests move a row's times rather
than wait.
"""

from __future__ import annotations

from datetime import timedelta

from deuz_django.core import agent_tool
from deuz_django.core.testing import reply
from deuz_django.deadlines import Deadline
from deuz_django.registry import AgentSpec
from tests.django.agents import by_turn, refund, send_email

REFUND_DEADLINE = Deadline(
    remind_after=timedelta(minutes=30),
    after=timedelta(hours=4),
    then="escalate",
    escalate_to="group:Finance leads",
    extend_by=timedelta(hours=4),
)

timed = AgentSpec(
    model=by_turn(
        [
            reply(
                tool_calls=[
                    ("r1", "refund", {"order_id": "A-1", "amount": 5.0}),
                    ("e1", "send_email", {"to": "ann@example.com"}),
                ]
            ),
            reply(text="Refund and email handled."),
        ]
    ),
    tools=[refund, send_email],
    deadline=Deadline(after=timedelta(hours=1)),
    deadlines={"refund": REFUND_DEADLINE},
)

timed_nested = AgentSpec(
    model=by_turn(
        [
            reply(tool_calls=[("p1", "researcher", {"prompt": "look it up"})]),
            reply(text="The researcher finished."),
        ]
    ),
    tools=[
        agent_tool(
            name="researcher",
            model=by_turn(
                [
                    reply(tool_calls=[("x1", "send_email", {"to": "bob@example.com"})]),
                    reply(text="Research sent."),
                ]
            ),
            tools=[send_email],
        )
    ],
    deadlines={"researcher": Deadline(after=timedelta(minutes=10))},
)
