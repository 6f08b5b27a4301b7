"""A person can always stop a run: from the admin (run page and queue), REST, the
WebSocket and ``deuz stop``; at once when no leg holds it, else at the holding leg's
next fence — never mid-tool — with who and why kept on the run."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from deuz_django import services
from deuz_django.exceptions import NotPermitted, RunNotFound, RunNotResumable
from deuz_django.models import Approval, ApprovalStatus, Run, RunStatus
from deuz_django.signals import run_stopped
from tests.api.support import client, started
from tests.django.admin_support import QUEUE, messages_of, run_url
from tests.django.agents import HOLD_HOOKS
from tests.django.run_support import history, ready_to_resume
from tests.django.streaming.test_consumer import until

pytestmark = pytest.mark.django_db(transaction=True)


def stop_url(run: Run) -> str:
    return f"/api/deuz/runs/{run.run_id}/stop/"


@pytest.fixture
def stopped_signals() -> Iterator[list[Run]]:
    received: list[Run] = []

    def receive(sender: Any, run: Run, **kwargs: Any) -> None:
        received.append(run)

    run_stopped.connect(receive)
    yield received
    run_stopped.disconnect(receive)


def assert_stopped(run: Run, *, by: str, reason: str) -> None:
    run.refresh_from_db()
    assert run.status == RunStatus.STOPPED
    assert run.stopper == by
    assert run.stop_reason == reason
    assert run.stopped_at is not None
    pending = Approval.objects.filter(run=run, status=ApprovalStatus.PENDING)
    assert not pending.exists()


# -- a run no leg holds stops at once ---------------------------------------------------


def test_the_owner_stops_a_waiting_run_over_rest_and_its_calls_are_cancelled(
    ann: User, stopped_signals: list[Run]
) -> None:
    run = started(ann)  # waits on r1 and e1
    response = client(ann).post(
        stop_url(run), {"reason": "Wrong order."}, format="json"
    )
    assert response.status_code == 200
    assert response.json() == {
        "runId": run.run_id,
        "status": "stopped",
        "detail": "The run is stopped.",
    }
    assert_stopped(run, by="ann", reason="Wrong order.")
    cancelled = Approval.objects.filter(run=run, status=ApprovalStatus.CANCELLED)
    assert cancelled.count() == 2
    assert all("Stopped by ann: Wrong order." in a.reason for a in cancelled)
    assert [r.run_id for r in stopped_signals] == [run.run_id]
    shown = client(ann).get(f"/api/deuz/runs/{run.run_id}/").json()
    assert shown["status"] == "stopped"
    assert shown["stop"]["by"] == "ann"
    assert shown["stop"]["reason"] == "Wrong order."


def test_nothing_continues_a_stopped_run(ann: User) -> None:
    run = started(ann)
    services.stop_run(run.run_id, user=ann)
    with pytest.raises(RunNotResumable, match="is stopped"):
        services.resume_run(run.run_id)
    assert client(ann).post(stop_url(run), {}, format="json").status_code == 409
    assert run.run_id not in services.recoverable_runs(0)


def test_stopping_is_refused_to_those_who_may_not(
    ann: User, make_user: Callable[..., User]
) -> None:
    run = started(ann)
    stranger = make_user("bob")
    viewer = make_user("vic", "deuz_django.view_run")
    assert client(stranger).post(stop_url(run), {}, format="json").status_code == 404
    refused = client(viewer).post(stop_url(run), {}, format="json")
    assert refused.status_code == 403
    assert client().post(stop_url(run), {}, format="json").status_code in (401, 403)
    with pytest.raises(RunNotFound):
        services.stop_run(run.run_id, user=stranger)
    with pytest.raises(NotPermitted):
        services.stop_run(run.run_id, user=viewer)
    run.refresh_from_db()
    assert run.status == RunStatus.SUSPENDED
    assert run.stop_requested_at is None


def test_staff_with_stop_run_may_stop_others_runs(
    ann: User, make_user: Callable[..., User]
) -> None:
    run = started(ann)
    ops = make_user("ops", "deuz_django.view_run", "deuz_django.stop_run")
    assert client(ops).post(stop_url(run), {}, format="json").status_code == 200
    assert_stopped(run, by="ops", reason="")


@pytest.mark.parametrize("body", [{"reason": 5}, {"reason": "x" * 1001}, ["stop"]])
def test_a_bad_stop_body_is_a_400_and_stops_nothing(ann: User, body: Any) -> None:
    run = started(ann)
    response = client(ann).post(stop_url(run), body, format="json")
    assert response.status_code == 400
    run.refresh_from_db()
    assert run.stop_requested_at is None


# -- a running leg stops at its next fence -------------------------------------------------


@pytest.fixture
def hook() -> Iterator[list[Callable[[], None]]]:
    yield HOLD_HOOKS
    HOLD_HOOKS.clear()


def test_a_leg_stops_at_its_next_fence_and_its_executing_tool_finishes(
    ann: User,
    hook: list[Callable[[], None]],
    effects: Callable[[], list[str]],
    stopped_signals: list[Run],
) -> None:
    """Stopped while its tool runs: the tool finishes (its result is kept), then the
    fence before the next model call ends the leg — no answer follows."""
    run = ready_to_resume(ann)
    answers: list[bool] = []
    hook.append(
        lambda: answers.append(
            services.stop_run(run.run_id, user=ann).stopped_at is None
        )
    )
    outcome = services.resume_run(run.run_id)
    assert answers == [True]  # asked while the leg held the run: it stops later
    assert outcome.status == RunStatus.STOPPED
    assert outcome.error is None
    assert effects() == ["hold:once"]
    assert_stopped(run, by="ann", reason="")
    assert not any("Held and released." in m.text for m in history(run))
    assert [r.run_id for r in stopped_signals] == [run.run_id]


# -- the WebSocket ---------------------------------------------------------------------------


async def test_a_stop_frame_stops_the_run_and_its_followers_hear_it(
    ann: User, ws_as: Any
) -> None:
    """A waiting run, followed by a tab: the stop reaches the tab as a last leg that
    says who stopped it and why."""
    run = await sync_to_async(started)(ann)
    ws = await ws_as(ann)
    await ws.send_json_to({"type": "subscribe", "runId": run.run_id})
    await until(ws, lambda frame: frame.get("type") == "subscribed")
    await ws.send_json_to({"type": "stop", "runId": run.run_id, "reason": "Enough."})
    stopped = {"type": "error", "message": "Stopped by ann: Enough."}
    requested = {"type": "stop-requested", "runId": run.run_id, "status": "stopped"}
    frames = await until(ws, lambda frame: frame == requested)
    if stopped not in [f.get("part") for f in frames]:
        frames += await until(ws, lambda frame: frame.get("part") == stopped)
    await sync_to_async(assert_stopped)(run, by="ann", reason="Enough.")


async def test_a_bad_stop_frame_gets_an_error_frame(
    ann: User, make_user: Callable[..., User], ws_as: Any
) -> None:
    run = await sync_to_async(started)(ann)
    bob = await sync_to_async(make_user)("bob")
    ws = await ws_as(bob)
    await ws.send_json_to({"type": "stop", "runId": run.run_id})
    error = await ws.receive_json_from(timeout=5)
    assert (error["type"], error["code"]) == ("error", "not_found")
    await ws.send_json_to({"type": "stop", "runId": run.run_id, "reason": ["x"]})
    error = await ws.receive_json_from(timeout=5)
    assert (error["type"], error["code"]) == ("error", "invalid_field")
    run_row = await Run.objects.aget(pk=run.pk)
    assert run_row.stop_requested_at is None


# -- the command -----------------------------------------------------------------------------


def test_deuz_stop_as_a_user_and_as_an_operator(
    ann: User, make_user: Callable[..., User]
) -> None:
    first, second = started(ann), started(ann)
    out = io.StringIO()
    call_command(
        "deuz", "stop", first.run_id, "--as", "ann", "--reason", "r", stdout=out
    )
    assert out.getvalue().strip() == f"Run {first.run_id}: stopped"
    assert_stopped(first, by="ann", reason="r")
    call_command("deuz", "stop", second.run_id, "--operator", "oncall", stdout=out)
    assert_stopped(second, by="oncall (operator)", reason="")
    shown = io.StringIO()
    call_command("deuz", "show", first.run_id, stdout=shown)
    assert "Stopped by ann: r." in shown.getvalue()


def test_deuz_stop_refuses_a_user_who_may_not(
    ann: User, make_user: Callable[..., User]
) -> None:
    run = started(ann)
    make_user("vic", "deuz_django.view_run")
    with pytest.raises(CommandError) as refused:
        call_command("deuz", "stop", run.run_id, "--as", "vic", stdout=io.StringIO())
    assert refused.value.returncode == 3
    with pytest.raises(CommandError) as missing:
        call_command("deuz", "stop", run.run_id, stdout=io.StringIO())
    assert missing.value.returncode == 2
    run.refresh_from_db()
    assert run.stop_requested_at is None


# -- the admin -------------------------------------------------------------------------------


def test_the_run_page_stops_the_run_with_a_reason(
    ann: User, make_user: Callable[..., User]
) -> None:
    run = started(ann)
    boss = make_user("boss", superuser=True)
    browser = Client()
    browser.force_login(boss)
    page = browser.get(run_url(run))
    assert b"Stop the run" in page.content
    stop = reverse("admin:deuz_django_run_stop", args=[run.pk])
    assert browser.get(stop).status_code == 405
    response = browser.post(stop, {"reason": "Customer called."}, follow=True)
    assert messages_of(response) == [f"Run {run.run_id} is stopped."]
    assert_stopped(run, by="boss", reason="Customer called.")
    page = browser.get(run_url(run)).content.decode()
    assert "Stopped by boss: Customer called." in page
    assert "Stop the run" not in page


def test_the_queue_stops_the_runs_of_selected_calls(
    ann: User, make_user: Callable[..., User]
) -> None:
    run = started(ann)
    boss = make_user("boss", superuser=True)
    browser = Client()
    browser.force_login(boss)
    ids = list(Approval.objects.filter(run=run).values_list("pk", flat=True))
    response = browser.post(
        QUEUE,
        {"action": "stop_runs", "_selected_action": [str(i) for i in ids]},
        follow=True,
    )
    assert messages_of(response) == [f"Run {run.run_id} is stopped."]
    assert_stopped(run, by="boss", reason="Stopped from the approval queue.")
