"""Agents that ask a person (registered in tests/settings.py).

``questioner`` asks, through the built-in ``ask_human``, how to refund order A-1 (card or
store credit; the question times out after an hour) and then says what it got back.
``form_asker`` asks for a structured answer: a JSON schema with an integer ``amount``.
``client_caller`` calls ``pick_colour``, a client tool (no ``execute``), and says what
came back. Their models read the tool result, so a test sees what the model was told.
"""

from __future__ import annotations

from datetime import timedelta

from deuz_django.core import ModelRequest, Tool, ToolResultPart, ask_human
from deuz_django.core.testing import FunctionModel, ScriptedReply, reply
from deuz_django.deadlines import Deadline
from deuz_django.registry import AgentSpec

REFUND_QUESTION = {
    "question": "Refund order A-1 to the card or as store credit?",
    "choices": ["card", "store credit"],
}
AMOUNT_QUESTION = {
    "question": "How much should we refund?",
    "schema": {
        "type": "object",
        "properties": {"amount": {"type": "integer", "minimum": 1}},
        "required": ["amount"],
    },
}


def asking(arguments: dict[str, object]) -> FunctionModel:
    """First ask ``ask_human`` with ``arguments``, then report what came back."""

    def respond(request: ModelRequest) -> ScriptedReply:
        last = request.messages[-1]
        if last.role != "tool":
            return reply(tool_calls=[("q1", "ask_human", arguments)])
        [answered] = [p for p in last.parts if isinstance(p, ToolResultPart)]
        status = "Error" if answered.is_error else "Answer"
        return reply(text=f"{status}: {answered.result}")

    return FunctionModel(respond)


questioner = AgentSpec(
    model=asking(REFUND_QUESTION),
    tools=[ask_human],
    deadline=Deadline(after=timedelta(hours=1)),
)

form_asker = AgentSpec(model=asking(AMOUNT_QUESTION), tools=[ask_human])


pick_colour = Tool(
    name="pick_colour",
    description="Ask the customer's device which colour they picked.",
)  # no execute: a client tool, run by the client

client_caller = AgentSpec(
    model=FunctionModel(
        lambda request: (
            reply(tool_calls=[("c1", "pick_colour", {})])
            if request.messages[-1].role != "tool"
            else reply(text=f"Result: {request.messages[-1].parts[0].result}")
        )  # type: ignore[union-attr]
    ),
    tools=[pick_colour],
)
