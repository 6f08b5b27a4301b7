"""One agent, two deploys: ``mailer`` as ``DEUZ_TEST_MAILER_VERSION`` (1 or 2) defines it.

Version 2 changes the pending call's tool: ``send_email`` gains a ``cc`` parameter and a
person with the finance permission must approve it. A run asked under version 1 and
decided or continued under version 2 is a deploy between the ask and the verdict.
"""

from __future__ import annotations

import os

from deuz_django.core import tool
from deuz_django.core.testing import reply
from deuz_django.registry import AgentSpec

from .agents import TOOL_PERMISSION, by_turn, record_effect


@tool(name="send_email", needs_approval=True)
def send_email_v1(to: str) -> str:
    """Send an email."""
    record_effect(f"v1:send_email:{to}")
    return f"sent to {to}"


@tool(name="send_email", needs_approval=True, approval_permission=TOOL_PERMISSION)
def send_email_v2(to: str, cc: str = "") -> str:
    """Send an email, with a copy (finance approves)."""
    record_effect(f"v2:send_email:{to}:{cc}")
    return f"sent to {to}"


def mailer() -> AgentSpec:
    version = os.environ.get("DEUZ_TEST_MAILER_VERSION", "1")
    return AgentSpec(
        model=by_turn(
            [
                reply(tool_calls=[("e1", "send_email", {"to": "ann@example.com"})]),
                reply(text="Mailed."),
            ]
        ),
        tools=[send_email_v1 if version == "1" else send_email_v2],
    )
