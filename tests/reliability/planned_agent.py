"""An agent whose model follows a plan (``DEUZ_TEST_PLAN``, JSON): turn k of the run —
the model call after k assistant turns — makes the plan's k-th calls, ``[call id, tool,
amount]`` each, drawn from small pools so call ids are re-used across steps and legs and
whole turns replayed; past the plan it answers. Every tool records its execution in the
effect log as ``tool:call id:amount``.

The tools differ only in who decides them: ``ask_pay`` a person, ``grant_pay`` a grant,
``rule_pay`` an approving standing rule, ``deny_pay`` a denying one (the test makes
them); ``echo_pay`` needs nobody.
"""

from __future__ import annotations

import json
import os

from deuz_django.core import ModelRequest, Tool, ToolContext, tool
from deuz_django.core.testing import FunctionModel, ScriptedReply, reply
from deuz_django.registry import AgentSpec
from tests.django.agents import record_effect

GATED = ("ask_pay", "grant_pay", "rule_pay", "deny_pay")
TOOLS = (*GATED, "echo_pay")


def _paying(name: str) -> Tool:
    def pay(amount: int, ctx: ToolContext) -> str:
        record_effect(f"{name}:{ctx.tool_call_id}:{amount}")
        return f"{name} paid {amount}"

    return tool(name=name, needs_approval=name in GATED, description=f"Pay ({name}).")(
        pay
    )


def planned() -> AgentSpec:
    plan = json.loads(os.environ.get("DEUZ_TEST_PLAN", "[]"))

    def respond(request: ModelRequest) -> ScriptedReply:
        turn = sum(1 for m in request.messages if m.role == "assistant")
        if turn >= len(plan):
            return reply(text="Done.", delay=0.1)
        calls = [
            (call_id, name, {"amount": amount}) for call_id, name, amount in plan[turn]
        ]
        return reply(tool_calls=calls, usage=(3, 2), delay=0.1)

    return AgentSpec(
        model=FunctionModel(respond),
        tools=[_paying(name) for name in TOOLS],
        max_steps=4,
        limits={"STEPS": 40, "LEGS": 30},
    )
