"""Agents the Django tests register (see tests/settings.py).

Their models are history-driven (``FunctionModel``): the reply depends on how many assistant
turns the run already has, so a leg resumed in another process continues the same script.
Tools append a line to the file named by ``DEUZ_TEST_EFFECTS`` (when set), which lets tests
count executions across threads and processes. The ``hold`` tool keeps its leg (and so the
run's lease) busy until the file named by ``DEUZ_TEST_GATE`` exists, and runs the callables
in ``HOLD_HOOKS`` (a test's way to act while a leg is inside a tool).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from deuz_django.core import ModelRequest, Reconciliation, ToolContext, agent_tool, tool
from deuz_django.core.testing import FunctionModel, ScriptedReply, reply
from deuz_django.registry import AgentSpec

TOOL_PERMISSION = "auth.view_group"
GATE_TIMEOUT_SECONDS = 60.0
HOLD_HOOKS: list[Callable[[], None]] = []


def record_effect(name: str) -> None:
    path = os.environ.get("DEUZ_TEST_EFFECTS")
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(f"{name}\n")
            log.flush()


def recorded_effects() -> list[str]:
    path = os.environ.get("DEUZ_TEST_EFFECTS")
    if not path or not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as log:
        return log.read().splitlines()


def by_turn(replies: Sequence[ScriptedReply]) -> FunctionModel:
    """Reply number k answers the request that follows k assistant turns."""

    def respond(request: ModelRequest) -> ScriptedReply:
        turns = sum(1 for m in request.messages if m.role == "assistant")
        return replies[min(turns, len(replies) - 1)]

    return FunctionModel(respond)


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    record_effect(f"echo:{text}")
    return text


@tool(needs_approval=True, approval_permission=TOOL_PERMISSION, approval_by_owner=False)
def refund(order_id: str, amount: float) -> str:
    """Refund an order (staff with the finance permission must approve)."""
    record_effect(f"refund:{order_id}")
    return f"refunded {amount} on {order_id}"


@tool(needs_approval=True)
def send_email(to: str) -> str:
    """Send an email (the run's owner may approve)."""
    record_effect(f"send_email:{to}")
    return f"sent to {to}"


@tool
def slow(step: int) -> str:
    """A tool that takes DEUZ_TEST_SLOW_SECONDS (for crash tests): in every step, or only
    in step DEUZ_TEST_SLOW_STEP when that is set."""
    record_effect(f"slow:{step}:start")
    only = os.environ.get("DEUZ_TEST_SLOW_STEP")
    if only is None or int(only) == step:
        time.sleep(float(os.environ.get("DEUZ_TEST_SLOW_SECONDS", "0")))
    record_effect(f"slow:{step}:end")
    return f"slow {step} done"


def wait_for_gate(hooks: Sequence[Callable[[], None]]) -> None:
    """Wait until the file ``DEUZ_TEST_GATE`` names exists, then run ``hooks``."""
    gate = os.environ.get("DEUZ_TEST_GATE")
    deadline = time.monotonic() + GATE_TIMEOUT_SECONDS
    while gate and not os.path.exists(gate):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the test never opened the gate {gate}")
        time.sleep(0.01)
    for hook in hooks:
        hook()


@tool(needs_approval=True)
def hold(label: str) -> str:
    """Hold the leg until the test opens the gate (needs approval, so a run suspends first)."""
    record_effect(f"hold:{label}")
    wait_for_gate(HOLD_HOOKS)
    return f"held {label}"


scripted = AgentSpec(
    model=by_turn(
        [
            reply(tool_calls=[("c1", "echo", {"text": "hi"})], usage=(10, 5)),
            reply(text="All done.", usage=(20, 6)),
        ]
    ),
    tools=[echo],
    system="You are a test agent.",
)

gated = AgentSpec(
    model=by_turn(
        [
            reply(
                tool_calls=[
                    ("r1", "refund", {"order_id": "A-1", "amount": 5.0}),
                    ("e1", "send_email", {"to": "ann@example.com"}),
                ],
                usage=(10, 5),
            ),
            reply(text="Refund and email handled.", usage=(20, 6)),
        ]
    ),
    tools=[refund, send_email],
)

# A sub-agent whose tool is ``slow`` (not idempotent): a crash inside it leaves the
# sub-agent's call in doubt.
nested_slow = AgentSpec(
    model=by_turn(
        [
            reply(tool_calls=[("p1", "worker", {"prompt": "do it"})]),
            reply(text="The worker finished."),
        ]
    ),
    tools=[
        agent_tool(
            name="worker",
            model=by_turn(
                [
                    reply(tool_calls=[("x1", "slow", {"step": 1})]),
                    reply(text="Worked."),
                ]
            ),
            tools=[slow],
        )
    ],
)

slow_agent_steps = 4
slow = AgentSpec(
    model=by_turn(
        [
            *(
                reply(tool_calls=[(f"s{i}", "slow", {"step": i})], usage=(3, 2))
                for i in range(1, slow_agent_steps + 1)
            ),
            reply(text="Slow work finished.", usage=(5, 5)),
        ]
    ),
    tools=[slow],
    max_steps=10,
)

nested = AgentSpec(
    model=by_turn(
        [
            reply(
                tool_calls=[("p1", "researcher", {"prompt": "look it up"})],
                usage=(10, 5),
            ),
            reply(text="The researcher finished.", usage=(20, 6)),
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
)

held = AgentSpec(
    model=by_turn(
        [
            reply(tool_calls=[("h1", "hold", {"label": "once"})], usage=(4, 2)),
            reply(text="Held and released.", usage=(6, 3)),
        ]
    ),
    tools=[hold],
)


@tool(needs_approval=True, editable=True, approval_by_owner=False)
def pay(to: str, amount: float) -> str:
    """Pay someone (a person may edit the amount before approving; not the owner)."""
    record_effect(f"pay:{to}:{amount}")
    return f"paid {amount} to {to}"


payer = AgentSpec(
    model=by_turn(
        [
            reply(
                tool_calls=[
                    ("p1", "pay", {"to": "ann", "amount": 50.0}),
                    ("e1", "send_email", {"to": "ann@example.com"}),
                ]
            ),
            reply(text="Paid and emailed."),
        ]
    ),
    tools=[pay, send_email],
)


def _transferred(args: dict[str, Any], ctx: ToolContext) -> Reconciliation:
    """What became of a ``transfer`` call: its effect line under the call's key says it
    happened; without one it did not, unless DEUZ_TEST_CANNOT_TELL is set."""
    if f"transfer:{ctx.idempotency_key}" in recorded_effects():
        return Reconciliation.happened(f"transferred {args['amount']}")
    if os.environ.get("DEUZ_TEST_CANNOT_TELL"):
        return Reconciliation.cannot_tell()
    return Reconciliation.did_not_happen()


@tool(reconcile=_transferred)
def transfer(amount: int, ctx: ToolContext) -> str:
    """Transfer money (not safe to repeat; it can tell whether a transfer went out)."""
    record_effect(f"transfer:{ctx.idempotency_key}")
    return f"transferred {amount}"


reconciling = AgentSpec(
    model=by_turn(
        [
            reply(tool_calls=[("t1", "transfer", {"amount": 7})]),
            reply(text="Transferred."),
        ]
    ),
    tools=[transfer],
)


def _forkable(request: ModelRequest) -> ScriptedReply:
    """Step 0 echoes what the user asked (so a fork's new question shows in the
    effects); step 1 emails Ann (gated) and echoes; step 2 echoes; then it answers."""
    asked = next(m.text for m in reversed(request.messages) if m.role == "user")
    turns = sum(1 for m in request.messages if m.role == "assistant")
    steps = [
        reply(tool_calls=[("f1", "echo", {"text": asked})], usage=(10, 5)),
        reply(
            tool_calls=[
                ("f2", "send_email", {"to": "ann@example.com"}),
                ("f3", "echo", {"text": "two"}),
            ],
            usage=(10, 5),
        ),
        reply(tool_calls=[("f4", "echo", {"text": "three"})], usage=(10, 5)),
        reply(text=f"Done: {asked}", usage=(10, 5)),
    ]
    return steps[min(turns, len(steps) - 1)]


forkable = AgentSpec(model=FunctionModel(_forkable), tools=[echo, send_email])
