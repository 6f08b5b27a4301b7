"""Agents of the protocol tests (registered in tests/settings.py).

``agui_mailer`` streams a sentence, calls the gated ``send_email`` (its run's owner may
approve it), then streams what came of it: DEUZ_TEST_CHUNKS chunks of text per answer,
each after DEUZ_TEST_CHUNK_DELAY seconds (the place to drop a connection in)."""

from __future__ import annotations

import os

from deuz_django.core.testing import reply
from deuz_django.registry import AgentSpec
from tests.django.agents import by_turn, send_email


def _chunks(prefix: str) -> list[str]:
    count = int(os.environ.get("DEUZ_TEST_CHUNKS", "3"))
    return [f"{prefix}{i} " for i in range(count)]


def mailer() -> AgentSpec:
    delay = float(os.environ.get("DEUZ_TEST_CHUNK_DELAY", "0"))
    return AgentSpec(
        model=by_turn(
            [
                reply(
                    text=_chunks("asking "),
                    chunk_delay=delay,
                    tool_calls=[("e1", "send_email", {"to": "ann@example.com"})],
                ),
                reply(text=_chunks("sent "), chunk_delay=delay),
            ]
        ),
        tools=[send_email],
    )
