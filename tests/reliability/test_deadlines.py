"""Deadlines with real processes and threads: several processes sweeping at once remind,
escalate and time out each call once and continue each run once; a process killed
between timing calls out and continuing the run leaves it to recovery; a database error
in a sweep is logged and the next sweep retries; a server's sweep continues the run on
its own event loop (deuz_django.deadlines.sweep)."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db import OperationalError

from deuz_django.approvals.verdicts import record_timeout
from deuz_django.deadlines import sweep as deadline_sweep
from deuz_django.models import Approval, Run
from deuz_django.runs import recovery
from tests.django.processes import MANAGE, WAIT_SECONDS, manage_env
from tests.django.run_support import (
    let_time_pass,
    stored_rows,
    suspended,
    tool_results,
)

pytestmark = pytest.mark.django_db(transaction=True)

SWEEPERS = 4
RUNS = 6
PAST_THE_DEADLINE = timedelta(hours=4, seconds=1)
ONE_HOUR_LATE = "Tool call denied. Reason: Timed out: nobody decided within 1 hour."


def sweep_in_processes(tmp_path: Path, count: int, *args: str) -> list[str]:
    """``count`` processes sweep once, all at the same moment; the signals they sent
    and the runs they continued, one line each."""
    gate, log = tmp_path / "gate", tmp_path / "signals.log"
    gate.unlink(missing_ok=True)
    env = manage_env(DEUZ_TEST_GATE=str(gate), DEUZ_TEST_SIGNALS=str(log))
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.reliability.deadline_child", *args],
            cwd=MANAGE.parent,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    gate.touch()
    for child in children:
        _out, err = child.communicate(timeout=WAIT_SECONDS)
        assert child.returncode in (0, -9), err
    lines = log.read_text().splitlines() if log.exists() else []
    log.unlink(missing_ok=True)
    return lines


def test_processes_sweeping_at_once_act_on_each_call_and_run_once(
    make_user: Callable[..., Any], tmp_path: Path, effects: Callable[[], list[str]]
) -> None:
    runs = [suspended("timed") for _ in range(RUNS)]
    for run in runs:
        let_time_pass(run, PAST_THE_DEADLINE)
    first = Counter(sweep_in_processes(tmp_path, SWEEPERS))
    expected = Counter()
    for run in runs:
        expected[f"reminder:{run.run_id}:r1"] = 1
        expected[f"escalated:{run.run_id}:r1"] = 1
        expected[f"decided:{run.run_id}:e1"] = 1
    assert first == expected  # each exactly once, whoever sent it

    for run in runs:
        let_time_pass(run, PAST_THE_DEADLINE)
    second = Counter(sweep_in_processes(tmp_path, SWEEPERS))
    assert second == Counter(
        [f"decided:{r.run_id}:r1" for r in runs]
        + [f"continued:{r.run_id}:" for r in runs]
    )
    for run in runs:
        run.refresh_from_db()
        assert (run.status, run.lease_owner) == ("completed", "")
        assert [role for _, role in stored_rows(run)] == [
            "user",
            "assistant",
            "tool",
            "assistant",
        ]
        assert tool_results(run)["e1"] == (ONE_HOUR_LATE, True)
    assert effects() == []  # no timed-out call ran


def test_a_process_killed_between_timing_out_and_continuing_leaves_it_to_recovery(
    tmp_path: Path,
) -> None:
    run = suspended("timed_nested")
    let_time_pass(run, timedelta(minutes=11))
    lines = sweep_in_processes(tmp_path, 1, "--die")
    assert lines == [f"decided:{run.run_id}:x1"]
    run.refresh_from_db()
    assert run.status == "suspended"
    assert Approval.objects.get(run=run).status == "expired"
    assert deadline_sweep.sweep().continued == []  # nothing is due any more
    Run.objects.filter(pk=run.pk).update(lease_owner="", lease_expires_at=None)
    assert recovery.sweep().continued == [run.run_id]
    run.refresh_from_db()
    assert run.status == "completed"
    child = Run.objects.get(parent=run)
    assert tool_results(child)["x1"][1] is True


def test_a_database_error_in_the_sweep_is_logged_and_the_next_sweep_retries(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    run = suspended("timed_nested")
    let_time_pass(run, timedelta(minutes=11))
    failures = [OperationalError("the database went away")]

    def flaky(*args: Any, **kwargs: Any) -> Any:
        if failures:
            raise failures.pop()
        return record_timeout(*args, **kwargs)

    monkeypatch.setattr(deadline_sweep, "record_timeout", flaky)
    sweeper = recovery.Sweeper(interval=60)
    with caplog.at_level(logging.INFO, logger="deuz_django"):
        sweeper.sweep_once()
        assert "the deadlines sweep failed; it runs again later" in caplog.text
        assert Approval.objects.get(run=run).is_pending
        sweeper.sweep_once()
    assert Approval.objects.get(run=run).status == "expired"
    run.refresh_from_db()
    assert run.status == "completed"
    assert f"the deadlines sweep: {{'timedOut': ['{run.run_id}:x1']" in caplog.text


def test_a_failing_sweep_does_not_keep_the_others_from_running(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> Any:
        raise OperationalError("the database went away")

    monkeypatch.setattr(
        recovery,
        "SWEEPS",
        (recovery.Sweep("broken", broken, broken), *recovery.SWEEPS),  # type: ignore[arg-type]
    )
    run = suspended("timed_nested")
    let_time_pass(run, timedelta(minutes=11))
    with caplog.at_level(logging.ERROR, logger="deuz_django"):
        recovery.Sweeper(interval=60).sweep_once()
    assert "the broken sweep failed" in caplog.text
    assert Approval.objects.get(run=run).status == "expired"


def test_a_servers_sweep_continues_the_run_on_its_own_loop() -> None:
    run = suspended("timed_nested")
    let_time_pass(run, timedelta(minutes=11))

    async def on_this_loop() -> deadline_sweep.DeadlineReport:
        from deuz_django.runs.continuing import _running

        report = await deadline_sweep.asweep()
        legs = list(_running.values())
        await asyncio.gather(*legs)
        assert len(legs) == 1
        return report

    assert async_to_sync(on_this_loop)().continued == [run.run_id]
    run.refresh_from_db()
    assert run.status == "completed"
