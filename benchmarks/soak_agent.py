"""The soak benchmark's agent: a support assistant that opens a ticket and asks staff
for a refund, with a model that streams its answers as a provider would.

The model is history-driven (``FunctionModel``), so a leg resumed in any process, after
any crash, continues the same script: turn 0 streams a sentence and opens a ticket (an
ungated tool), turn 1 streams another and asks for a refund (gated: only staff may
approve, never the run's owner), turn 2 streams the answer. The order comes from the
user's message ("Please refund order A-17"), so every run's calls differ.

Neither tool is idempotent: a call that a crash left in doubt is put to a person, never
run again silently. Each execution appends ``<tool> <root run id> <call id>`` to the file
named by ``SOAK_EFFECTS`` (one ``write`` of a short line with ``O_APPEND``, so lines from
many processes never interleave): the soak counts duplicated effects there, and the
simulated staff member looks there to answer "did it happen?".
"""

from __future__ import annotations

import os
import re
import time

from deuz_django.core import ModelRequest, ToolContext, tool
from deuz_django.core.testing import FunctionModel, ScriptedReply, reply
from deuz_django.permissions import DECIDE_ANY_APPROVAL
from deuz_django.registry import AgentSpec

CHUNK_DELAY = 0.02  # seconds between two text deltas: ~50 tokens a second
TICKET_SECONDS = 0.05
REFUND_SECONDS = 0.1


def effect_line(tool_name: str, run_id: str, call_id: str) -> str:
    return f"{tool_name} {run_id} {call_id}\n"


def _record(ctx: ToolContext) -> None:
    line = effect_line(ctx.tool_name, ctx.root_run_id or "", ctx.tool_call_id)
    descriptor = os.open(
        os.environ["SOAK_EFFECTS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644
    )
    try:
        os.write(descriptor, line.encode())
    finally:
        os.close(descriptor)


@tool
def open_ticket(order_id: str, ctx: ToolContext) -> str:
    """Open a support ticket about an order."""
    time.sleep(TICKET_SECONDS)
    _record(ctx)
    return f"ticket opened for {order_id}"


@tool(
    needs_approval=True,
    approval_permission=DECIDE_ANY_APPROVAL,
    approval_by_owner=False,
)
def issue_refund(order_id: str, amount: float, ctx: ToolContext) -> str:
    """Refund an order (staff must approve)."""
    time.sleep(REFUND_SECONDS)
    _record(ctx)
    return f"refunded {amount:.2f} on {order_id}"


def _words(sentence: str) -> list[str]:
    """The sentence as text deltas, one word (and its space) each."""
    return [f"{word} " for word in sentence.split()]


def _script(order_id: str) -> list[ScriptedReply]:
    amount = 10 + int(order_id.rsplit("-", 1)[-1]) % 90
    return [
        reply(
            text=_words(
                f"Thanks for reaching out about order {order_id}. I am sorry it went "
                "wrong; let me open a ticket so our team can follow it up."
            ),
            tool_calls=[("ticket", "open_ticket", {"order_id": order_id})],
            chunk_delay=CHUNK_DELAY,
            usage=(120, 30),
        ),
        reply(
            text=_words(
                f"The ticket is open. Order {order_id} qualifies for a refund of "
                f"{amount}.00, which a member of staff has to approve."
            ),
            tool_calls=[
                ("refund", "issue_refund", {"order_id": order_id, "amount": amount})
            ],
            chunk_delay=CHUNK_DELAY,
            usage=(160, 35),
        ),
        reply(
            text=_words(
                f"Good news: the refund of {amount}.00 on order {order_id} has been "
                "approved and issued. It will reach your account within three to "
                "five business days, and the ticket stays open until it does. Is "
                "there anything else I can help you with today?"
            ),
            chunk_delay=CHUNK_DELAY,
            usage=(200, 50),
        ),
    ]


def _respond(request: ModelRequest) -> ScriptedReply:
    asked = next(m.text for m in request.messages if m.role == "user")
    found = re.search(r"A-\d+", asked)
    script = _script(found.group() if found else "A-0")
    turns = sum(1 for m in request.messages if m.role == "assistant")
    return script[min(turns, len(script) - 1)]


def support() -> AgentSpec:
    return AgentSpec(model=FunctionModel(_respond), tools=[open_ticket, issue_refund])
