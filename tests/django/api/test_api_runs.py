"""REST API: listing, reading and starting runs, their messages, and the approval list."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User

from deuz_django.core.durable.codec import encode_json
from deuz_django.models import Run, RunMessage
from deuz_django.runs.continuing import join_handed_off
from deuz_django.storage.history import digest
from tests.api.support import API, client, started
from tests.django.run_support import background_leg

pytestmark = pytest.mark.django_db

MakeUser = Callable[..., User]


VIEWERS = {
    # who: (permissions, staff, sees ann's run)
    "owner": ((), False, True),
    "other user": ((), False, False),
    "staff without permissions": ((), True, False),
    "staff with view_run": (("deuz_django.view_run",), True, True),
    "user with view_run": (("deuz_django.view_run",), False, True),
}


def viewer(make_user: MakeUser, ann: User, who: str) -> User:
    perms, staff, _sees = VIEWERS[who]
    return ann if who == "owner" else make_user("someone", *perms, staff=staff)


@pytest.mark.parametrize("who", VIEWERS)
def test_the_run_list_holds_only_runs_the_user_may_see(
    make_user: MakeUser, ann: User, run: Run, who: str
) -> None:
    response = client(viewer(make_user, ann, who)).get(f"{API}/runs/")
    assert response.status_code == 200
    ids = [item["runId"] for item in response.json()["results"]]
    assert ids == ([run.run_id] if VIEWERS[who][2] else [])


@pytest.mark.parametrize("who", VIEWERS)
@pytest.mark.parametrize("suffix", ["", "messages/"])
def test_another_users_run_is_not_found(
    make_user: MakeUser, ann: User, run: Run, who: str, suffix: str
) -> None:
    response = client(viewer(make_user, ann, who)).get(
        f"{API}/runs/{run.run_id}/{suffix}"
    )
    assert response.status_code == (200 if VIEWERS[who][2] else 404)
    if response.status_code == 404:
        assert response.json() == {
            "detail": f"No run '{run.run_id}'.",
            "code": "not_found",
        }


@pytest.mark.parametrize("path", ["runs/", "runs/x/", "runs/x/messages/", "approvals/"])
def test_anonymous_reads_are_rejected_with_401(path: str) -> None:
    response = client().get(f"{API}/{path}")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert response.json()["code"] == "not_authenticated"


def test_an_inactive_user_is_rejected(make_user: MakeUser, run: Run) -> None:
    user = make_user("gone", "deuz_django.view_run")
    user.is_active = False
    user.save()
    assert client(user).get(f"{API}/runs/").status_code == 403


def test_a_run_reads_in_camel_case_with_its_pending_approvals(
    ann: User, run: Run
) -> None:
    body = client(ann).get(f"{API}/runs/{run.run_id}/").json()
    assert body["runId"] == run.run_id
    assert body["agent"] == "gated"
    assert body["owner"] == "ann"
    assert body["status"] == "suspended"
    assert body["stepIndex"] == 1
    assert body["usage"]["totalTokens"] == 15
    assert body["busy"] is False
    assert body["url"] == f"http://testserver{API}/runs/{run.run_id}/"
    pending = {a["approvalId"]: a for a in body["pendingApprovals"]}
    assert set(pending) == {"r1", "e1"}
    assert pending["e1"]["toolName"] == "send_email"
    assert pending["e1"]["input"] == {"to": "ann@example.com"}
    assert pending["e1"]["token"].startswith("v1.")


def test_the_run_list_filters_by_status_and_agent(ann: User, run: Run) -> None:
    other = started(ann, agent="scripted")
    api = client(ann)

    def ids(query: str) -> list[str]:
        return [r["runId"] for r in api.get(f"{API}/runs/?{query}").json()["results"]]

    assert ids("status=completed") == [other.run_id]
    assert ids("status=suspended") == [run.run_id]
    assert ids("agent=gated") == [run.run_id]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("status=paused", "status"),
        ("page=0", "page"),
        ("page=one", "page"),
        ("pageSize=0", "pageSize"),
        ("pageSize=201", "pageSize"),
    ],
)
def test_a_bad_query_parameter_is_a_400_naming_it(
    ann: User, query: str, field: str
) -> None:
    response = client(ann).get(f"{API}/runs/?{query}")
    assert response.status_code == 400
    assert [e["field"] for e in response.json()["errors"]] == [field]


def test_a_page_past_the_last_is_not_found(ann: User, run: Run) -> None:
    assert client(ann).get(f"{API}/runs/?page=2").status_code == 404


def test_messages_come_in_deuz_json_form_with_bytes_as_base64(
    ann: User, run: Run
) -> None:
    image = {"role": "user", "content": [{"type": "image", "image": b"\x89PNG"}]}
    data = encode_json(image)
    RunMessage.objects.create(
        run=run, index=2, role="user", data=data, digest=digest(data)
    )
    body = client(ann).get(f"{API}/runs/{run.run_id}/messages/?pageSize=2").json()
    assert body["count"] == 3
    first = body["results"][0]
    assert first == {
        "index": 0,
        "role": "user",
        "message": {"role": "user", "content": "Refund order A-1 and tell Ann."},
    }
    assert body["results"][1]["message"]["content"][0]["type"] == "tool_use"
    last = client(ann).get(body["next"]).json()["results"]
    assert (
        last[0]["message"]["content"][0]["image"]
        == base64.b64encode(b"\x89PNG").decode()
    )


@pytest.mark.parametrize("who", VIEWERS)
def test_the_approval_list_holds_pending_approvals_of_visible_runs(
    make_user: MakeUser, ann: User, run: Run, who: str
) -> None:
    response = client(viewer(make_user, ann, who)).get(f"{API}/approvals/")
    assert response.status_code == 200
    ids = [a["approvalId"] for a in response.json()["results"]]
    assert ids == (["r1", "e1"] if VIEWERS[who][2] else [])


def test_the_approval_list_filters_by_run_tool_and_status(ann: User, run: Run) -> None:
    other = started(ann)
    api = client(ann)

    def found(query: str) -> list[tuple[str, str]]:
        results = api.get(f"{API}/approvals/?{query}").json()["results"]
        return [(a["runId"], a["approvalId"]) for a in results]

    assert found(f"runId={other.run_id}") == [
        (other.run_id, "r1"),
        (other.run_id, "e1"),
    ]
    assert found("toolName=refund") == [(run.run_id, "r1"), (other.run_id, "r1")]
    assert found("status=approved") == []


# -- starting runs -------------------------------------------------------------------------


@background_leg
def test_a_signed_in_user_starts_a_run_and_its_first_leg_runs_in_the_background(
    ann: User,
) -> None:
    response = client(ann).post(
        f"{API}/runs/",
        {"agent": "gated", "text": "Refund A-1", "runId": "run-1", "title": "Refund"},
        format="json",
    )
    assert response.status_code == 201
    body = response.json()
    assert response["Location"] == body["url"] == f"http://testserver{API}/runs/run-1/"
    assert body["runId"] == "run-1"
    assert body["owner"] == "ann"
    assert body["title"] == "Refund"
    join_handed_off()  # the first leg ran after the response: the run waits for approvals
    run = client(ann).get(body["url"]).json()
    assert run["status"] == "suspended"
    assert [a["approvalId"] for a in run["pendingApprovals"]] == ["r1", "e1"]


@background_leg
def test_text_adds_a_last_user_message_after_the_messages(ann: User) -> None:
    response = client(ann).post(
        f"{API}/runs/",
        {
            "agent": "scripted",
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
            "text": "And bye.",
        },
        format="json",
    )
    assert response.status_code == 201
    run = Run.objects.get(run_id=response.json()["runId"])
    roles = list(run.messages.order_by("index").values_list("role", flat=True))
    assert roles[:3] == ["system", "user", "user"]
    join_handed_off()
    run.refresh_from_db()
    assert run.status == "completed"


@pytest.mark.parametrize("staff", [False, True])
def test_any_signed_in_user_may_start_a_run_which_is_theirs(
    make_user: MakeUser, staff: bool
) -> None:
    user = make_user("starter", staff=staff)
    response = client(user).post(
        f"{API}/runs/", {"agent": "scripted", "text": "Hi"}, format="json"
    )
    assert response.status_code == 201
    assert Run.objects.get(run_id=response.json()["runId"]).owner == user


def test_starting_a_run_needs_a_signed_in_user() -> None:
    response = client().post(
        f"{API}/runs/", {"agent": "scripted", "text": "Hi"}, format="json"
    )
    assert response.status_code == 401
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"agent": "nobody", "text": "Hi"}, "agent", 'Unknown agent "nobody"'),
        ({"text": "Hi"}, "agent", "This field is required."),
        ({"agent": "scripted"}, "messages", "Give messages or text."),
        ({"agent": "scripted", "messages": []}, "messages", "at least 1"),
        ({"agent": "scripted", "messages": "Hi"}, "messages", "Expected a list"),
        (
            {"agent": "scripted", "messages": [{"role": "bot", "content": "Hi"}]},
            "messages[0].role",
            "expected system, user, assistant or tool, got 'bot'",
        ),
        (
            {"agent": "scripted", "messages": [{"role": {}, "content": "Hi"}]},
            "messages[0].role",
            "expected system, user, assistant or tool, got {}",
        ),
        (
            {"agent": "scripted", "messages": [{"role": "user", "content": [{}]}]},
            "messages[0].content[0].type",
            "unknown part type None",
        ),
        ({"agent": "scripted", "text": 5}, "text", "Not a valid string."),
        ({"agent": "scripted", "text": "Hi", "runId": "a/b"}, "runId", "Use only"),
        ({"agent": "scripted", "text": "Hi", "runId": "a" * 101}, "runId", "100"),
    ],
)
def test_a_bad_start_request_is_a_400_naming_the_field(
    ann: User, body: dict[str, Any], field: str, message: str
) -> None:
    response = client(ann).post(f"{API}/runs/", body, format="json")
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert errors[0]["field"] == field
    assert message in errors[0]["message"]
    assert not Run.objects.exists()


def test_a_run_id_taken_already_is_a_conflict(ann: User, run: Run) -> None:
    response = client(ann).post(
        f"{API}/runs/",
        {"agent": "scripted", "text": "Hi", "runId": run.run_id},
        format="json",
    )
    assert response.status_code == 409
    assert response.json()["code"] == "run_exists"
