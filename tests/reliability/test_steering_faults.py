"""Steering against real processes: input a leg took and died with is delivered once by
the next leg; input sent while a tool runs in another process comes after that tool's
result, the tool running once; input queued while a run waits is delivered when another
process resumes it; an interrupt crosses processes to cut a model turn short.

Legs run in ``manage.py deuz resume`` subprocesses on the test's own database, with a
one-second lease they renew while alive (``DEUZ_LEASE_SECONDS``).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from deuz_django import services
from deuz_django.core.durable.inputs import carried_inputs
from deuz_django.models import Run, RunInput, StreamJournalEntry
from deuz_django.storage.store import DjangoSessionStore
from tests.django.processes import run_manage, start_manage, wait_until
from tests.django.run_support import PROMPT, approval

pytestmark = pytest.mark.django_db(transaction=True)

REDIS_URL = os.environ.get("DEUZ_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


@pytest.fixture
def ann(make_user: Callable[..., Any]) -> Any:
    return make_user("ann")


def history(run_id: str) -> list[tuple[str, str]]:
    checkpoint = DjangoSessionStore().load(run_id)
    assert checkpoint is not None
    return [(m.role, m.text) for m in checkpoint.messages]


def carried(run_id: str) -> list[int]:
    """The seqs of the inputs the run's history holds, in history order (repeats kept)."""
    checkpoint = DjangoSessionStore().load(run_id)
    assert checkpoint is not None
    return [seq for message in checkpoint.messages for seq in carried_inputs([message])]


def journaled(run_id: str, part_type: str) -> int:
    """How many parts of that type the run's stream journal holds."""
    return StreamJournalEntry.objects.filter(
        run__run_id=run_id, part__contains=f'"type":"{part_type}"'
    ).count()


def lease_lapsed(run_id: str) -> bool:
    run = Run.objects.get(run_id=run_id)
    return run.lease_expires_at is None or run.lease_expires_at < timezone.now()


def test_input_taken_by_a_leg_killed_before_its_checkpoint_is_delivered_once(
    ann: Any,
) -> None:
    run_id = services.start_run(agent="echoer", messages=PROMPT, owner=ann).run_id
    services.send_input(run_id, "Use EUR.", user=ann)
    leg = start_manage(
        "deuz",
        "resume",
        run_id,
        DEUZ_LEASE_SECONDS="1",
        DEUZ_TEST_CHUNK_SECONDS="1",  # an answer that takes seconds: killed inside it
    )
    try:
        wait_until(
            lambda: (
                journaled(run_id, "data-input-delivered")
                and journaled(run_id, "text-delta")
            ),
            "the leg to take the input and start answering it",
        )
    finally:
        leg.kill()
        leg.communicate()
    assert leg.returncode == -signal.SIGKILL
    row = RunInput.objects.get()
    assert row.delivered_at_step is None  # taken, never checkpointed: still queued
    assert history(run_id) == [("user", PROMPT[0]["content"])]

    wait_until(lambda: lease_lapsed(run_id), "the dead leg's lease to lapse")
    assert services.resume_run(run_id).status == "completed"
    assert history(run_id) == [
        ("user", PROMPT[0]["content"]),
        ("user", "Use EUR."),
        ("assistant", "You said: Use EUR."),
    ]
    assert carried(run_id) == [1]
    row.refresh_from_db()
    assert row.delivered_at_step == 0
    assert journaled(run_id, "data-input-delivered") == 2  # the re-run step's too


def test_input_during_a_tool_in_another_process_comes_after_it_and_it_runs_once(
    ann: Any, effects: Callable[[], list[str]], gate: Path
) -> None:
    run_id = services.start_run(
        agent="pauser_interrupt", messages=PROMPT, owner=ann
    ).run_id
    leg = start_manage("deuz", "resume", run_id, REDIS_URL=REDIS_URL)
    try:
        wait_until(lambda: "pause:once:start" in effects(), "the tool to start")
        sent = run_manage(
            "deuz", "input", run_id, "Oslo too.", "--as", "ann", REDIS_URL=REDIS_URL
        )
        assert sent.returncode == 0, sent.stderr
        gate.touch()
        _out, err = leg.communicate(timeout=60)
    finally:
        if leg.poll() is None:
            leg.kill()
            leg.communicate()
    assert leg.returncode == 0, err
    assert effects() == ["pause:once:start", "pause:once:end"]  # not cancelled, once
    assert history(run_id)[1:] == [
        ("assistant", ""),
        ("tool", ""),
        ("user", "Oslo too."),
        ("assistant", "You said: Oslo too."),
    ]
    assert RunInput.objects.get().delivered_at_step == 1


def test_input_queued_while_a_run_waits_is_delivered_when_another_process_resumes_it(
    ann: Any,
) -> None:
    run = services.start_run(agent="emailer", messages=PROMPT, owner=ann)
    assert services.resume_run(run.run_id).status == "suspended"
    sent = run_manage("deuz", "input", run.run_id, "Copy Bob.", "--as", "ann")
    assert sent.returncode == 0, sent.stderr
    run.refresh_from_db()
    assert run.status == "suspended"  # input never resumes a run by itself
    assert approval(run, "send_email").status == "pending"
    resumed = run_manage("deuz", "resume", run.run_id, "--approve", "e1", "--as", "ann")
    assert resumed.returncode == 0, resumed.stderr
    assert history(run.run_id)[-4:] == [
        ("assistant", ""),
        ("tool", ""),
        ("user", "Copy Bob."),
        ("assistant", "You said: Copy Bob."),
    ]
    assert carried(run.run_id) == [1]


def test_an_interrupt_from_another_process_cuts_the_model_turn_short(
    ann: Any,
) -> None:
    run_id = services.start_run(
        agent="echoer_interrupt", messages=PROMPT, owner=ann
    ).run_id
    leg = start_manage(
        "deuz", "resume", run_id, REDIS_URL=REDIS_URL, DEUZ_TEST_CHUNK_SECONDS="0.5"
    )
    try:
        wait_until(lambda: journaled(run_id, "text-delta"), "the answer to start")
        sent = run_manage(
            "deuz", "input", run_id, "Stop.", "--as", "ann", REDIS_URL=REDIS_URL
        )
        assert sent.returncode == 0, sent.stderr
        _out, err = leg.communicate(timeout=60)
    finally:
        if leg.poll() is None:
            leg.kill()
            leg.communicate()
    assert leg.returncode == 0, err
    assert history(run_id) == [
        ("user", PROMPT[0]["content"]),
        ("user", "Stop."),
        ("assistant", "You said: Stop."),
    ]
    assert journaled(run_id, "step-start") == 2  # step 0, discarded and started over
