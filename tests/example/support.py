"""Conversations with the demo agent, driven through the run service as the chat does."""

from __future__ import annotations

from django.contrib.auth.models import User

from deuz_django import services
from deuz_django.models import Approval, Run
from deuz_django.storage.store import DjangoSessionStore


def ask(owner: User, question: str) -> Run:
    """A run of the demo agent after its first leg."""
    run = services.start_run(
        agent="assistant",
        owner=owner,
        messages=[{"role": "user", "content": question}],
    )
    services.resume_run(run.run_id)
    run.refresh_from_db()
    return run


def answer(run: Run) -> str:
    checkpoint = DjangoSessionStore().load(run.run_id)
    assert checkpoint is not None
    return str(checkpoint.messages[-1].text)


def pending(run: Run) -> Approval:
    (approval,) = Approval.objects.select_related("run").filter(
        run=run, status="pending"
    )
    return approval


def decide(run: Run, user: User, *, approved: bool, reason: str = "") -> Run:
    """Decide the run's one pending call (echoing its token, as the chat does), resume."""
    approval = pending(run)
    decision = services.decide_approval(
        approval, user=user, approved=approved, reason=reason, token=approval.token
    )
    assert decision.run_ready
    services.resume_run(run.run_id)
    run.refresh_from_db()
    return run
