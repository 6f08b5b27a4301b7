"""REST API: forking a run — 201 with the fork, lineage both ways, errors naming the
field with nothing written, and the permission rules (404, 403, 409)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User

from deuz_django.models import Run
from deuz_django.runs.continuing import join_handed_off
from tests.api.support import API, client
from tests.django.fork_support import asking, finished
from tests.django.run_support import background_leg

MakeUser = Callable[..., User]
pytestmark = background_leg


def fork(user: Any, run: Run, body: Any) -> Any:
    response = client(user).post(f"{API}/runs/{run.run_id}/fork/", body, format="json")
    join_handed_off(timeout=60)
    return response


def test_a_fork_answers_201_with_the_new_run_and_lineage_shows_both_ways(
    ann: User,
) -> None:
    parent = finished(ann)
    body = {
        "step": 1,
        "withTurn": True,
        "edit": {"toolCallId": "f2", "input": {"to": "bob@example.com"}},
        "runId": "ann-fork",
    }
    response = fork(ann, parent, body)
    assert response.status_code == 201, response.json()
    forked = response.json()
    assert response["Location"].endswith("/runs/ann-fork/")
    assert (forked["runId"], forked["owner"], forked["stepIndex"]) == (
        "ann-fork",
        "ann",
        1,
    )
    assert forked["forkedFrom"] == {
        "runId": parent.run_id,
        "step": 1,
        "withTurn": True,
        "edit": {"toolCallId": "f2", "input": {"to": "bob@example.com"}},
    }
    again = client(ann).get(f"{API}/runs/ann-fork/").json()
    assert again["status"] == "suspended"  # asks for the edited email again
    assert again["pendingApprovals"][0]["input"] == {"to": "bob@example.com"}
    seen = client(ann).get(f"{API}/runs/{parent.run_id}/").json()
    assert (seen["forks"], seen["forkedFrom"]) == (["ann-fork"], None)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "step"),
        ({"step": "1"}, "step"),
        ({"step": -1}, "step"),
        ({"step": 9}, "step"),
        ({"step": 1, "withTurn": "yes"}, "withTurn"),
        ({"step": 1, "edit": {"message": "x", "toolCallId": "f2"}}, "edit"),
        ({"step": 1, "withTurn": True, "edit": {"message": "x"}}, "edit.message"),
        ({"step": 1, "edit": {"toolCallId": "f2", "input": {}}}, "withTurn"),
        (
            {"step": 1, "withTurn": True, "edit": {"toolCallId": "f9", "input": {}}},
            "edit.toolCallId",
        ),
        (
            {"step": 1, "withTurn": True, "edit": {"toolCallId": "f2", "input": {}}},
            "edit.input",
        ),
        ({"step": 1, "runId": "a::b"}, "runId"),
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_nothing_is_written(
    ann: User, body: dict[str, Any], field: str
) -> None:
    parent = asking(ann)
    response = fork(ann, parent, body)
    assert response.status_code == 400
    error = response.json()
    assert error["errors"][0]["field"] == field, error
    assert error["detail"].startswith(f"{field}:")
    assert Run.objects.count() == 1


FORKERS = {
    # who: (permissions, staff, expected status)
    "other user": ((), False, 404),
    "staff with view_run": (("deuz_django.view_run",), True, 403),
    "staff with view_run and fork_run": (
        ("deuz_django.view_run", "deuz_django.fork_run"),
        True,
        201,
    ),
}


@pytest.mark.parametrize("who", FORKERS)
def test_who_may_fork(make_user: MakeUser, ann: User, who: str) -> None:
    perms, staff, expected = FORKERS[who]
    parent = asking(ann)
    response = fork(make_user("someone", *perms, staff=staff), parent, {"step": 1})
    assert response.status_code == expected
    assert Run.objects.count() == (2 if expected == 201 else 1)


def test_anonymous_requests_are_refused(ann: User) -> None:
    assert fork(None, asking(ann), {"step": 1}).status_code == 401


def test_a_taken_run_id_is_a_409(ann: User) -> None:
    parent = asking(ann)
    response = fork(ann, parent, {"step": 1, "runId": parent.run_id})
    assert response.status_code == 409
    assert response.json()["code"] == "run_exists"


def test_a_fork_another_user_made_is_not_listed_to_the_owner(
    make_user: MakeUser, ann: User
) -> None:
    """Forks are listed only to those who may see them (a staff member's fork is
    theirs)."""
    parent = asking(ann)
    staff = make_user(
        "staff", "deuz_django.view_run", "deuz_django.fork_run", staff=True
    )
    assert fork(staff, parent, {"step": 1, "runId": "staff-fork"}).status_code == 201
    assert client(ann).get(f"{API}/runs/{parent.run_id}/").json()["forks"] == []
    assert client(staff).get(f"{API}/runs/{parent.run_id}/").json()["forks"] == [
        "staff-fork"
    ]
