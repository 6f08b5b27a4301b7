"""Runs heal without an operator: the recovery sweep continues runs a dead process left
behind, backs off between attempts and gives up (marking the run failed) after
``RECOVERY_MAX_ATTEMPTS``; it closes journals a dead process left open; and a real tasks
worker does all that by itself, with no ``deuz recover`` (issue #12, item 6)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.apps import apps
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import OperationalError
from django.test import AsyncClient, override_settings
from django.utils import timezone

from deuz_django import services
from deuz_django.approvals.verdicts import Verdict, record_verdict
from deuz_django.asgi import get_asgi_application
from deuz_django.core import journal as core_journal
from deuz_django.core.journal import DONE, is_done
from deuz_django.models import Approval, Run
from deuz_django.runs import recovery
from deuz_django.storage.store import DjangoSessionStore
from deuz_django.storage.stream_journal import DatabaseJournal, get_journal
from tests.django.agents import slow_agent_steps
from tests.django.processes import MANAGE, manage_env, start_manage, wait_until
from tests.django.run_support import PROMPT
from tests.django.streaming.test_sse import frames, read_body
from tests.reliability.conftest import Children

pytestmark = pytest.mark.django_db(transaction=True)


def abandon(run: Run, **fields: Any) -> None:
    """As a process that died mid-leg leaves a run: a lapsed lease, idle for a while."""
    long_ago = timezone.now() - timedelta(minutes=5)
    Run.objects.filter(pk=run.pk).update(
        lease_owner="dead-host:1:0",
        lease_expires_at=long_ago,
        updated_at=long_ago,
        **fields,
    )


def test_the_sweep_continues_an_abandoned_run_and_a_clean_leg_resets_its_attempts(
    effects: Callable[[], list[str]],
) -> None:
    run = services.start_run(agent="scripted", messages=PROMPT)
    abandon(run)
    report = recovery.sweep()
    assert report.continued == [run.run_id]
    run.refresh_from_db()
    assert (run.status, run.lease_owner) == ("completed", "")
    assert (run.recovery_attempts, run.recover_after) == (0, None)
    assert effects() == ["echo:hi"]


def test_a_run_claimed_by_its_starter_is_not_swept() -> None:
    """Idle for less than a lease length with no lease: its first leg is on its way."""
    run = services.start_run(agent="scripted", messages=PROMPT)
    assert recovery.sweep().continued == []
    run.refresh_from_db()
    assert (run.status, run.recovery_attempts) == ("running", 0)


@override_settings(
    DEUZ={**__import__("django.conf").conf.settings.DEUZ, "RECOVERY_MAX_ATTEMPTS": 3}
)
def test_attempts_back_off_and_the_run_is_marked_failed_after_the_last(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = services.start_run(agent="scripted", messages=PROMPT)
    lost: list[str] = []
    # Each recovered leg is lost (its worker dies before it runs): the lease lapses.
    monkeypatch.setattr(
        recovery, "enqueue_claimed_leg", lambda lease: lost.append(lease.run_id)
    )
    waits = []
    for attempt in (1, 2, 3):
        abandon(run)
        Run.objects.filter(pk=run.pk).update(recover_after=None)
        before = timezone.now()
        assert recovery.sweep().continued == [run.run_id]
        run.refresh_from_db()
        assert run.recovery_attempts == attempt
        assert run.recover_after is not None
        waits.append(round((run.recover_after - before).total_seconds()))
        abandon(run)  # not due yet: the backoff holds it back
        assert recovery.sweep().continued == []
    assert waits == [5, 10, 20]  # RECOVERY_BACKOFF doubling
    assert lost == [run.run_id] * 3

    abandon(run, recover_after=timezone.now() - timedelta(seconds=1))
    report = recovery.sweep()
    assert (report.continued, report.failed) == ([], [run.run_id])
    run.refresh_from_db()
    assert run.last_error == (
        "Recovery gave up after 3 attempts: its process stopped mid-leg each time"
    )
    assert (run.status, run.lease_owner, run.recover_after) == ("running", "", None)
    abandon(run)
    assert services.recoverable_runs(0) == []  # failed: left for an explicit resume


def test_a_boundary_reached_starts_the_attempt_count_afresh() -> None:
    """A run killed again and again while it still makes progress (deploy after deploy)
    is never given up on: only attempts since its last saved checkpoint count."""
    run = services.start_run(agent="scripted", messages=PROMPT)
    later = timezone.now() + timedelta(minutes=5)
    Run.objects.filter(pk=run.pk).update(recovery_attempts=4, recover_after=later)
    store = DjangoSessionStore()
    store.save(store.load(run.run_id))  # what a leg does at its next boundary
    run.refresh_from_db()
    assert (run.recovery_attempts, run.recover_after) == (0, None)


def test_a_journal_left_open_by_a_dead_process_is_closed_for_its_readers() -> None:
    run = services.start_run(agent="scripted", messages=PROMPT)
    services.resume_run(run.run_id)
    journal = get_journal()
    last = async_to_sync(journal.last_seq)(run.run_id)
    assert last is not None
    # The process died after the final checkpoint, before journaling the leg's end.
    async_to_sync(journal.delete)(run.run_id)
    async_to_sync(journal.append)(
        run.run_id, [(0, json.dumps({"type": "text-delta", "text": "All done."}))]
    )
    abandon(run, journal_open=True)
    Run.objects.filter(pk=run.pk).update(lease_owner="", lease_expires_at=None)

    report = recovery.sweep()
    assert report.journals_closed == [run.run_id]
    records = async_to_sync(journal.read)(run.run_id, -1, 100)
    assert [json.loads(data)["type"] for _seq, data in records] == [
        "text-delta",
        "done",
    ]
    run.refresh_from_db()
    assert (run.journal_open, run.lease_owner) == (False, "")
    assert recovery.sweep().journals_closed == []  # once


def test_a_leg_whose_end_the_journal_could_not_store_leaves_its_journal_to_the_sweep(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The database fails as the leg ends: the run stays marked ``journal_open`` (a
    close that gave up once marked it closed, and its readers never got ``done``), and
    the sweep journals the end once the database is back."""
    monkeypatch.setattr(core_journal, "RETRY_SECONDS", 0.001)
    append_many = DatabaseJournal._append_many

    def down_at_the_end(self: DatabaseJournal, batches: list[Any]) -> Any:
        if any(is_done(data) for _, records, _ in batches for _, data in records):
            raise OperationalError("the database went away")
        return append_many(self, batches)

    monkeypatch.setattr(DatabaseJournal, "_append_many", down_at_the_end)
    run = services.start_run(agent="scripted", messages=PROMPT)
    services.resume_run(run.run_id)
    run.refresh_from_db()
    assert (run.status, run.journal_open, run.lease_owner) == ("completed", True, "")

    monkeypatch.setattr(DatabaseJournal, "_append_many", append_many)
    abandon(run)
    Run.objects.filter(pk=run.pk).update(lease_owner="", lease_expires_at=None)
    assert recovery.sweep().journals_closed == [run.run_id]
    journal = get_journal()
    last = async_to_sync(journal.last_seq)(run.run_id)
    assert last is not None
    assert async_to_sync(journal.read)(run.run_id, last - 1, 1) == [(last, DONE)]
    run.refresh_from_db()
    assert not run.journal_open


async def test_a_leg_killed_after_its_final_checkpoint_ends_its_sse_followers_stream(
    children: Children, make_user: Callable[..., Any]
) -> None:
    """The leg's process SIGKILLs itself right after saving the run's final checkpoint,
    before journaling the leg's end: the run is completed and its journal open. An SSE
    follower of it gets ``[DONE]`` once the sweep of a worker-like process (no event
    loop of its own: it closes journals through ``async_to_sync``) closes the journal."""
    owner = await sync_to_async(make_user)("ann")
    run = await services.astart_run(  # ``crashy`` knows its run by its prompt
        agent="crashy",
        messages=[{"role": "user", "content": "final"}],
        run_id="final",
        owner=owner,
    )
    leg = children(["final"], DEUZ_LEASE_SECONDS="1", DEUZ_TEST_KILL_AFTER_FINAL="1")
    assert await asyncio.to_thread(leg.wait, 60) == -signal.SIGKILL
    run = await Run.objects.aget(pk=run.pk)
    assert (run.status, run.journal_open) == ("completed", True)
    journal = get_journal()
    last = await journal.last_seq("final")
    assert last is not None
    assert not is_done((await journal.read("final", last - 1, 1))[0][1])

    client = AsyncClient()
    await client.aforce_login(owner)
    response = await client.get("/api/deuz/runs/final/stream")
    follower = asyncio.ensure_future(read_body(response))
    await asyncio.sleep(0.5)  # the follower waits on the open journal
    assert not follower.done()
    children(
        [],
        DEUZ_LEASE_SECONDS="1",
        DEUZ_RECOVERY_SWEEPER="1",
        DEUZ_RECOVERY_INTERVAL="0.2",
    )
    body = await asyncio.wait_for(follower, 60)  # a guard, not a timing
    got = frames(body)
    assert got[-1][1] == "[DONE]"
    assert [seq for seq, _ in got] == list(range(len(got)))
    assert not (await Run.objects.aget(pk=run.pk)).journal_open


def test_a_finished_leg_leaves_no_journal_open(
    effects: Callable[[], list[str]],
) -> None:
    run = services.start_run(agent="scripted", messages=PROMPT)
    services.resume_run(run.run_id)
    run.refresh_from_db()
    assert (run.status, run.journal_open) == ("completed", False)


def test_a_killed_leg_is_recovered_by_a_worker_with_no_operator(
    effects: Callable[[], list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real ``db_worker`` process sweeps at start and every half second, and runs the
    leg its sweep queued; the run a SIGKILLed leg left behind completes with no
    ``deuz recover``."""
    run = services.start_run(agent="slow", messages=PROMPT)
    leg = start_manage(
        "deuz",
        "resume",
        run.run_id,
        DEUZ_LEASE_SECONDS="1",
        DEUZ_TEST_SLOW_STEP="2",
        DEUZ_TEST_SLOW_SECONDS="60",
    )
    try:
        wait_until(lambda: "slow:2:start" in effects(), "the leg to enter step 2")
    finally:
        os.kill(leg.pid, signal.SIGKILL)
        leg.communicate()
    monkeypatch.delenv("DEUZ_TEST_SLOW_SECONDS", raising=False)
    worker = start_manage(
        "db_worker",
        "--no-reload",
        "--no-startup-delay",
        "--interval",
        "0.1",
        DEUZ_TASKS="db",  # the sweep queues the leg; this worker runs it
        DEUZ_LEASE_SECONDS="1",
        DEUZ_RECOVERY_SWEEPER="1",
        DEUZ_RECOVERY_INTERVAL="0.5",
    )
    try:
        # The killed call left no outcome and ``slow`` is not idempotent: recovery
        # never re-runs it silently — the run asks a person.
        in_doubt = wait_until(
            lambda: Approval.objects.filter(
                run=run, status="pending", kind="outcome_unknown"
            ).first(),
            "the worker to recover the run up to the in-doubt call",
        )
        assert in_doubt.tool_call_id == "s2"
        assert effects().count("slow:2:start") == 1
        # "Run it again": the worker's sweep continues the decided run by itself.
        record_verdict(in_doubt, None, Verdict(approved=True), operator="test")
        wait_until(
            lambda: Run.objects.filter(run_id=run.run_id, status="completed").exists(),
            "the worker to continue the decided run",
        )
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.communicate(timeout=20)
        except Exception:
            worker.kill()
            worker.communicate()
    log = effects()
    assert log.count("slow:1:end") == 1  # a completed step is never repeated
    assert log.count("slow:2:start") == 2  # the in-doubt call ran again, as asked
    assert log.count("slow:2:end") == 1
    assert log.count(f"slow:{slow_agent_steps}:end") == 1
    run.refresh_from_db()
    assert (run.recovery_attempts, run.lease_owner, run.journal_open) == (0, "", False)


async def test_the_asgi_application_starts_the_sweeper_with_its_first_scope(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Not as it is built: ``manage.py check`` and ``migrate`` import it too."""
    started: list[bool] = []
    monkeypatch.setattr(recovery, "start_sweeper", lambda: started.append(True))
    application = get_asgi_application()
    assert started == []

    async def nothing() -> dict[str, str]:
        return {"type": "lifespan.startup"}

    with pytest.raises(ValueError, match="lifespan"):  # the router serves no lifespan
        await application({"type": "lifespan"}, nothing, nothing)
    with pytest.raises(ValueError, match="lifespan"):
        await application({"type": "lifespan"}, nothing, nothing)
    assert started == [True]


@pytest.mark.processes
@pytest.mark.parametrize(("setting", "sweeps"), [("1", True), ("", False)])
def test_the_setting_starts_a_sweeper_as_the_apps_are_ready(
    setting: str, sweeps: bool
) -> None:
    """What a tasks worker's settings say; any other process that loads the app (a
    shell, ``migrate``) does not sweep."""
    code = (
        "import django; django.setup(); "
        "from deuz_django.runs import recovery; print(recovery.sweeping())"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=manage_env(DEUZ_RECOVERY_SWEEPER=setting, DEUZ_RECOVERY_INTERVAL="60"),
        cwd=MANAGE.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.strip() == str(sweeps), done.stderr


@pytest.mark.processes
def test_deuz_sweep_heals_runs_until_it_is_told_to_stop(
    effects: Callable[[], list[str]],
) -> None:
    run = services.start_run(agent="scripted", messages=PROMPT)
    abandon(run)
    sweeper = start_manage("deuz", "sweep", "--every", "0.2")
    try:
        wait_until(
            lambda: Run.objects.filter(run_id=run.run_id, status="completed").exists(),
            "the sweep to continue the abandoned run",
        )
    finally:
        sweeper.send_signal(signal.SIGTERM)
        out, err = sweeper.communicate(timeout=30)
    assert sweeper.returncode == 0, err
    assert out.splitlines()[0] == "Sweeping every 0.2 s until stopped."
    assert out.splitlines()[-1] == "Stopped."
    assert effects() == ["echo:hi"]


def test_deuz_sweep_refuses_a_bad_interval() -> None:
    with pytest.raises(CommandError, match="must be more than 0 seconds") as refused:
        call_command("deuz", "sweep", "--every", "0")
    assert refused.value.returncode == 2
    with (
        override_settings(DEUZ={**settings.DEUZ, "RECOVERY_INTERVAL": None}),
        pytest.raises(CommandError, match=r"\(sweeping is off\): pass --every") as off,
    ):
        call_command("deuz", "sweep")
    assert off.value.returncode == 2


def test_a_sweeper_started_while_the_apps_load_sweeps_once_they_are_ready(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``AppConfig.ready()`` starts it before the app registry is ready: a query then
    is Django's RuntimeWarning ("Accessing the database during app initialization"),
    which every fresh daphne printed."""
    swept = threading.Event()

    def probe() -> Any:
        swept.set()
        return SimpleNamespace(to_json=dict)

    monkeypatch.setattr(recovery, "SWEEPS", (recovery.Sweep("probe", probe, None),))
    monkeypatch.setattr(apps, "ready", False)
    sweeper = recovery.Sweeper(interval=60)
    sweeper.start()
    try:
        assert not swept.wait(0.3)
        monkeypatch.setattr(apps, "ready", True)
        assert swept.wait(10)
    finally:
        sweeper.stop()
        sweeper.join(10)


def test_the_sweep_runs_on_a_servers_loop_when_it_has_one(
    effects: Callable[[], list[str]],
) -> None:
    """A server that runs legs itself gets recovered legs on its own event loop."""
    run = services.start_run(agent="scripted", messages=PROMPT)
    abandon(run)

    async def on_this_loop() -> recovery.SweepReport:
        report = await recovery.asweep()
        from deuz_django.runs.continuing import _running

        await asyncio.gather(*_running.values())
        return report

    assert async_to_sync(on_this_loop)().continued == [run.run_id]
    run.refresh_from_db()
    assert run.status == "completed"


def test_a_servers_sweep_closes_a_journal_on_its_loop_while_its_legs_go_on(
    effects: Callable[[], list[str]],
) -> None:
    """Closing a journal is awaited on the server's loop, beside the recovered legs (a
    sync call that waited for the loop from inside its sync thread once froze a crash
    sweep's healer: tests/reliability/test_crash_sweep.py is where that showed)."""
    ended = services.start_run(agent="scripted", messages=PROMPT)
    services.resume_run(ended.run_id)
    abandon(ended, journal_open=True)
    Run.objects.filter(pk=ended.pk).update(lease_owner="", lease_expires_at=None)
    abandoned = services.start_run(agent="scripted", messages=PROMPT)
    abandon(abandoned)

    async def on_this_loop() -> recovery.SweepReport:
        from deuz_django.runs.continuing import _running

        report = await asyncio.wait_for(recovery.asweep(), 30)  # a guard, not a timing
        await asyncio.wait_for(asyncio.gather(*_running.values()), 30)
        return report

    # As in a server: the loop is the thread's own (asyncio.run), not async_to_sync's.
    reports: list[recovery.SweepReport] = []
    server = threading.Thread(
        target=lambda: reports.append(asyncio.run(on_this_loop()))
    )
    server.start()
    server.join(60)
    [report] = reports
    assert (report.continued, report.journals_closed) == (
        [abandoned.run_id],
        [ended.run_id],
    )
    assert Run.objects.get(pk=abandoned.pk).status == "completed"
    assert not Run.objects.get(pk=ended.pk).journal_open
