"""REST API: delegations — lend your approval rights (201, or 400 naming the field),
list what you lent and were lent, revoke (the delegator 200, the delegate 403, anyone
else 404); a delegate's verdict over REST says on whose behalf it was given."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from deuz_django.models import Delegation, Run
from tests.api.support import API, approve, client, started, verdicts_url
from tests.django.agents import TOOL_PERMISSION

pytestmark = pytest.mark.django_db

MakeUser = Callable[..., User]
DELEGATIONS = f"{API}/delegations/"


@pytest.fixture
def fin(make_user: MakeUser) -> User:
    perms = ("deuz_django.view_run", "deuz_django.decide_approval", TOOL_PERMISSION)
    return make_user("fin", *perms, staff=True)


@pytest.fixture
def bob(make_user: MakeUser) -> User:
    return make_user("bob", "deuz_django.view_run", staff=True)


def in_a_week() -> str:
    return (timezone.now() + timedelta(days=7)).isoformat()


def lend(user: User, body: dict[str, object]) -> dict[str, object]:
    response = client(user).post(DELEGATIONS, body, format="json")
    assert response.status_code == 201, response.json()
    return dict(response.json())


def test_a_delegation_is_made_listed_by_both_and_used_for_a_verdict(
    fin: User, bob: User, make_user: MakeUser
) -> None:
    made = lend(fin, {"delegate": "bob", "endsAt": in_a_week(), "note": "Holidays"})
    assert (made["delegator"], made["delegate"], made["inForce"]) == (
        "fin",
        "bob",
        True,
    )
    assert made["note"] == "Holidays"
    for user in (fin, bob):
        listed = client(user).get(DELEGATIONS).json()["results"]
        assert [d["id"] for d in listed] == [made["id"]]
    assert client(make_user("eve")).get(DELEGATIONS).json()["results"] == []

    run = started(make_user("ann"))
    response = client(bob).post(verdicts_url(run), [approve(run, "r1")], format="json")
    assert response.status_code == 200, response.json()
    detail = (
        client(bob).get(f"{API}/approvals/?runId={run.run_id}&status=approved").json()
    )
    decided = {a["approvalId"]: a for a in detail["results"]}["r1"]
    assert (decided["decidedBy"], decided["decidedOnBehalfOf"]) == ("bob", "fin")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"delegate": "fin", "endsAt": "2099-01-01T00:00:00Z"}, "delegate"),
        ({"delegate": "nobody", "endsAt": "2099-01-01T00:00:00Z"}, "delegate"),
        ({"delegate": "bob", "endsAt": "2000-01-01T00:00:00Z"}, "endsAt"),
        ({"delegate": "bob"}, "endsAt"),
        ({"delegate": "bob", "endsAt": "soon"}, "endsAt"),
        (
            {
                "delegate": "bob",
                "startsAt": "2099-02-01T00:00:00Z",
                "endsAt": "2099-01-01T00:00:00Z",
            },
            "endsAt",
        ),
    ],
)
def test_a_bad_delegation_is_refused_naming_the_field(
    fin: User, bob: User, body: dict[str, object], field: str
) -> None:
    response = client(fin).post(DELEGATIONS, body, format="json")
    assert response.status_code == 400, response.json()
    assert field in str(response.json())
    assert not Delegation.objects.exists()


def test_only_the_delegator_revokes_and_others_do_not_see_it(
    fin: User, bob: User, make_user: MakeUser
) -> None:
    made = lend(fin, {"delegate": "bob", "endsAt": in_a_week()})
    url = f"{DELEGATIONS}{made['id']}/revoke/"
    assert client(make_user("eve")).post(url).status_code == 404
    assert client(bob).post(url).status_code == 403
    assert client(None).post(url).status_code in (401, 403)
    response = client(fin).post(url)
    assert response.status_code == 200
    assert (response.json()["inForce"], response.json()["revokedAt"] is None) == (
        False,
        False,
    )
    assert client(fin).post(f"{DELEGATIONS}999999/revoke/").status_code == 404


def test_a_revoked_delegation_decides_nothing(
    fin: User, bob: User, make_user: MakeUser
) -> None:
    made = lend(fin, {"delegate": "bob", "endsAt": in_a_week()})
    client(fin).post(f"{DELEGATIONS}{made['id']}/revoke/")
    run: Run = started(make_user("ann"))
    response = client(bob).post(verdicts_url(run), [approve(run, "e1")], format="json")
    assert response.status_code == 403
    assert run.approvals.get(approval_id="e1").status == "pending"
