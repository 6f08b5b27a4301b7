"""REST API: replaying a finished run (``POST runs/{id}/replay/``) and comparing a replay
with its original (``GET runs/{id}/comparison/``) — who may, what bad input gets, and that
a replay executes nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User

from deuz_django.models import Run
from deuz_django.runs.continuing import join_handed_off
from tests.api.support import API, client
from tests.django.replay_support import finished, replayed
from tests.django.run_support import suspended

pytestmark = pytest.mark.django_db(transaction=True)

MakeUser = Callable[..., User]
# What the original executed, sorted: its two calls run side by side once approved.
ORIGINAL_EFFECTS = ["echo:hi", "send_email:ann@example.com"]


def replay(user: Any, run: Run, body: Any = None, **options: Any) -> Any:
    return client(user).post(
        f"{API}/runs/{run.run_id}/replay/", body, format="json", **options
    )


def comparison(user: Any, run: Run) -> Any:
    return client(user).get(f"{API}/runs/{run.run_id}/comparison/")


def test_the_owner_replays_with_another_agent_and_nothing_executes(
    ann: User, effects: Callable[[], list[str]]
) -> None:
    original = finished(ann)
    response = replay(ann, original, {"agent": "mailing_v2", "system": "Be brief."})
    assert response.status_code == 201
    body = response.json()
    assert body["replayOf"] == original.run_id
    assert (body["agent"], body["owner"]) == ("mailing_v2", "ann")
    assert response["Location"] == body["url"]
    join_handed_off(timeout=60)
    assert sorted(effects()) == ORIGINAL_EFFECTS
    after = client(ann).get(body["url"]).json()
    assert (after["status"], after["stop"], after["lastError"]) == (
        "completed",
        None,
        "",
    )
    assert client(ann).get(f"{API}/runs/{original.run_id}/").json()["replayOf"] is None


def test_the_comparison_lines_the_two_transcripts_up_with_the_differences(
    ann: User,
) -> None:
    original = finished(ann)
    done = replayed(original, ann, agent="mailing_v2", system="Be brief.")
    response = comparison(ann, done)
    assert response.status_code == 200
    body = response.json()
    assert body["original"] == {
        "runId": original.run_id,
        "agent": "mailing",
        "status": "completed",
    }
    assert body["replayOptions"] == {"agent": "mailing_v2", "system": "Be brief."}
    assert (body["same"], body["firstDivergence"], body["stopped"]) == (False, 1, "")
    first, second = body["steps"]
    assert first["differences"] == []
    assert [c["toolName"] for c in first["replay"]["calls"]] == ["send_email", "echo"]
    assert second["differences"] == ["text"]


def test_a_diverged_replay_says_where_it_stopped(
    ann: User, effects: Callable[[], list[str]]
) -> None:
    done = replayed(finished(ann), ann, agent="diverging")
    run = client(ann).get(f"{API}/runs/{done.run_id}/").json()
    assert run["status"] == "stopped"
    assert run["stop"]["by"] == "the system"
    assert run["stop"]["reason"].startswith("The replayed model asked for send_email(")
    body = comparison(ann, done).json()
    assert "which the original run never made" in body["stopped"]
    (call,) = body["steps"][1]["replay"]["calls"]
    assert (call["input"], call["answered"], call["onlyHere"]) == (
        {"to": "bob@example.com"},
        False,
        True,
    )
    assert sorted(effects()) == ORIGINAL_EFFECTS


REPLAYERS = {
    # who: (permissions, staff, expected status)
    "other user": ((), False, 404),
    "staff with view_run": (("deuz_django.view_run",), True, 403),
    "staff with resume_run only": (
        ("deuz_django.view_run", "deuz_django.resume_run"),
        True,
        403,
    ),
    "staff with view_run and replay_run": (
        ("deuz_django.view_run", "deuz_django.replay_run"),
        True,
        201,
    ),
}


@pytest.mark.parametrize("who", REPLAYERS)
def test_who_may_replay(ann: User, make_user: MakeUser, who: str) -> None:
    perms, staff, expected = REPLAYERS[who]
    original = finished(ann)
    response = replay(make_user("someone", *perms, staff=staff), original)
    assert response.status_code == expected, response.json()
    join_handed_off(timeout=60)
    assert Run.objects.count() == (2 if expected == 201 else 1)


def test_another_users_comparison_is_not_found(ann: User, make_user: MakeUser) -> None:
    done = replayed(finished(ann), ann)
    assert comparison(make_user("bob"), done).status_code == 404
    assert comparison(None, done).status_code == 401


def test_a_run_that_replays_nothing_has_no_comparison(ann: User) -> None:
    response = comparison(ann, finished(ann))
    assert response.status_code == 404
    assert response.json()["code"] == "not_a_replay"


BAD = {
    "unknown agent": ({"agent": "nope"}, "agent"),
    "agent not a string": ({"agent": 7}, "agent"),
    "system not a string": ({"system": ["x"]}, "system"),
    "system too long": ({"system": "x" * 20001}, "system"),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_input_is_a_400_naming_the_field_and_nothing_is_written(
    ann: User, case: str
) -> None:
    body, field = BAD[case]
    original = finished(ann)
    response = replay(ann, original, body)
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == field
    assert Run.objects.count() == 1


def test_a_body_that_is_not_json_is_a_400_and_nothing_is_written(ann: User) -> None:
    original = finished(ann)
    response = client(ann).post(
        f"{API}/runs/{original.run_id}/replay/",
        "{not json",
        content_type="application/json",
    )
    assert (response.status_code, response.json()["code"]) == (400, "parse_error")
    assert Run.objects.count() == 1


def test_a_run_not_finished_is_a_conflict(ann: User) -> None:
    run = suspended("mailing", owner=ann)
    response = replay(ann, run)
    assert response.status_code == 409
    assert response.json() == {
        "detail": f"Run '{run.run_id}' is suspended; only a completed or stopped run "
        "can be replayed.",
        "code": "run_not_replayable",
    }
    assert Run.objects.count() == 1
