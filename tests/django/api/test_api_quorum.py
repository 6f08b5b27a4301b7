"""REST API: a call that needs two approvals — the first verdict is recorded as a vote
(the call stays pending, "1 of 2 approvals", nothing resumes), the second decides it;
the approval's ``approvalProgress`` says who approved and who may still."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import Group, User

from deuz_django.models import Run
from tests.api.support import API, approve, client, started, verdicts_url
from tests.django.quorum_agents import FINANCE

pytestmark = pytest.mark.django_db
MakeUser = Callable[..., User]


def member(make_user: MakeUser, name: str) -> User:
    user = make_user(name, "deuz_django.view_run", "deuz_django.decide_approval")
    user.groups.add(Group.objects.get_or_create(name=FINANCE)[0])
    return user


def progress(user: User, run: Run) -> object:
    found = client(user).get(f"{API}/approvals/?runId={run.run_id}").json()
    (row,) = found["results"]
    return row["approvalProgress"]


def test_the_first_verdict_is_a_vote_and_the_second_decides(
    make_user: MakeUser,
) -> None:
    fin, fay = member(make_user, "fin"), member(make_user, "fay")
    run = started(make_user("ann"), agent="pair")
    assert progress(fin, run) == {
        "stage": 1,
        "stages": 1,
        "needed": 2,
        "approvals": [],
        "approvers": FINANCE,
        "mayStill": ["fin", "fay"],
        "summary": "0 of 2 approvals",
    }
    first = client(fin).post(verdicts_url(run), [approve(run, "e1")], format="json")
    assert first.status_code == 200, first.json()
    assert first.json()["resumeQueued"] is False
    (decided,) = first.json()["decided"]
    assert decided["status"] == "pending"
    assert decided["approvalProgress"]["summary"] == "1 of 2 approvals"
    assert decided["approvalProgress"]["approvals"] == [
        {"by": "fin", "onBehalfOf": None}
    ]
    again = client(fin).post(verdicts_url(run), [approve(run, "e1")], format="json")
    assert again.status_code == 403
    assert "voted on this call already" in str(again.json())
    second = client(fay).post(verdicts_url(run), [approve(run, "e1")], format="json")
    assert second.status_code in (200, 202), second.json()
    assert second.json()["decided"][0]["status"] == "approved"
    assert second.json()["decided"][0]["approvalProgress"] is None
