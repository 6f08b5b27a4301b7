"""Runs of the ``forkable`` agent (tests/django/agents.py) in the states the fork tests
start from, on every surface."""

from __future__ import annotations

from typing import Any

from deuz_django import services
from deuz_django.models import Approval, Run

ASKED = [{"role": "user", "content": "Tidy up."}]
# What the parent's tools did (step 1's two calls run side by side: compare sorted).
PARENT_EFFECTS = sorted(
    ["echo:Tidy up.", "send_email:ann@example.com", "echo:two", "echo:three"]
)


def asking(owner: Any) -> Run:
    """A ``forkable`` run suspended at step 1 on ``send_email`` (``f2``)."""
    run = services.start_run(agent="forkable", messages=ASKED, owner=owner)
    assert services.resume_run(run.run_id).status == "suspended"
    run.refresh_from_db()
    return run


def finished(owner: Any) -> Run:
    """A ``forkable`` run that ran to its end: 4 steps, the email approved by its
    owner; its tools ran ``PARENT_EFFECTS``."""
    run = asking(owner)
    services.decide_approval(pending(run), user=owner, approved=True)
    assert services.resume_run(run.run_id).status == "completed"
    run.refresh_from_db()
    return run


def pending(run: Run) -> Approval:
    """The run's one pending approval."""
    return Approval.objects.select_related("run").get(run=run, status="pending")
