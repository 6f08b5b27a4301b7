"""POST and GET ``runs/{runId}/inputs/``: steering a run over REST."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User

from deuz_django import services
from deuz_django.models import Run
from deuz_django.storage import leases
from tests.api.support import API, client
from tests.django.run_support import PROMPT

pytestmark = pytest.mark.django_db

MakeUser = Callable[..., User]


def inputs_url(run: Run) -> str:
    return f"{API}/runs/{run.run_id}/inputs/"


def started(agent: str, owner: User) -> Run:
    return services.start_run(agent=agent, messages=PROMPT, owner=owner)


def test_an_input_is_accepted_with_its_place_in_the_queue(make_user: MakeUser) -> None:
    ann = make_user("ann")
    run = started("echoer", ann)
    body = {"text": "Only A-1.", "inputId": "msg-1"}
    response = client(ann).post(inputs_url(run), body, format="json")
    assert response.status_code == 202
    assert response.json() == {"inputId": "msg-1", "seq": 1, "status": "queued"}
    again = client(ann).post(inputs_url(run), body, format="json")
    assert again.json() == {"inputId": "msg-1", "seq": 1, "status": "queued"}


def test_the_list_shows_queued_and_delivered_inputs(make_user: MakeUser) -> None:
    ann = make_user("ann")
    run = started("echoer", ann)
    api = client(ann)
    api.post(inputs_url(run), {"text": "First."}, format="json")
    services.resume_run(run.run_id)
    run = started("emailer", ann)
    services.resume_run(run.run_id)  # waits for a person now
    api.post(inputs_url(run), {"text": "Later."}, format="json")
    listed = api.get(inputs_url(run)).json()["results"]
    assert [(i["text"], i["status"], i["step"], i["sentBy"]) for i in listed] == [
        ("Later.", "queued", None, "ann")
    ]
    done = Run.objects.filter(agent="echoer").get()
    [first] = api.get(inputs_url(done)).json()["results"]
    assert (first["status"], first["step"], first["seq"]) == ("delivered", 0, 1)
    assert first["deliveredAt"] is not None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "text"),
        ({"text": "   "}, "text"),
        ({"text": 5}, "text"),
        ({"text": "a\x00b"}, "text"),
        ({"text": "x" * 40_000}, "text"),
        ({"text": "Hi", "inputId": "no spaces"}, "inputId"),
    ],
)
def test_a_bad_input_is_a_400_naming_the_field(
    make_user: MakeUser, body: dict[str, Any], field: str
) -> None:
    ann = make_user("ann")
    run = started("echoer", ann)
    response = client(ann).post(inputs_url(run), body, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == field


def test_who_may_not_resume_a_run_may_not_steer_it(make_user: MakeUser) -> None:
    ann = make_user("ann")
    run = started("echoer", ann)
    stranger = client(make_user("eve")).post(inputs_url(run), {"text": "Hi"})
    assert stranger.status_code == 404
    viewer = make_user("viewer", "deuz_django.view_run", staff=True)
    refused = client(viewer).post(inputs_url(run), {"text": "Hi"}, format="json")
    assert (refused.status_code, refused.json()["code"]) == (403, "not_permitted")
    assert client(viewer).get(inputs_url(run)).status_code == 200


def test_a_completed_run_answers_409_saying_what_to_do(make_user: MakeUser) -> None:
    ann = make_user("ann")
    run = started("echoer", ann)
    services.resume_run(run.run_id)
    response = client(ann).post(inputs_url(run), {"text": "More"}, format="json")
    assert response.status_code == 409
    assert response.json() == {
        "detail": f"Run '{run.run_id}' has completed; start a new one or fork it.",
        "code": "run_not_steerable",
    }


def test_a_rejecting_agent_answers_409_while_it_runs(make_user: MakeUser) -> None:
    ann = make_user("ann")
    run = started("echoer_reject", ann)
    leases.acquire(run.run_id)
    response = client(ann).post(inputs_url(run), {"text": "Now"}, format="json")
    assert (response.status_code, response.json()["code"]) == (409, "input_rejected")
