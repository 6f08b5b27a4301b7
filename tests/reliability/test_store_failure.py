"""A failing store never kills a run: the failed save is logged, the run goes on, and a
later save — of the same leg or of a recovering one — catches the history up (SPEC R6.2)."""

from __future__ import annotations

import io
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.core.management import call_command
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
        if sql.startswith('UPDATE "deuz_django_run"') and '"step_index"' in sql:
            seen += 1
            if seen == which:
                raise OperationalError("the database went away")
        return execute(sql, params, many, context)

    with connection.execute_wrapper(refuse):
        yield


def test_a_failed_save_mid_run_is_logged_and_the_next_save_catches_up(
    effects: Callable[[], list[str]], caplog: pytest.LogCaptureFixture
) -> None:
    run = services.start_run(agent="scripted", messages=PROMPT)
    with (
        failing_checkpoint_write(1),
        caplog.at_level(logging.ERROR, logger="deuz_django"),
    ):
        outcome = services.resume_run(run.run_id)
    assert (outcome.status, outcome.error) == ("completed", None)
    assert f"checkpoint save failed for '{run.run_id}#1'" in caplog.text
    assert "the database went away" in caplog.text
    run.refresh_from_db()
    assert run.step_index == 2
    assert stored_rows(run) == list(enumerate(ROLES))
    assert effects() == ["echo:hi"]


def test_a_failed_final_save_is_caught_up_by_recovery_without_repeating_a_step(
    effects: Callable[[], list[str]],
) -> None:
    run = services.start_run(agent="scripted", messages=PROMPT)
    with failing_checkpoint_write(2):
        services.resume_run(run.run_id)
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
