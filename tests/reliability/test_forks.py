"""A fork is whole or absent: a process killed inside a fork's transaction leaves no row
of it (and the same fork succeeds afterwards); two forks of one run at once make two
whole runs (issue #30)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, connections
from django.db.models import Q

from deuz_django import services
from deuz_django.core.durable import child_run_id
from deuz_django.models import Run, RunMessage, RunStep
from deuz_django.runs.continuing import join_handed_off
from deuz_django.storage import forking
from tests.django.processes import manage_env, wait_until
from tests.django.run_support import PROMPT

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]


def nested_parent() -> Run:
    """A ``nested`` run suspended on its sub-agent's gated call: its fork writes two
    runs (the fork and its sub-agent's)."""
    run = services.start_run(agent="nested", messages=PROMPT)
    assert services.resume_run(run.run_id).status == "suspended"
    return run


def rows_of(run_id: str) -> int:
    """Every row a fork ``run_id`` writes: its runs, their history and journal."""
    tree = Q(run_id=run_id) | Q(run_id__startswith=f"{run_id}::")
    runs = Run.objects.filter(tree)
    return (
        runs.count()
        + RunMessage.objects.filter(run__in=runs).count()
        + RunStep.objects.filter(run__in=runs).count()
    )


def test_a_fork_killed_inside_its_transaction_leaves_nothing_and_forks_again(
    effects: Callable[[], list[str]],
) -> None:
    parent = nested_parent()
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.reliability.fork_child",
            parent.run_id,
            "0",
            "f1",
        ],
        cwd=ROOT,
        env=manage_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_until(lambda: "forking:f1" in effects(), "the fork's rows to be written")
        assert rows_of("f1") == 0  # not committed: nobody else sees them
    finally:
        os.kill(child.pid, signal.SIGKILL)
        output, _ = child.communicate()
    assert child.returncode == -signal.SIGKILL, output
    assert rows_of("f1") == 0
    fork = services.fork_run(
        parent.run_id, step=0, operator="ops", with_turn=True, fork_run_id="f1"
    )
    join_handed_off(timeout=60)
    assert Run.objects.filter(run_id=child_run_id("f1", "researcher", "p1")).exists()
    fork.refresh_from_db()
    assert fork.status == "suspended"  # asking again for the sub-agent's email


def test_two_forks_of_one_run_at_once_make_two_whole_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first fork holds its transaction open (the parent's row locked) until the
    second is waiting for that lock on PostgreSQL (on SQLite: for the database)."""
    parent = nested_parent()
    written, release = threading.Event(), threading.Event()
    write_steps = forking._write_steps

    def write_then_hold(run: Any, steps: Any) -> None:
        write_steps(run, steps)
        if run.run_id == "first":
            written.set()
            assert release.wait(60)

    monkeypatch.setattr(forking, "_write_steps", write_then_hold)
    errors: list[BaseException] = []

    def fork(fork_id: str) -> None:
        try:
            services.fork_run(
                parent.run_id,
                step=0,
                operator="ops",
                with_turn=True,
                fork_run_id=fork_id,
            )
        except BaseException as error:
            errors.append(error)
        finally:
            connections.close_all()

    first = threading.Thread(target=fork, args=("first",))
    second = threading.Thread(target=fork, args=("second",))
    first.start()
    assert written.wait(60)
    second.start()
    if connection.vendor == "postgresql":
        wait_until(waiting_for_a_lock, "the second fork to wait for the first")
    release.set()
    first.join(60)
    second.join(60)
    join_handed_off(timeout=60)
    assert errors == []
    for fork_id in ("first", "second"):
        assert Run.objects.get(run_id=fork_id).forked_from == parent
        assert Run.objects.filter(
            run_id=child_run_id(fork_id, "researcher", "p1")
        ).exists()
    assert rows_of("first") == rows_of("second") > 2


def waiting_for_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock'"
        )
        return bool(cursor.fetchone()[0])
