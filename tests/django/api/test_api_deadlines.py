"""Deadlines over REST: approvals (listed, and pending on a run) carry their deadline,
reminder and escalation state, described in the OpenAPI schema; a verdict on a call
that timed out is refused with nothing recorded."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils.dateparse import parse_datetime

from deuz_django.deadlines import sweep as deadline_sweep
from deuz_django.models import Run
from tests.api.support import API, approval, approve, client, started, verdicts_url
from tests.django.run_support import let_time_pass

pytestmark = pytest.mark.django_db
HOUR = timedelta(hours=1)


@pytest.fixture
def run(ann: User) -> Run:
    return started(ann, agent="timed")


def listed(user: User, **params: str) -> dict[str, dict[str, Any]]:
    response = client(user).get(f"{API}/approvals/", params)
    assert response.status_code == 200, response.content
    return {a["approvalId"]: a for a in response.json()["results"]}


def test_a_pending_approval_carries_its_deadline_and_what_happens_then(
    ann: User, run: Run
) -> None:
    rows = listed(ann)
    refund, email = rows["r1"], rows["e1"]
    created = parse_datetime(refund["createdAt"])
    assert created is not None
    assert parse_datetime(refund["deadline"]) == created + 4 * HOUR
    assert parse_datetime(refund["remindAt"]) == created + timedelta(minutes=30)
    assert (refund["remindedAt"], refund["escalatedAt"]) == (None, None)
    assert refund["escalateTo"] == "group:Finance leads"
    assert (
        parse_datetime(email["deadline"]) == parse_datetime(email["createdAt"]) + HOUR
    )  # type: ignore[operator]
    assert (email["remindAt"], email["escalateTo"]) == (None, None)
    detail = client(ann).get(f"{API}/runs/{run.run_id}/").json()
    pending = {a["approvalId"]: a for a in detail["pendingApprovals"]}
    assert pending["r1"]["deadline"] == refund["deadline"]


def test_an_approval_without_a_deadline_says_null(ann: User) -> None:
    started(ann)  # the gated agent sets no deadlines
    for row in listed(ann).values():
        assert [row[k] for k in ("deadline", "remindAt", "escalateTo")] == [
            None,
            None,
            None,
        ]


def test_reminders_and_escalations_show_when_they_happened(ann: User, run: Run) -> None:
    let_time_pass(run, 4 * HOUR + timedelta(seconds=1))
    deadline_sweep.sweep()
    refund = listed(ann)["r1"]
    assert refund["status"] == "pending"
    reminded, escalated = (
        parse_datetime(refund["remindedAt"]),
        parse_datetime(refund["escalatedAt"]),
    )
    assert reminded is not None
    assert escalated is not None
    assert parse_datetime(refund["deadline"]) == escalated + 4 * HOUR
    expired = listed(ann, status="expired")["e1"]
    assert expired["reason"] == "Timed out: nobody decided within 1 hour."
    assert (expired["decidedBy"], expired["token"]) == (None, None)


def test_a_verdict_on_a_call_that_timed_out_is_refused_and_nothing_is_recorded(
    ann: User, run: Run
) -> None:
    verdict = approve(run, "e1")
    let_time_pass(run, 2 * HOUR)
    deadline_sweep.sweep()
    response = client(ann).post(
        verdicts_url(run), {"verdicts": [verdict]}, format="json"
    )
    assert response.status_code == 409, response.content
    body = response.json()
    assert body["code"] == "approval_already_decided"
    assert "was already expired" in body["detail"]
    email = approval(run, "e1")
    assert (email.status, email.decided_by) == ("expired", None)


def test_the_schema_describes_the_deadline_fields(ann: User) -> None:
    schema = client(ann).get(f"{API}/schema/", HTTP_ACCEPT="application/json").json()
    fields = schema["components"]["schemas"]["Approval"]["properties"]
    assert fields["deadline"]["format"] == "date-time"
    assert fields["deadline"]["nullable"] is True
    assert "times out" in fields["deadline"]["description"]
    assert fields["escalateTo"]["nullable"] is True
    assert "group:<name>" in fields["escalateTo"]["description"]
    for name in ("remindAt", "remindedAt", "escalatedAt"):
        assert fields[name]["nullable"] is True
    required = schema["components"]["schemas"]["Approval"]["required"]
    assert {"deadline", "remindAt", "escalateTo"} <= set(required)
