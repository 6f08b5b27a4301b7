"""Steering through the run service: who may send input, what each policy does, and
where the input lands in the run's history — after a tool's result, after a verdict,
at once when the agent interrupts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from deuz_django import services
from deuz_django.core import StepStartPart, StreamPart, TextDeltaPart
from deuz_django.exceptions import (
    InputRejected,
    NotPermitted,
    RunNotFound,
    RunNotSteerable,
)
from deuz_django.models import Run, RunInput
from deuz_django.storage import leases
from deuz_django.storage.store import DjangoSessionStore
from deuz_django.streaming import live
from tests.django.run_support import PROMPT, approval
from tests.django.steering_agents import PAUSE_HOOKS

pytestmark = pytest.mark.django_db(transaction=True)


def history(run_id: str) -> list[tuple[str, str]]:
    checkpoint = DjangoSessionStore().load(run_id)
    assert checkpoint is not None
    return [(m.role, m.text) for m in checkpoint.messages]


def started(agent: str, owner: Any) -> Run:
    return services.start_run(agent=agent, messages=PROMPT, owner=owner)


@pytest.fixture
def pause_hooks() -> Iterator[list[Any]]:
    yield PAUSE_HOOKS
    PAUSE_HOOKS.clear()


def test_a_run_gets_its_queued_input_at_its_next_boundary(make_user: Any) -> None:
    ann = make_user("ann")
    run = started("echoer", ann)
    queued = services.send_input(run.run_id, "Only order A-1.", user=ann)
    assert (queued.seq, queued.delivered) == (1, False)
    assert services.resume_run(run.run_id).status == "completed"
    assert history(run.run_id)[1:] == [
        ("user", "Only order A-1."),
        ("assistant", "You said: Only order A-1."),
    ]
    row = RunInput.objects.get()
    assert (row.delivered_at_step, row.sent_by, row.input_id) == (
        0,
        ann,
        queued.input_id,
    )


def test_input_sent_during_a_tool_comes_after_its_result(
    make_user: Any, pause_hooks: list[Any]
) -> None:
    ann = make_user("ann")
    run = started("pauser_interrupt", ann)
    pause_hooks.append(
        lambda: services.send_input(run.run_id, "Use the EU warehouse.", user=ann)
    )
    assert services.resume_run(run.run_id).status == "completed"
    assert history(run.run_id)[1:] == [
        ("assistant", ""),
        ("tool", ""),
        ("user", "Use the EU warehouse."),
        ("assistant", "You said: Use the EU warehouse."),
    ]


def test_input_for_a_suspended_run_waits_for_the_verdict(make_user: Any) -> None:
    ann = make_user("ann")
    run = started("emailer", ann)
    assert services.resume_run(run.run_id).status == "suspended"
    services.send_input(run.run_id, "Copy Bob too.", user=ann)
    run.refresh_from_db()
    assert (run.status, run.lease_owner, run.legs) == ("suspended", "", 1)
    services.decide_approval(approval(run, "send_email"), user=ann, approved=True)
    assert services.resume_run(run.run_id).status == "completed"
    assert history(run.run_id)[-4:] == [
        ("assistant", ""),
        ("tool", ""),
        ("user", "Copy Bob too."),
        ("assistant", "You said: Copy Bob too."),
    ]


def test_the_same_input_id_twice_is_one_input(make_user: Any) -> None:
    ann = make_user("ann")
    run = started("echoer", ann)
    first = services.send_input(run.run_id, "Once.", user=ann, input_id="c-1")
    again = services.send_input(run.run_id, "Once.", user=ann, input_id="c-1")
    assert again == first
    assert RunInput.objects.count() == 1


def test_only_who_may_resume_a_run_may_steer_it(make_user: Any) -> None:
    ann = make_user("ann")
    run = started("echoer", ann)
    with pytest.raises(RunNotFound):
        services.send_input(run.run_id, "Hi.", user=make_user("eve"))
    viewer = make_user("viewer", "deuz_django.view_run", staff=True)
    with pytest.raises(NotPermitted):
        services.send_input(run.run_id, "Hi.", user=viewer)
    with pytest.raises(NotPermitted):
        services.send_input(run.run_id, "Hi.", user=None)
    boss = make_user("boss", "deuz_django.view_run", "deuz_django.resume_run")
    assert services.send_input(run.run_id, "Hi.", user=boss).seq == 1
    assert services.send_input(run.run_id, "Hi.", operator="ops").seq == 2
    assert [r.sender for r in RunInput.objects.all()] == ["boss", "ops (operator)"]


def test_a_finished_run_refuses_input_and_says_what_to_do(make_user: Any) -> None:
    ann = make_user("ann")
    done = started("echoer", ann)
    services.resume_run(done.run_id)
    with pytest.raises(RunNotSteerable, match="has completed; start a new one or fork"):
        services.send_input(done.run_id, "More?", user=ann)
    stopped = started("echoer", ann)
    services.stop_run(stopped.run_id, user=ann)
    with pytest.raises(RunNotSteerable, match="was stopped; start a new one or fork"):
        services.send_input(stopped.run_id, "More?", user=ann)
    assert not RunInput.objects.exists()


def test_a_rejecting_agent_refuses_input_while_a_leg_holds_the_run(
    make_user: Any,
) -> None:
    ann = make_user("ann")
    run = started("echoer_reject", ann)
    lease = leases.acquire(run.run_id)
    with pytest.raises(InputRejected) as refused:
        services.send_input(run.run_id, "Now!", user=ann)
    assert refused.value.code == "input_rejected"
    leases.release(lease)
    assert services.send_input(run.run_id, "Now?", user=ann).seq == 1
    waiting = started("emailer_reject", ann)
    assert services.resume_run(waiting.run_id).status == "suspended"
    assert services.send_input(waiting.run_id, "While you wait.", user=ann).seq == 1


def test_an_interrupting_agent_interrupts_the_leg_of_a_running_run(
    make_user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    interrupted: list[str] = []

    async def record(run_id: str) -> None:
        interrupted.append(run_id)

    monkeypatch.setattr(live, "interrupt", record)
    ann = make_user("ann")
    queueing = started("echoer", ann)
    services.send_input(queueing.run_id, "Hi.", user=ann)
    waiting = started("emailer", ann)  # not interrupting: its agent queues
    interrupting = started("echoer_interrupt", ann)
    services.send_input(interrupting.run_id, "Hi.", user=ann)
    assert interrupted == [interrupting.run_id]
    assert waiting.status == "running"


async def test_an_interrupt_discards_the_answer_in_progress(
    make_user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEUZ_TEST_CHUNK_SECONDS", "0.05")
    ann = await sync_to_async(make_user)("ann")
    run = await sync_to_async(started)("echoer_interrupt", ann)
    seen: list[StreamPart] = []

    async def observe(part: StreamPart) -> None:
        seen.append(part)
        if part == TextDeltaPart("You") and seen.count(part) == 1:
            await services.asend_input(run.run_id, "Stop: EUR.", user=ann)

    outcome = await services.aresume_run(run.run_id, observer=observe)
    assert outcome.status == "completed"
    assert await sync_to_async(history)(run.run_id) == [
        ("user", PROMPT[0]["content"]),
        ("user", "Stop: EUR."),
        ("assistant", "You said: Stop: EUR."),
    ]
    texts = "".join(p.text for p in seen if isinstance(p, TextDeltaPart))
    assert texts.startswith("You")  # the discarded answer streamed its first words
    assert texts.endswith("You said: Stop: EUR.")
    starts = [p for p in seen if isinstance(p, StepStartPart)]
    assert starts == [StepStartPart(0), StepStartPart(0)]  # the step started over
