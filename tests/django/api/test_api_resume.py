"""REST API: resuming a run — 202 with its status URL, 409 when it cannot, exactly once."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection

from deuz_django.models import Run
from deuz_django.runs.continuing import join_handed_off
from deuz_django.storage import leases
from tests.api.support import (
    API,
    approve,
    client,
    resume_url,
    started,
    verdicts_url,
)
from tests.django.run_support import background_leg

MakeUser = Callable[..., User]


def resume(user: Any, run: Run, body: Any = None) -> Any:
    return client(user).post(resume_url(run), body, format="json")


def statuses(run: Run) -> dict[str, str]:
    return dict(run.approvals.values_list("approval_id", "status"))


RESUMERS = {
    # who: (permissions, staff, expected status)
    "other user": ((), False, 404),
    "staff without permissions": ((), True, 404),
    "staff with view_run": (("deuz_django.view_run",), True, 403),
    "staff with view_run and resume_run": (
        ("deuz_django.view_run", "deuz_django.resume_run"),
        True,
        202,
    ),
}


@background_leg
@pytest.mark.parametrize("who", RESUMERS)
def test_who_may_resume(make_user: MakeUser, run: Run, who: str) -> None:
    perms, staff, expected = RESUMERS[who]
    response = resume(
        make_user("someone", *perms, staff=staff), run, {"denyRemaining": True}
    )
    assert response.status_code == expected
    join_handed_off()
    run.refresh_from_db()
    assert run.status == ("completed" if expected == 202 else "suspended")


@pytest.mark.django_db
def test_anonymous_resume_is_rejected(run: Run) -> None:
    assert resume(None, run, {"denyRemaining": True}).status_code == 401


@background_leg
def test_an_accepted_resume_answers_202_with_the_runs_status_url(
    ann: User, run: Run, effects: Callable[[], list[str]]
) -> None:
    response = resume(ann, run, {"denyRemaining": True})
    assert response.status_code == 202
    url = f"http://testserver{API}/runs/{run.run_id}/"
    assert response.json() == {
        "runId": run.run_id,
        "detail": "Resumed: it continues on this server.",
        "resumeQueued": True,
        "statusUrl": url,
    }
    assert response["Location"] == url
    assert statuses(run) == {"r1": "denied", "e1": "denied"}
    assert set(run.approvals.values_list("decided_by__username", flat=True)) == {"ann"}
    join_handed_off()
    assert effects() == []
    assert client(ann).get(url).json()["status"] == "completed"


@pytest.mark.django_db
def test_undecided_approvals_make_the_resume_a_conflict(ann: User, run: Run) -> None:
    for body in (None, {}, {"denyRemaining": False}):
        response = resume(ann, run, body)
        assert response.status_code == 409
        assert response.json()["code"] == "run_not_resumable"
        assert "still waits for a verdict on r1, e1" in response.json()["detail"]
    assert statuses(run) == {"r1": "pending", "e1": "pending"}


@pytest.mark.django_db
def test_a_completed_run_is_a_conflict(ann: User) -> None:
    run = started(ann, agent="scripted")
    response = resume(ann, run)
    assert response.status_code == 409
    assert response.json()["detail"] == f"Run '{run.run_id}' is completed."


@pytest.mark.django_db
def test_a_busy_run_is_a_conflict_with_a_clear_message(ann: User, run: Run) -> None:
    lease = leases.acquire(run.run_id)
    try:
        response = resume(ann, run, {"denyRemaining": True})
    finally:
        leases.release(lease)
    assert response.status_code == 409
    assert response.json() == {
        "detail": f"Run '{run.run_id}' is busy: another leg is running it. "
        "Try again when it ends.",
        "code": "run_busy",
    }
    assert statuses(run) == {"r1": "pending", "e1": "pending"}


@background_leg
def test_a_decided_run_resumes_and_runs_its_approved_call(
    ann: User, effects: Callable[[], list[str]]
) -> None:
    run = started(ann, agent="held")
    body = {"verdicts": [approve(run, "h1")], "resume": False}
    assert client(ann).post(verdicts_url(run), body, format="json").status_code == 200
    assert effects() == []
    assert resume(ann, run).status_code == 202
    join_handed_off()
    assert effects() == ["hold:once"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "body", [{"denyRemaining": "yes"}, {"denyRemaining": 1}, [True], "deny"]
)
def test_a_bad_resume_body_is_a_400(ann: User, run: Run, body: Any) -> None:
    response = resume(ann, run, body)
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] in {"denyRemaining", "body"}


@pytest.mark.django_db(transaction=True)
def test_concurrent_resumes_of_one_run_get_exactly_one_202(
    ann: User, effects: Callable[[], list[str]]
) -> None:
    run = started(ann, agent="held")
    body = {"verdicts": [approve(run, "h1")], "resume": False}
    assert client(ann).post(verdicts_url(run), body, format="json").status_code == 200
    racers = 8
    barrier = threading.Barrier(racers)
    codes: list[int] = []
    details: list[str] = []

    def race() -> None:
        try:
            api = client(ann)
            barrier.wait()
            response = api.post(resume_url(run), {}, format="json")
            codes.append(response.status_code)
            details.append(response.json()["detail"])
        finally:
            connection.close()

    threads = [threading.Thread(target=race) for _ in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    join_handed_off()
    assert sorted(codes) == [202] + [409] * (racers - 1), details
    assert effects() == ["hold:once"]
    run.refresh_from_db()
    assert run.status == "completed"
