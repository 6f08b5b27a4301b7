"""Agents the standing-rule and grant tests register (see tests/settings.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from deuz_django.core import ModelRequest
from deuz_django.core.testing import FunctionModel, ScriptedReply, reply
from deuz_django.deadlines import Deadline
from deuz_django.registry import AgentSpec

from .agents import by_turn, send_email

# Emails Ann, then Bob, in two steps: a grant made on the first covers the second.
twice = AgentSpec(
    model=by_turn(
        [
            reply(tool_calls=[("e1", "send_email", {"to": "ann@example.com"})]),
            reply(tool_calls=[("e2", "send_email", {"to": "bob@example.com"})]),
            reply(text="Both sent."),
        ]
    ),
    tools=[send_email],
)


def _again(request: ModelRequest) -> ScriptedReply:
    turns = sum(1 for m in request.messages if m.role == "assistant")
    to = f"ann+{turns}@example.com"
    return reply(tool_calls=[(f"m{turns}", "send_email", {"to": to})])


# Never gives up: asks for another email after every answer, denied or not — each to
# another address (the same call asked again right after its verdict would be a loop,
# which stops the run: tests/django/runs/test_runaway_runs.py).
repeater = AgentSpec(model=FunctionModel(_again), tools=[send_email], max_steps=3)
# The same, and a call nobody decides times out after 10 minutes.
timed_repeater = replace(repeater, deadline=Deadline(after=timedelta(minutes=10)))
