"""Agents for the streaming tests: visible streaming, a pause to crash in, an approval.

They are callables (the registry calls them per use), so the environment of the process
running them decides their pace: DEUZ_TEST_CHUNKS text chunks per answer, each after
DEUZ_TEST_CHUNK_DELAY seconds.
"""

from __future__ import annotations

import os

from deuz_django.core import tool
from deuz_django.core.testing import reply
from deuz_django.registry import AgentSpec

from .agents import by_turn, record_effect, send_email


def _chunks(prefix: str) -> list[str]:
    count = int(os.environ.get("DEUZ_TEST_CHUNKS", "20"))
    return [f"{prefix}{i} " for i in range(count)]


def _chunk_delay() -> float:
    return float(os.environ.get("DEUZ_TEST_CHUNK_DELAY", "0"))


@tool
def tick(n: int) -> str:
    """Count a step."""
    record_effect(f"tick:{n}")
    return f"tick {n}"


def streamer() -> AgentSpec:
    """A tool step, then a long streamed answer (the place to crash in)."""
    return AgentSpec(
        model=by_turn(
            [
                reply(tool_calls=[("t1", "tick", {"n": 1})], usage=(5, 5)),
                reply(text=_chunks("w"), chunk_delay=_chunk_delay(), usage=(10, 10)),
            ]
        ),
        tools=[tick],
    )


def asker() -> AgentSpec:
    """Asks to send an email (the owner approves), then streams an answer."""
    return AgentSpec(
        model=by_turn(
            [
                reply(tool_calls=[("m1", "send_email", {"to": "ann@example.com"})]),
                reply(text=_chunks("sent"), chunk_delay=_chunk_delay()),
            ]
        ),
        tools=[send_email],
    )
