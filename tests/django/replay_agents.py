"""Agents the replay tests register (see tests/settings.py): ``mailing`` makes the original
runs (an ``echo`` and a gated ``send_email``, both logging their effects), ``mailing_v2``
replays them with another model and prompt, ``diverging`` asks for a call they never made.

``mailing_v2``'s model keeps every request it received in ``SEEN`` (what a replay showed
the model: its system prompt, the recorded results); its last turn waits
``DEUZ_TEST_REPLAY_DELAY`` seconds when that is set, so a test can kill its leg mid-call.
"""

from __future__ import annotations

import os

from deuz_django.core import ModelRequest
from deuz_django.core.testing import FunctionModel, ScriptedReply, reply
from deuz_django.registry import AgentSpec
from tests.django.agents import by_turn, echo, send_email

SEEN: list[ModelRequest] = []

mailing = AgentSpec(
    model=by_turn(
        [
            reply(
                tool_calls=[
                    ("c1", "echo", {"text": "hi"}),
                    ("e1", "send_email", {"to": "ann@example.com"}),
                ],
                usage=(10, 5),
            ),
            reply(text="Mailed Ann.", usage=(20, 6)),
        ]
    ),
    tools=[echo, send_email],
    system="You mail people.",
)


def _v2(request: ModelRequest) -> ScriptedReply:
    SEEN.append(request)
    if not any(m.role == "assistant" for m in request.messages):
        # The same calls as the original's, in another order.
        return reply(
            tool_calls=[
                ("x1", "send_email", {"to": "ann@example.com"}),
                ("x2", "echo", {"text": "hi"}),
            ],
            usage=(8, 4),
        )
    delay = float(os.environ.get("DEUZ_TEST_REPLAY_DELAY", "0"))
    return reply(text="Mailed Ann, briefly.", usage=(9, 3), delay=delay)


mailing_v2 = AgentSpec(
    model=FunctionModel(_v2, model_id="function-v2"),
    tools=[echo, send_email],
    system="You mail people, briefly.",
)

diverging = AgentSpec(
    model=by_turn(
        [
            reply(tool_calls=[("d1", "echo", {"text": "hi"})]),
            reply(tool_calls=[("d2", "send_email", {"to": "bob@example.com"})]),
            reply(text="Never said."),
        ]
    ),
    tools=[echo, send_email],
)
