"""Grants: "approve, and allow this tool" — for the rest of the run, or for the owner's
runs for some hours — over REST and the WebSocket. A grant approves the same tool's
later calls with its maker's rights, never a tool the owner may not approve for the
owner's runs; bad input is refused naming the field, and nothing is recorded."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.utils import timezone

from deuz_django import services
from deuz_django.models import Approval, ApprovalStatus, Grant, Run, RunStatus
from deuz_django.runs.continuing import join_handed_off
from tests.api.support import API, approve, client, started, verdicts_url
from tests.django.agents import TOOL_PERMISSION

pytestmark = pytest.mark.django_db(transaction=True)
MakeUser = Callable[..., User]
FOR_THE_RUN = {"scope": "run"}
FOR_A_DAY = {"scope": "owner", "hours": 24}


@pytest.fixture
def twice(ann: User) -> Run:
    """Ann's ``twice`` run, suspended on e1 (an email to Ann; e2, to Bob, follows)."""
    return started(ann, agent="twice")


def allowing(run: Run, approval_id: str, allow: Any) -> dict[str, Any]:
    return {**approve(run, approval_id), "allow": allow}


def post(user: User, run: Run, *verdicts: dict[str, Any], resume: bool = True) -> Any:
    """Post the verdicts, then wait for the leg they resumed."""
    response = client(user).post(
        verdicts_url(run), {"verdicts": list(verdicts), "resume": resume}, format="json"
    )
    join_handed_off()
    return response


def row(run: Run, approval_id: str) -> Approval:
    return Approval.objects.select_related("decided_by_grant").get(
        run=run, approval_id=approval_id
    )


def test_allowing_for_the_run_approves_the_tools_next_call_and_the_run_completes(
    twice: Run, ann: User, effects: Callable[[], list[str]]
) -> None:
    response = post(ann, twice, allowing(twice, "e1", FOR_THE_RUN))

    assert response.status_code == 202, response.json()
    twice.refresh_from_db()
    assert twice.status == RunStatus.COMPLETED
    assert effects() == ["send_email:ann@example.com", "send_email:bob@example.com"]
    [grant] = Grant.objects.all()
    assert (
        grant.scope,
        grant.run,
        grant.owner,
        grant.created_by,
        grant.expires_at,
    ) == (
        "run",
        twice,
        None,
        ann,
        None,
    )
    assert grant.approval == row(twice, "e1")
    e2 = row(twice, "e2")
    assert (e2.status, e2.decided_by_grant, e2.decided_by) == ("approved", grant, None)
    assert (
        e2.decider
        == f"grant #{grant.pk}: send_email on run {twice.run_id}, made by ann"
    )


def test_the_api_names_the_grant_that_decided_a_call(twice: Run, ann: User) -> None:
    post(ann, twice, allowing(twice, "e1", FOR_THE_RUN))
    grant = Grant.objects.get()

    listed = client(ann).get(f"{API}/approvals/?runId={twice.run_id}&status=approved")

    by_id = {a["approvalId"]: a for a in listed.json()["results"]}
    assert by_id["e1"]["automaticDecision"] is None
    assert by_id["e2"]["automaticDecision"] == {
        "kind": "grant",
        "id": grant.pk,
        "description": str(grant),
        "madeBy": "ann",
    }


def test_allowing_for_the_owner_covers_their_other_runs_of_the_agent_until_expiry(
    twice: Run, ann: User, make_user: MakeUser
) -> None:
    before = timezone.now()
    assert post(ann, twice, allowing(twice, "e1", FOR_A_DAY)).status_code == 202
    grant = Grant.objects.get()
    assert (grant.scope, grant.owner, grant.run) == ("owner", ann, None)
    assert grant.expires_at is not None
    assert timedelta(hours=24) <= grant.expires_at - before < timedelta(hours=25)

    another = started(ann, agent="twice")
    assert another.status == RunStatus.COMPLETED  # nobody was asked
    assert started(make_user("bob"), agent="twice").status == RunStatus.SUSPENDED
    assert row(started(ann, agent="payer"), "e1").is_pending  # another agent

    Grant.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert started(ann, agent="twice").status == RunStatus.SUSPENDED


def test_a_revoked_grant_approves_nothing(twice: Run, ann: User) -> None:
    post(ann, twice, allowing(twice, "e1", FOR_A_DAY))
    Grant.objects.update(revoked_at=timezone.now())

    assert row(started(ann, agent="twice"), "e1").is_pending


def test_a_grant_whose_maker_may_no_longer_decide_approves_nothing(
    twice: Run, ann: User
) -> None:
    post(ann, twice, allowing(twice, "e1", FOR_A_DAY), resume=False)
    ann.is_active = False
    ann.save()

    assert row(started(ann, agent="twice"), "e1").is_pending


def test_a_tool_the_owner_may_not_approve_is_never_allowed_for_the_owners_runs(
    ann: User, make_user: MakeUser
) -> None:
    fin = make_user(
        "fin", "deuz_django.view_run", "deuz_django.decide_approval", TOOL_PERMISSION
    )
    run = started(ann)

    response = post(fin, run, allowing(run, "r1", FOR_A_DAY))

    assert response.status_code == 400
    (error,) = response.json()["errors"]
    assert error["field"] == "allow"
    assert "separation of duties" in error["message"]
    assert row(run, "r1").is_pending
    assert not Grant.objects.exists()


def test_an_owner_wide_grant_for_such_a_tool_never_applies_even_if_stored(
    ann: User, make_user: MakeUser
) -> None:
    """Belt and braces: a grant written past the verdict's check still stops at
    separation of duties when it would decide."""
    fin = make_user(
        "fin", "deuz_django.view_run", "deuz_django.decide_approval", TOOL_PERMISSION
    )
    Grant.objects.create(
        tool_name="refund",
        agent="gated",
        scope="owner",
        owner=ann,
        created_by=fin,
        expires_at=timezone.now() + timedelta(hours=1),
    )

    assert row(started(ann), "r1").is_pending


def test_a_run_wide_grant_from_finance_approves_the_runs_later_refunds(
    ann: User, make_user: MakeUser
) -> None:
    fin = make_user(
        "fin", "deuz_django.view_run", "deuz_django.decide_approval", TOOL_PERMISSION
    )
    run = services.start_run(
        agent="gated", messages=[{"role": "user", "content": "go"}], owner=ann
    )
    Grant.objects.create(
        tool_name="refund", agent="gated", scope="run", run=run, created_by=fin
    )

    services.resume_run(run.run_id)  # the model asks for r1 and e1

    assert row(run, "r1").status == ApprovalStatus.APPROVED
    assert row(run, "e1").is_pending


def test_a_run_with_grants_that_decided_can_still_be_deleted(
    twice: Run, ann: User
) -> None:
    post(ann, twice, allowing(twice, "e1", FOR_THE_RUN))

    services.delete_run(twice.run_id)

    assert not Grant.objects.exists()


@pytest.mark.parametrize(
    ("allow", "approved", "field", "problem"),
    [
        ({"scope": "forever"}, True, "allow.scope", '"forever" is not a valid choice'),
        ({"scope": "owner"}, True, "allow.hours", "from 1 to 168"),
        ({"scope": "owner", "hours": 0}, True, "allow.hours", "from 1 to 168"),
        ({"scope": "owner", "hours": 169}, True, "allow.hours", "from 1 to 168"),
        ({"scope": "owner", "hours": "8"}, True, "allow.hours", "Must be an integer"),
        ({"scope": "owner", "hours": 2**60}, True, "allow.hours", "less than or equal"),
        (
            {"scope": "run", "hours": 8},
            True,
            "allow.hours",
            "only with the owner scope",
        ),
        ("run", True, "allow", "Expected a dictionary"),
        ({}, True, "allow.scope", "This field is required"),
        (FOR_THE_RUN, False, "allow", "only an approving verdict may allow"),
    ],
)
def test_a_bad_allow_is_refused_naming_the_field_and_nothing_is_recorded(
    twice: Run, ann: User, allow: Any, approved: bool, field: str, problem: str
) -> None:
    verdict = {**allowing(twice, "e1", allow), "approved": approved}

    response = post(ann, twice, verdict)

    assert response.status_code == 400, response.json()
    (error,) = response.json()["errors"]
    assert (error["index"], error["approvalId"], error["field"]) == (0, "e1", field)
    assert problem in error["message"]
    assert row(twice, "e1").is_pending
    assert not Grant.objects.exists()


def test_the_grants_bound_is_a_setting(twice: Run, ann: User, settings: Any) -> None:
    settings.DEUZ = {**settings.DEUZ, "GRANT_MAX_HOURS": 720}

    response = post(ann, twice, allowing(twice, "e1", {"scope": "owner", "hours": 720}))

    assert response.status_code == 202, response.json()


def test_a_call_in_doubt_allows_nothing(ann: User) -> None:
    from tests.django.run_support import in_doubt

    run = in_doubt(ann)
    verdict = allowing(run, "s1", FOR_THE_RUN)

    response = post(ann, run, verdict)

    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "allow"
    assert row(run, "s1").is_pending


# -- the WebSocket -----------------------------------------------------------------------


async def test_allow_travels_with_the_approval_response_frame(
    twice: Run, ann: User, ws_as: Any
) -> None:
    ws = await ws_as(ann)
    verdict = await sync_to_async(allowing)(twice, "e1", FOR_THE_RUN)
    await ws.send_json_to(
        {"type": "approval-response", "runId": twice.run_id, **verdict}
    )

    frame = await ws.receive_json_from(timeout=5)

    assert (frame["type"], frame["status"], frame["resuming"]) == (
        "approval-recorded",
        "approved",
        True,
    )
    grant = await Grant.objects.aget()
    assert (grant.scope, grant.run_id) == ("run", twice.pk)
    # The socket's process continues the run: e2 is the grant's, and the run ends.
    for _ in range(200):
        await twice.arefresh_from_db()
        if twice.status == RunStatus.COMPLETED and not twice.lease_owner:
            break
        await asyncio.sleep(0.05)
    assert twice.status == RunStatus.COMPLETED
    e2 = await Approval.objects.aget(run=twice, approval_id="e2")
    assert e2.decided_by_grant_id == grant.pk


@pytest.mark.parametrize(
    ("allow", "code", "message"),
    [
        ({"scope": "owner", "hours": "8"}, "invalid_field", "allow.hours: Must be an"),
        (
            {"scope": "owner", "hours": 0},
            "invalid_verdict",
            "allow.hours: give a whole",
        ),
        ({"scope": "nope"}, "invalid_field", 'allow.scope: "nope" is not a valid'),
    ],
)
async def test_a_bad_allow_on_the_socket_gets_an_error_frame_and_nothing_is_recorded(
    twice: Run, ann: User, ws_as: Any, allow: Any, code: str, message: str
) -> None:
    ws = await ws_as(ann)
    verdict = await sync_to_async(allowing)(twice, "e1", allow)
    await ws.send_json_to(
        {"type": "approval-response", "runId": twice.run_id, **verdict}
    )

    error = await ws.receive_json_from(timeout=5)

    assert (error["type"], error["code"]) == ("error", code)
    assert message in error["message"]
    assert (await sync_to_async(row)(twice, "e1")).is_pending
    assert not await Grant.objects.aexists()
