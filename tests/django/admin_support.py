"""Helpers the admin tests share: suspended runs of the test agents, URLs, messages."""

from __future__ import annotations

from typing import Any

from django.urls import reverse

from deuz_django import services
from deuz_django.models import Approval, Run

from .agents import TOOL_PERMISSION

VIEWER = ("deuz_django.view_run", "deuz_django.view_approval")
DECIDER = (*VIEWER, "deuz_django.decide_approval")
APPROVER = (*DECIDER, TOOL_PERMISSION)  # may decide refund calls too
QUEUE = reverse("admin:deuz_django_approval_changelist")
RUNS = reverse("admin:deuz_django_run_changelist")


def suspended_run(owner: Any = None, *, agent: str = "gated", title: str = "") -> Run:
    """A run of ``agent`` after its first leg: the gated agent waits on refund and email."""
    run = services.start_run(
        agent=agent,
        messages=[{"role": "user", "content": "Refund order A-1 and email Ann."}],
        owner=owner,
        title=title,
    )
    services.resume_run(run.run_id)
    run.refresh_from_db()
    return run


def approval(run: Run, tool_name: str) -> Approval:
    return Approval.objects.select_related("run").get(run=run, tool_name=tool_name)


def run_url(run: Run) -> str:
    return reverse("admin:deuz_django_run_change", args=[run.pk])


def decide_url(approval: Approval) -> str:
    return reverse("admin:deuz_django_approval_decide", args=[approval.pk])


def messages_of(response: Any) -> list[str]:
    """The messages a followed response showed (``client.post(..., follow=True)``)."""
    return [str(m) for m in response.context["messages"]]
