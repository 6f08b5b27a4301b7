"""The agent of the steering sweep: ``STEPS`` steps of a ``tick`` tool, then an answer to
the last thing it was told — each model turn and tool call taking a random moment, so a
SIGKILL lands anywhere: in a model call, in a tool, in a save, between a leg taking an
input and its checkpoint. The run's id is its prompt. ``tick`` is idempotent (a tick a
kill interrupted runs again), so every run heals with no person asked.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator
from typing import Any

from deuz_django.core import ModelRequest, ToolUsePart, tool
from deuz_django.core.testing import reply
from deuz_django.registry import AgentSpec

STEPS = 3


class SteeredModel:
    """Ticks ``STEPS`` times, then answers the last message, a word at a time."""

    provider = "scripted"
    model_id = "steered-model"

    async def stream(self, request: ModelRequest) -> AsyncIterator[Any]:
        ticks = sum(
            1
            for m in request.messages
            if m.role == "assistant"
            and any(isinstance(p, ToolUsePart) for p in m.parts)
        )
        if ticks < STEPS:
            answer = reply(
                tool_calls=[(f"t{ticks}", "tick", {"step": ticks})], usage=(3, 2)
            )
        else:
            words = f"Heard: {request.messages[-1].text}".split(" ")
            answer = reply(text=[f"{w} " for w in words], usage=(3, 2))
        await asyncio.sleep(random.uniform(0, 0.05))
        async for event in answer.play():
            await asyncio.sleep(random.uniform(0, 0.01))
            yield event


@tool(idempotent=True)
def tick(step: int) -> str:
    """One step of work (safe to repeat)."""
    time.sleep(random.uniform(0, 0.08))
    return f"tick {step}"


steered = AgentSpec(model=SteeredModel(), tools=[tick], max_steps=50)
