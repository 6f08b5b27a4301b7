"""Agents the steering tests register (tests/settings.py): each answers the last user
message by echoing it ("You said: …"), so a test sees what the model saw.

``DEUZ_TEST_CHUNK_SECONDS`` slows the echo down (one word a chunk), so an answer has a
middle to type into. ``pauser`` first calls ``pause``, a tool that waits for the file
``DEUZ_TEST_GATE`` and runs ``PAUSE_HOOKS`` (a test's way to act while a tool runs);
``emailer`` first calls ``send_email``, which needs approval.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from deuz_django.core import ModelRequest, tool
from deuz_django.core.testing import FunctionModel, ScriptedReply, reply
from deuz_django.registry import AgentSpec

from .agents import record_effect, send_email, wait_for_gate

PAUSE_HOOKS: list[Callable[[], None]] = []


def echo(text: str) -> ScriptedReply:
    """``You said: text``, a word a chunk, ``DEUZ_TEST_CHUNK_SECONDS`` apart."""
    words = f"You said: {text}".split(" ")
    chunks = [word if i == 0 else f" {word}" for i, word in enumerate(words)]
    delay = float(os.environ.get("DEUZ_TEST_CHUNK_SECONDS", "0"))
    return reply(text=chunks, chunk_delay=delay, usage=(5, 3))


def echoing(first: Sequence[tuple[str, str, dict[str, object]]] = ()) -> FunctionModel:
    """A model that makes the ``first`` calls in its first turn, then echoes the last
    user message (or says ``Done.`` after tool results)."""

    def respond(request: ModelRequest) -> ScriptedReply:
        if first and not any(m.role == "assistant" for m in request.messages):
            return reply(tool_calls=first, usage=(4, 2))
        last = request.messages[-1]
        if last.role == "user":
            return echo(last.text)
        return reply(text="Done.", usage=(3, 1))

    return FunctionModel(respond)


@tool
def pause(label: str) -> str:
    """Wait for the test's gate (not gated: the leg holds the run meanwhile)."""
    record_effect(f"pause:{label}:start")
    wait_for_gate(PAUSE_HOOKS)
    record_effect(f"pause:{label}:end")
    return f"paused {label}"


PAUSE = [("p1", "pause", {"label": "once"})]
ASK = [("e1", "send_email", {"to": "ann@example.com"})]

echoer = AgentSpec(model=echoing(), max_steps=10)
echoer_interrupt = AgentSpec(model=echoing(), max_steps=10, steering="interrupt")
echoer_reject = AgentSpec(model=echoing(), max_steps=10, steering="reject")
pauser = AgentSpec(model=echoing(PAUSE), tools=[pause], max_steps=10)
pauser_interrupt = AgentSpec(
    model=echoing(PAUSE), tools=[pause], max_steps=10, steering="interrupt"
)
pauser_reject = AgentSpec(
    model=echoing(PAUSE), tools=[pause], max_steps=10, steering="reject"
)
emailer = AgentSpec(model=echoing(ASK), tools=[send_email], max_steps=10)
emailer_reject = AgentSpec(
    model=echoing(ASK), tools=[send_email], max_steps=10, steering="reject"
)
