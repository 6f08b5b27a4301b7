"""No web request waits for a leg (issue #27, item 6): with the immediate backend, which
would run the task inside the request, a verdict's request hands the claimed leg to this
process — the server's event loop, or a thread — and returns; the leg goes on by itself.

The ``held`` agent's tool runs the test's hook: it says when the leg is inside the tool
and keeps it there until the test lets go, after the request has returned. A request that
waited for the leg would wait for the hook (which gives up after a minute, failing the
leg, so the test fails instead of hanging).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from deuz_django import services
from deuz_django.approvals import links as action_links
from deuz_django.models import Run, RunStatus
from deuz_django.runs import continuing as continuation
from deuz_django.runs import draining
from tests.api.support import approve, client, verdicts_url
from tests.django import agents
from tests.django.admin_support import decide_url, messages_of
from tests.django.notify_support import notifying
from tests.django.run_support import (
    approval,
    background_leg,
    ready_to_resume,
    suspended,
)

pytestmark = background_leg


class InsideTool:
    """The ``hold`` tool's hook: ``entered`` once the leg is inside the tool, which
    returns once the test sets ``released``."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.released = threading.Event()

    def __call__(self) -> None:
        self.entered.set()
        if not self.released.wait(agents.GATE_TIMEOUT_SECONDS):
            raise TimeoutError("the test never let the tool return")


@pytest.fixture
def inside_tool(monkeypatch: pytest.MonkeyPatch) -> Iterator[InsideTool]:
    hook = InsideTool()
    monkeypatch.setattr(agents, "HOLD_HOOKS", [hook])
    yield hook
    hook.released.set()  # a failed test leaves no leg in the tool


def admin_approve(owner: User, run: Run, *, follow: bool = False) -> Any:
    """Approve in the admin: the run page's button, confirmed (by a superuser)."""
    admin = Client()
    admin.force_login(User.objects.create_superuser("root", password="pw"))
    return admin.post(
        decide_url(approval(run, "hold")),
        {"verdict": "approve", "post": "yes"},
        follow=follow,
    )


def rest_verdict(owner: User, run: Run) -> Any:
    body = {"verdicts": [approve(run, "h1")]}
    return client(owner).post(verdicts_url(run), body, format="json")


def action_link(owner: User, run: Run) -> Any:
    """Approve on the page a notification's link opens."""
    browser = Client()
    browser.force_login(owner)
    with notifying():
        token = action_links.make_token(approval(run, "hold"), "approve")
        return browser.post(
            reverse(action_links.ROUTE, kwargs={"token": token}), {"verdict": "approve"}
        )


@pytest.mark.parametrize(
    ("decide", "status_code"),
    [(admin_approve, 302), (rest_verdict, 202), (action_link, 302)],
    ids=["admin", "rest", "action-link"],
)
def test_a_verdicts_request_returns_while_the_leg_it_resumed_is_inside_a_tool(
    ann: User,
    inside_tool: InsideTool,
    effects: Callable[[], list[str]],
    decide: Callable[[User, Run], Any],
    status_code: int,
) -> None:
    run = suspended("held", owner=ann)

    response = decide(ann, run)

    assert response.status_code == status_code
    assert inside_tool.entered.wait(agents.GATE_TIMEOUT_SECONDS)
    assert effects() == ["hold:once"]  # the leg is inside the tool, holding the run
    run.refresh_from_db()
    assert run.lease_owner != ""
    inside_tool.released.set()
    continuation.join_handed_off()
    run.refresh_from_db()
    assert (run.status, run.lease_owner) == (RunStatus.COMPLETED, "")
    assert effects() == ["hold:once"]


def test_the_admin_says_the_run_resumed_in_the_background(
    ann: User, inside_tool: InsideTool
) -> None:
    run = suspended("held", owner=ann)

    page = admin_approve(ann, run, follow=True)

    assert messages_of(page) == [
        f"Approved hold (h1) on run {run.run_id}.",
        f"Run {run.run_id} resumed: it continues on this server.",
    ]
    inside_tool.released.set()
    continuation.join_handed_off()


def test_a_stopping_server_takes_no_leg_gives_the_claim_back_and_says_so(
    ann: User, monkeypatch: pytest.MonkeyPatch, effects: Callable[[], list[str]]
) -> None:
    run = suspended("held", owner=ann)
    monkeypatch.setattr(draining, "stopping", lambda: True)

    page = admin_approve(ann, run, follow=True)

    assert messages_of(page)[-1] == (
        f"This server is shutting down; run {run.run_id} continues once a server "
        "or worker picks it up."
    )
    continuation.join_handed_off()
    run.refresh_from_db()
    assert (run.status, run.lease_owner) == (RunStatus.SUSPENDED, "")
    assert effects() == []


def test_a_leg_handed_to_a_thread_is_known_to_the_shutdown_drain(
    ann: User, inside_tool: InsideTool
) -> None:
    run = ready_to_resume(ann)
    assert draining.running_legs() == 0

    services.enqueue_run(run.run_id)

    assert inside_tool.entered.wait(agents.GATE_TIMEOUT_SECONDS)
    assert draining.running_legs() == 1  # a SIGTERM would wait for it
    inside_tool.released.set()
    continuation.join_handed_off()
    assert draining.running_legs() == 0


async def test_a_sync_call_from_an_event_loop_hands_the_leg_to_that_loop(
    ann: User, inside_tool: InsideTool
) -> None:
    """As a sync view under daphne: its thread's loop is the server's, which runs the
    leg beside the readers that follow the run (no thread of its own)."""
    run = await sync_to_async(ready_to_resume)(ann)

    resumed = await services.aenqueue_run(run.run_id)

    assert resumed.handed_off is not None
    assert await asyncio.to_thread(
        inside_tool.entered.wait, agents.GATE_TIMEOUT_SECONDS
    )
    legs = [t.name for t in threading.enumerate() if t.name.startswith("deuz-leg-")]
    assert legs == []
    assert continuation.home_loop() is asyncio.get_running_loop()
    inside_tool.released.set()
    outcome = await asyncio.wrap_future(resumed.handed_off)
    assert outcome.status == RunStatus.COMPLETED
