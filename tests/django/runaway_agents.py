"""Agents that would run away: models that re-use call ids, re-ask what was just
decided, or never stop calling tools (see tests/settings.py for their names)."""

from __future__ import annotations

from deuz_django.core import ModelRequest, tool
from deuz_django.core.testing import FunctionModel, ScriptedModel, ScriptedReply, reply
from deuz_django.registry import AgentSpec

from .agents import echo, record_effect, send_email

EMAIL = {"to": "ann@example.com"}


def per_leg() -> AgentSpec:
    """The offline model of docs/runtime.md built inside the agent factory, so every leg starts
    its script again: each new leg's model re-issues call ``toolu_1`` (the issue's
    reproduction — a real model re-using a call id does the same)."""
    return AgentSpec(
        model=ScriptedModel(
            [
                reply(tool_calls=[("toolu_1", "send_email", EMAIL)], usage=(10, 5)),
                reply(text="Sent.", usage=(20, 6)),
            ]
        ),
        tools=[send_email],
        max_steps=5,
    )


@tool(needs_approval=True)
def notify(to: str, note: str) -> str:
    """Notify someone (each call asks, with its own note)."""
    record_effect(f"notify:{to}:{note}")
    return f"notified {to}"


def _numbered(request: ModelRequest) -> ScriptedReply:
    """Every turn calls ``notify`` again, with call id ``call_0`` (as servers that
    number calls per response do) and a new note: never the same call twice."""
    turns = sum(1 for m in request.messages if m.role == "assistant")
    return reply(
        tool_calls=[("call_0", "notify", {"to": "ann", "note": f"n{turns}"})],
        usage=(10, 5),
    )


# A rule approves each ``notify`` ask (tests make it): a new leg follows every one.
endless_asks = AgentSpec(
    model=FunctionModel(_numbered), tools=[notify], limits={"LEGS": 3}
)


def _echo_forever(request: ModelRequest) -> ScriptedReply:
    turns = sum(1 for m in request.messages if m.role == "assistant")
    return reply(
        tool_calls=[(f"c{turns}", "echo", {"text": f"t{turns}"})], usage=(10, 5)
    )


# Ungated tool calls for ever, within one leg of up to 50 steps.
echo_forever = AgentSpec(
    model=FunctionModel(_echo_forever),
    tools=[echo],
    max_steps=50,
    limits={"EXECUTIONS_PER_TOOL": 3, "STEPS": None},
)
steps_bounded = AgentSpec(
    model=FunctionModel(_echo_forever),
    tools=[echo],
    max_steps=50,
    limits={"STEPS": 4, "EXECUTIONS_PER_TOOL": None},
)
tokens_bounded = AgentSpec(
    model=FunctionModel(_echo_forever),
    tools=[echo],
    max_steps=50,
    limits={"TOKENS": 40, "EXECUTIONS_PER_TOOL": None},
)
