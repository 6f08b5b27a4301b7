"""A failing store never loses a run, and never lets it run on with nothing durable: the
core logs the failed save and goes on (SPEC R6.2), but a Django leg stops right there —
its outcome and ``Run.last_error`` say why — and recovery continues the run from its last
saved boundary, catching the history up (issue #12, "failures are reported")."""

from __future__ import annotations

import io
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import OperationalError, connection

from deuz_django import services
from tests.django.run_support import PROMPT, stored_rows

pytestmark = pytest.mark.django_db

ROLES = ["system", "user", "assistant", "tool", "assistant"]


@contextmanager
def failing_checkpoint_write(which: int) -> Iterator[None]:
    """The database refuses the ``which``-th checkpoint write (1-based) of the run row."""
    seen = 0

    def refuse(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        nonlocal seen
        if 'UPDATE "deuz_django_run"' in sql and '"step_index"' in sql:
            seen += 1
            if seen == which:
                raise OperationalError("the database went away")
        return execute(sql, params, many, context)

    with connection.execute_wrapper(refuse):
        yield


def test_a_failed_save_mid_run_stops_the_leg_and_recovery_continues_it(
    effects: Callable[[], list[str]], caplog: pytest.LogCaptureFixture
) -> None:
    run = services.start_run(agent="scripted", messages=PROMPT)
    with (
        failing_checkpoint_write(1),
        caplog.at_level(logging.ERROR, logger="deuz_django"),
    ):
        outcome = services.resume_run(run.run_id)
    assert outcome.status == "running"
    assert outcome.error == "A checkpoint save failed: the database went away"
    assert f"checkpoint save failed for '{run.run_id}#1'" in caplog.text
    run.refresh_from_db()
    assert run.last_error == outcome.error  # the admin shows it
    assert run.recover_after is not None  # a failure recovery retries
    assert (run.step_index, run.lease_owner) == (0, "")
    assert effects() == ["echo:hi"]  # the leg stopped: no model call after the failure
    assert services.recoverable_runs(older_than=0) == [run.run_id]

    out = io.StringIO()
    call_command("deuz", "recover", "--older-than", "0", stdout=out)
    assert out.getvalue().strip() == f"recovered {run.run_id}: completed"
    run.refresh_from_db()
    assert (run.step_index, run.last_error, run.recover_after) == (2, "", None)
    assert stored_rows(run) == list(enumerate(ROLES))
    assert effects() == ["echo:hi"]  # the step journal kept the call's outcome


def test_a_failed_final_save_is_reported_and_caught_up_by_recovery(
    effects: Callable[[], list[str]],
) -> None:
    run = services.start_run(agent="scripted", messages=PROMPT)
    with failing_checkpoint_write(2):
        outcome = services.resume_run(run.run_id)
    assert (outcome.status, outcome.error) == (
        "running",
        "A checkpoint save failed: the database went away",
    )
    run.refresh_from_db()
    assert (run.status, run.step_index) == ("running", 1)  # the last boundary it kept
    assert stored_rows(run) == list(enumerate(ROLES[:4]))
    assert services.recoverable_runs(older_than=0) == [run.run_id]
    out = io.StringIO()
    call_command("deuz", "recover", "--older-than", "0", stdout=out)
    assert out.getvalue().strip() == f"recovered {run.run_id}: completed"
    run.refresh_from_db()
    assert stored_rows(run) == list(enumerate(ROLES))
    assert effects() == ["echo:hi"]  # the tool step was kept; only the answer re-ran


def test_a_resume_whose_save_failed_exits_with_the_error() -> None:
    run = services.start_run(agent="scripted", messages=PROMPT)
    with failing_checkpoint_write(2), pytest.raises(CommandError) as raised:
        call_command("deuz", "resume", run.run_id, stdout=io.StringIO())
    assert raised.value.returncode == 1
    assert "A checkpoint save failed: the database went away" in str(raised.value)


def test_a_database_gone_after_the_final_save_is_an_outcome_not_a_raw_error(
    effects: Callable[[], list[str]],
) -> None:
    """The connection drops after the run's last checkpoint: the leg still reports
    how it ended, with the error, instead of raising ``OperationalError``."""
    run = services.start_run(agent="scripted", messages=PROMPT)
    saved_completed = False
    refused = 0

    def drop_after_final_save(
        execute: Any, sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        nonlocal saved_completed, refused
        if saved_completed and sql.startswith("SELECT"):
            refused += 1
            raise OperationalError("server closed the connection unexpectedly")
        result = execute(sql, params, many, context)
        if 'UPDATE "deuz_django_run"' in sql and "completed" in (params or ()):
            saved_completed = True
        return result

    with connection.execute_wrapper(drop_after_final_save):
        outcome = services.resume_run(run.run_id)
    assert refused >= 1
    assert outcome.status == "unknown"
    assert outcome.error == (
        "The leg ended, but the database could not confirm it: "
        "server closed the connection unexpectedly"
    )
    run.refresh_from_db()
    assert run.status == "completed"  # the run itself is safe
    assert effects() == ["echo:hi"]
