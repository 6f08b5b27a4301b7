"""REST API: posting verdicts — validated as a batch, tokens verified, all or nothing."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from deuz_django.conf import deuz_settings
from deuz_django.models import Approval, Run
from deuz_django.runs.continuing import join_handed_off
from tests.api.support import (
    API,
    approval,
    approve,
    client,
    deny,
    mint,
    started,
    verdicts_url,
)
from tests.django.agents import TOOL_PERMISSION
from tests.django.run_support import background_leg

pytestmark = pytest.mark.django_db

MakeUser = Callable[..., User]
FINANCE = ("deuz_django.view_run", "deuz_django.decide_approval", TOOL_PERMISSION)


@pytest.fixture
def ann(make_user: MakeUser) -> User:
    return make_user("ann")


@pytest.fixture
def finance(make_user: MakeUser) -> User:
    """Staff who may decide any approval, refunds included."""
    return make_user("fin", *FINANCE, staff=True)


@pytest.fixture
def run(ann: User) -> Run:
    return started(ann)


def statuses(run: Run) -> dict[str, str]:
    return dict(run.approvals.values_list("approval_id", "status"))


def post(user: Any, run: Run, body: Any) -> Any:
    return client(user).post(verdicts_url(run), body, format="json")


def only_error(response: Any) -> dict[str, Any]:
    errors = response.json()["errors"]
    assert len(errors) == 1, errors
    return dict(errors[0])


# -- the permission matrix -----------------------------------------------------------------

DECIDERS = {
    # who: (permissions, staff)
    "other user": ((), False),
    "staff without permissions": ((), True),
    "staff with view_run": (("deuz_django.view_run",), True),
    "staff with view_run and decide_approval": (
        ("deuz_django.view_run", "deuz_django.decide_approval"),
        True,
    ),
    "staff with the tool's permission too": (FINANCE, True),
}

# (who, verdict) -> expected status; the owner may approve e1 but not their own refund.
MATRIX = [
    ("owner", approve, "e1", 200),
    ("owner", approve, "r1", 403),  # needs auth.view_group, and separation of duties
    ("owner", deny, "r1", 200),  # the owner may always refuse a call on their run
    ("other user", approve, "e1", 404),
    ("staff without permissions", approve, "e1", 404),
    ("staff with view_run", approve, "e1", 403),
    ("staff with view_run", deny, "e1", 403),
    ("staff with view_run and decide_approval", approve, "e1", 200),
    ("staff with view_run and decide_approval", approve, "r1", 403),
    ("staff with the tool's permission too", approve, "r1", 200),
    ("staff with the tool's permission too", deny, "r1", 200),
]


@pytest.mark.parametrize(("who", "verdict", "approval_id", "expected"), MATRIX)
def test_who_may_decide_what(
    make_user: MakeUser,
    ann: User,
    run: Run,
    who: str,
    verdict: Callable[..., dict[str, Any]],
    approval_id: str,
    expected: int,
) -> None:
    if who == "owner":
        user = ann
    else:
        perms, staff = DECIDERS[who]
        user = make_user("someone", *perms, staff=staff)
    body = [verdict(run, approval_id) if verdict is approve else verdict(approval_id)]
    response = post(user, run, body)
    assert response.status_code == expected, response.json()
    decided = statuses(run)[approval_id] != "pending"
    assert decided is (expected == 200)
    if expected == 403:
        assert only_error(response)["approvalId"] == approval_id


def test_the_owner_with_the_tool_permission_still_may_not_approve_their_own_refund(
    make_user: MakeUser,
) -> None:
    owner = make_user("owner", TOOL_PERMISSION)
    run = started(owner)
    response = post(owner, run, [approve(run, "r1")])
    assert response.status_code == 403
    assert "may not approve their own refund" in only_error(response)["message"]
    assert post(owner, run, [deny("r1")]).status_code == 200


def test_anonymous_verdicts_are_rejected(run: Run) -> None:
    assert post(None, run, [approve(run, "e1")]).status_code == 401
    assert statuses(run) == {"r1": "pending", "e1": "pending"}


# -- recording and resuming ----------------------------------------------------------------


@background_leg
def test_the_last_verdict_resumes_the_run_in_the_background(
    finance: User, run: Run, effects: Callable[[], list[str]]
) -> None:
    response = post(
        finance, run, {"verdicts": [approve(run, "r1"), deny("e1", "Not Ann.")]}
    )
    assert response.status_code == 202
    body = response.json()
    assert body["resumeQueued"] is True
    assert response["Location"] == body["statusUrl"]
    assert body["statusUrl"] == f"http://testserver{API}/runs/{run.run_id}/"
    decided = {d["approvalId"]: d for d in body["decided"]}
    assert decided["r1"]["status"] == "approved"
    assert decided["r1"]["decidedBy"] == "fin"
    assert decided["e1"]["reason"] == "Not Ann."
    join_handed_off()
    assert effects() == ["refund:A-1"]
    run.refresh_from_db()
    assert run.status == "completed"


def test_a_verdict_that_leaves_approvals_undecided_answers_200(
    ann: User, run: Run, effects: Callable[[], list[str]]
) -> None:
    response = post(ann, run, [approve(run, "e1")])
    assert response.status_code == 200
    assert response.json()["resumeQueued"] is False
    assert statuses(run) == {"r1": "pending", "e1": "approved"}
    assert effects() == []


def test_resume_false_records_without_resuming(
    finance: User, run: Run, effects: Callable[[], list[str]]
) -> None:
    body = {"verdicts": [deny("r1"), deny("e1")], "resume": False}
    response = post(finance, run, body)
    assert response.status_code == 200
    assert response.json()["resumeQueued"] is False
    run.refresh_from_db()
    assert run.status == "suspended"
    assert statuses(run) == {"r1": "denied", "e1": "denied"}


def test_a_verdict_is_recorded_once_and_a_replay_is_a_conflict(
    ann: User, run: Run
) -> None:
    verdict = approve(run, "e1")
    assert post(ann, run, [verdict]).status_code == 200
    replay = post(ann, run, [verdict])
    assert replay.status_code == 409
    assert replay.json()["code"] == "approval_already_decided"
    assert only_error(replay) == {
        "index": 0,
        "approvalId": "e1",
        "field": "approvalId",
        "message": "was already approved",
    }


# -- tokens --------------------------------------------------------------------------------


def _tampered(token: str) -> str:
    version, body, mac = token.split(".")
    flipped = "A" if body[5] != "A" else "B"
    return ".".join([version, body[:5] + flipped + body[6:], mac])


TOKENS: dict[str, tuple[Callable[[Run, Approval], str | None], str]] = {
    "missing": (
        lambda run, row: None,
        "an approving verdict needs the approval's token",
    ),
    "empty": (lambda run, row: "", "an approving verdict needs the approval's token"),
    "forged with another key": (
        lambda run, row: mint(row, secret="not-the-secret-" * 3),
        "the token is forged, tampered with or garbled",
    ),
    "tampered": (
        lambda run, row: _tampered(row.token),
        "the token is forged, tampered with or garbled",
    ),
    "truncated": (
        lambda run, row: row.token[:-4],
        "the token is forged, tampered with or garbled",
    ),
    "garbage": (
        lambda run, row: "hello",
        "the token is forged, tampered with or garbled",
    ),
    "for another run": (
        lambda run, row: mint(row, run_id="some-other-run"),
        "the token was minted for another run",
    ),
    "for another call": (
        lambda run, row: approval(run, "r1").token,
        "the token was minted for another call",
    ),
    "expired": (
        lambda run, row: mint(
            row, age_seconds=float(deuz_settings.APPROVAL_MAX_AGE) + 60
        ),
        "the token has expired",
    ),
}


@pytest.mark.parametrize("case", TOKENS)
def test_an_approval_without_a_valid_token_is_refused_and_nothing_is_recorded(
    finance: User, run: Run, case: str, effects: Callable[[], list[str]]
) -> None:
    make_token, message = TOKENS[case]
    verdict: dict[str, Any] = {"approvalId": "e1", "approved": True}
    token = make_token(run, approval(run, "e1"))
    if token is not None:
        verdict["token"] = token
    # A valid verdict first: it must not be recorded either.
    response = post(finance, run, [approve(run, "r1"), verdict])
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_verdict"
    assert only_error(response) == {
        "index": 1,
        "approvalId": "e1",
        "field": "token",
        "message": message,
    }
    assert body["detail"].startswith("Verdict 1 (e1), token:")
    assert "Nothing was recorded" in body["detail"]
    if token:
        assert token not in response.content.decode()
    assert statuses(run) == {"r1": "pending", "e1": "pending"}
    assert effects() == []


def test_a_token_from_another_run_of_the_same_agent_is_refused(
    ann: User, run: Run
) -> None:
    other = started(ann)
    foreign = approval(other, "e1").token
    response = post(
        ann, run, [{"approvalId": "e1", "approved": True, "token": foreign}]
    )
    assert response.status_code == 400
    assert only_error(response)["message"] == "the token was minted for another run"
    assert statuses(run)["e1"] == "pending"
    assert statuses(other)["e1"] == "pending"


def test_a_verdict_on_an_expired_approval_records_it_expired_as_every_surface_does(
    ann: User, run: Run
) -> None:
    """One policy for every surface (the admin, links, the socket, the command): a
    verdict that comes too late records the approval ``expired``, by the system, and
    its call never runs; the answer says so."""
    age = timedelta(seconds=float(deuz_settings.APPROVAL_MAX_AGE) + 60)
    run.approvals.update(created_at=timezone.now() - age)
    response = post(ann, run, [approve(run, "e1")])
    assert response.status_code in (200, 202), response.content
    assert (
        "e1 had expired: it was recorded as expired and will not run"
        in (response.json()["detail"])
    )
    assert statuses(run)["e1"] == "expired"
    assert Approval.objects.get(run=run, approval_id="e1").decided_by is None


def test_a_denial_needs_no_token(ann: User, run: Run) -> None:
    response = post(ann, run, [{"approvalId": "e1", "approved": False}])
    assert response.status_code == 200
    assert statuses(run)["e1"] == "denied"


# -- the shape of the request (SPEC R12.1) ---------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("not a list", {"field": "body"}),
        (7, {"field": "body"}),
        ({}, {"field": "verdicts", "message": "This field is required."}),
        (
            [],
            {
                "field": "verdicts",
                "message": "Ensure this field has at least 1 elements.",
            },
        ),
        (
            [{"approvalId": f"x{i}", "approved": False} for i in range(101)],
            {
                "field": "verdicts",
                "message": "Ensure this field has no more than 100 elements.",
            },
        ),
        (["e1"], {"index": 0, "field": "verdict"}),
        ([{"approved": True}], {"index": 0, "field": "approvalId"}),
        ([{"approvalId": "", "approved": False}], {"index": 0, "field": "approvalId"}),
        ([{"approvalId": 7, "approved": False}], {"index": 0, "field": "approvalId"}),
        ([{"approvalId": "e1"}], {"index": 0, "approvalId": "e1", "field": "approved"}),
        (
            [{"approvalId": "e1", "approved": "true"}],
            {"index": 0, "approvalId": "e1", "field": "approved"},
        ),
        (
            [{"approvalId": "e1", "approved": 1}],
            {"index": 0, "approvalId": "e1", "field": "approved"},
        ),
        (
            [{"approvalId": "e1", "approved": False, "reason": 3}],
            {"index": 0, "approvalId": "e1", "field": "reason"},
        ),
        (
            [{"approvalId": "e1", "approved": True, "token": ["v1.x.y"]}],
            {"index": 0, "approvalId": "e1", "field": "token"},
        ),
        (
            [{"approvalId": "e1", "approved": True, "token": None}],
            {"index": 0, "approvalId": "e1", "field": "token"},
        ),
        ({"verdicts": [deny("e1")], "resume": "no"}, {"field": "resume"}),
    ],
)
def test_a_malformed_batch_is_a_400_naming_the_verdict_and_field(
    ann: User, run: Run, body: Any, expected: dict[str, Any]
) -> None:
    response = post(ann, run, body)
    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert expected.items() <= error.items(), error
    assert statuses(run) == {"r1": "pending", "e1": "pending"}


def test_a_json_null_body_is_a_400(ann: User, run: Run) -> None:
    response = client(ann).post(
        verdicts_url(run), b"null", content_type="application/json"
    )
    assert response.status_code == 400
    assert only_error(response)["field"] == "body"


def test_a_bad_token_type_never_echoes_the_value(ann: User, run: Run) -> None:
    secret_looking = {"t": "v1.secret-value.mac"}
    response = post(
        ann, run, [{"approvalId": "e1", "approved": True, "token": secret_looking}]
    )
    assert response.status_code == 400
    assert "secret-value" not in response.content.decode()


def test_unknown_and_repeated_approval_ids_are_a_400(ann: User, run: Run) -> None:
    response = post(ann, run, [deny("e1"), deny("nope"), deny("e1")])
    assert response.status_code == 400
    assert response.json()["errors"] == [
        {
            "index": 1,
            "approvalId": "nope",
            "field": "approvalId",
            "message": "no approval with this id on this run",
        },
        {
            "index": 2,
            "approvalId": "e1",
            "field": "approvalId",
            "message": "appears more than once in this request",
        },
    ]
    assert statuses(run) == {"r1": "pending", "e1": "pending"}


def test_an_approval_of_another_run_is_unknown_here(ann: User, run: Run) -> None:
    other = started(ann, agent="held")
    response = post(ann, run, [approve(other, "h1")])
    assert response.status_code == 400
    assert only_error(response)["message"] == "no approval with this id on this run"


def test_verdicts_on_a_run_the_user_may_not_see_are_not_found_before_anything_else(
    make_user: MakeUser, run: Run
) -> None:
    response = post(make_user("bob"), run, "garbage")
    assert response.status_code == 404
