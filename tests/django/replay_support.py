"""Finished runs of the ``mailing`` agent for the replay tests, and replays run to the
end of their first leg."""

from __future__ import annotations

from typing import Any

from deuz_django import services
from deuz_django.models import Run
from deuz_django.runs.continuing import join_handed_off
from tests.django.run_support import PROMPT, approval


def finished(owner: Any) -> Run:
    """A ``mailing`` run that echoed, had its email approved by ``owner`` and completed
    (its effects: ``echo:hi``, ``send_email:ann@example.com``)."""
    run = services.start_run(agent="mailing", messages=PROMPT, owner=owner)
    assert services.resume_run(run.run_id).status == "suspended"
    services.decide_approval(approval(run, "send_email"), user=owner, approved=True)
    assert services.resume_run(run.run_id).status == "completed"
    run.refresh_from_db()
    return run


def replayed(original: Run, user: Any, **options: Any) -> Run:
    """A replay of ``original`` for ``user``, once its background leg ended."""
    replay = services.replay_run(original.run_id, user=user, **options)
    join_handed_off(timeout=60)
    replay.refresh_from_db()
    return replay
