"""Agents whose calls need several approvals (deuz_django.quorum), registered in
tests/settings.py: ``pair`` — an email needs two of the Finance group; ``chain`` — a
refund needs a team lead, then two holders of the refund permission (within an hour)."""

from __future__ import annotations

from datetime import timedelta

from deuz_django.core.testing import FunctionModel, reply
from deuz_django.deadlines import Deadline
from deuz_django.quorum import ApprovalChain, Stage
from deuz_django.registry import AgentSpec

from .agents import TOOL_PERMISSION, by_turn, refund, send_email

FINANCE = "Finance"
LEADS = "Team leads"


def _asks(call: tuple[str, str, dict[str, object]]) -> FunctionModel:
    return by_turn([reply(tool_calls=[call]), reply(text="Done.")])


pair = AgentSpec(
    model=_asks(("e1", "send_email", {"to": "ann@example.com"})),
    tools=[refund, send_email],
    approval_chains={"send_email": ApprovalChain(Stage(f"group:{FINANCE}", quorum=2))},
)

chain = AgentSpec(
    model=_asks(("r1", "refund", {"order_id": "A-1", "amount": 600.0})),
    tools=[refund, send_email],
    approval_chains={
        "refund": ApprovalChain(
            Stage(f"group:{LEADS}"),
            Stage(
                f"perm:{TOOL_PERMISSION}",
                quorum=2,
                deadline=Deadline(after=timedelta(hours=1)),
            ),
        )
    },
)
