"""Helpers for the REST API tests: clients, gated runs, and tokens minted on purpose."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from deuz_django.conf import deuz_settings
from deuz_django.core.durable import create_approval_signer
from deuz_django.models import Approval, Run
from deuz_django.services import resume_run, start_run

API = "/api/deuz"


@pytest.fixture(autouse=True)
def fresh_throttles() -> None:
    """Throttle counters live in the cache; user ids repeat between tests."""
    cache.clear()


def client(user: Any = None) -> APIClient:
    """An API client signed in as ``user`` (anonymous when ``None``)."""
    api = APIClient()
    if user is not None:
        api.force_authenticate(user)
    return api


def started(owner: Any, agent: str = "gated", **options: Any) -> Run:
    """A run whose first leg ran (a ``gated`` run is then suspended on r1 and e1)."""
    run = start_run(
        agent=agent,
        messages=[{"role": "user", "content": "Refund order A-1 and tell Ann."}],
        owner=owner,
        **options,
    )
    resume_run(run.run_id)
    run.refresh_from_db()
    return run


def approval(run: Run, approval_id: str) -> Approval:
    return Approval.objects.select_related("run").get(run=run, approval_id=approval_id)


def approve(run: Run, approval_id: str) -> dict[str, Any]:
    """An approving verdict carrying the approval's own token."""
    token = approval(run, approval_id).token
    return {"approvalId": approval_id, "approved": True, "token": token}


def deny(approval_id: str, reason: str = "No.") -> dict[str, Any]:
    return {"approvalId": approval_id, "approved": False, "reason": reason}


class _Clock:
    def __init__(self, ms: float) -> None:
        self.ms = ms

    def now(self) -> float:
        return self.ms


def mint(
    row: Approval,
    *,
    run_id: str | None = None,
    secret: str | None = None,
    age_seconds: float = 0,
) -> str:
    """A token for ``row``'s call, with another key, run or age when asked."""
    signer = create_approval_signer(
        secret=secret or deuz_settings.APPROVAL_SECRET,
        clock=_Clock(time.time() * 1000 - age_seconds * 1000),
    )
    request = {
        "approvalId": row.approval_id,
        "toolCallId": row.tool_call_id,
        "toolName": row.tool_name,
        "input": row.input,
    }
    return signer.sign(request, run_id or row.run.run_id)


def verdicts_url(run: Run) -> str:
    return f"{API}/runs/{run.run_id}/verdicts/"


def resume_url(run: Run) -> str:
    return f"{API}/runs/{run.run_id}/resume/"
