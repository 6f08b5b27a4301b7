"""Exactly one resumer: 20 concurrent resumes of one suspended run, from threads and from
separate processes, run one leg; the other 19 are told the run is busy (DESIGN §7).

The winning leg holds the run inside the ``hold`` tool until the test opens the gate, and
the test opens it only after all 19 others have answered — so every loser really raced a
live leg, whatever order the scheduler picked. On SQLite, which serializes writers, the
same must hold.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.db import connections

from deuz_django import services
from deuz_django.exceptions import RunBusy
from deuz_django.models import Run
from tests.django.processes import start_manage, wait_until
from tests.django.run_support import ready_to_resume, stored_rows

pytestmark = pytest.mark.django_db(transaction=True)

RESUMERS = 20


def assert_one_leg_completed(run: Run, effects: Callable[[], list[str]]) -> None:
    assert effects() == ["hold:once"]  # the side effect happened exactly once
    run.refresh_from_db()
    assert (run.status, run.lease_owner) == ("completed", "")
    assert stored_rows(run) == list(
        enumerate(["user", "assistant", "tool", "assistant"])
    )


def test_twenty_threads_resuming_one_run_run_exactly_one_leg(
    make_user: Callable[..., Any], effects: Callable[[], list[str]], gate: Path
) -> None:
    run = ready_to_resume(make_user("ann"))
    start = threading.Barrier(RESUMERS)
    results: list[str] = []

    def resume() -> None:
        try:
            start.wait()
            outcome = services.resume_run(run.run_id)
            results.append(f"leg:{outcome.status}")
        except RunBusy:
            results.append("busy")
        except Exception as error:  # reported by the assertion below
            results.append(f"error:{error!r}")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=resume) for _ in range(RESUMERS)]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: len(results) >= RESUMERS - 1, "19 resumes to answer")
    finally:
        gate.touch()
        for thread in threads:
            thread.join()
    assert sorted(results) == ["busy"] * (RESUMERS - 1) + ["leg:completed"]
    assert_one_leg_completed(run, effects)


def test_twenty_processes_resuming_one_run_run_exactly_one_leg(
    make_user: Callable[..., Any], effects: Callable[[], list[str]], gate: Path
) -> None:
    run = ready_to_resume(make_user("ann"))
    processes = [
        start_manage("deuz", "--skip-checks", "resume", run.run_id)
        for _ in range(RESUMERS)
    ]
    try:
        wait_until(
            lambda: sum(p.poll() is not None for p in processes) >= RESUMERS - 1,
            "19 resume processes to exit",
        )
    finally:
        gate.touch()
    answers = sorted(
        (p.wait(), *(s.strip() for s in p.communicate())) for p in processes
    )
    busy = f"CommandError: Run '{run.run_id}' is busy"
    assert [code for code, _, _ in answers] == [0] + [1] * (RESUMERS - 1)
    assert answers[0][1] == f"Run {run.run_id}: completed"
    assert all(err.startswith(busy) for _, _, err in answers[1:]), answers
    assert_one_leg_completed(run, effects)
