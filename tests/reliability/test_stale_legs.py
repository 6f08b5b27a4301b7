"""No stale leg acts: a leg checks its lease before every model call and tool, a dead
connection is replaced, renewals that keep failing abort the leg before its lease can
lapse, and neither taking a lease nor a claim waits behind a stalled transaction — a
process frozen inside its checkpoint transaction holds up no recovery, and its own run
is recovered once PostgreSQL ends that transaction (issue #27, item 10)."""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.db import connection, connections
from django.test import override_settings
from django.utils import timezone

from deuz_django import services
from deuz_django.approvals.verdicts import RecordedResult, Verdict, record_verdict
from deuz_django.exceptions import LeaseLost, RunBusy
from deuz_django.models import Approval, Run
from deuz_django.runs.claims import claim
from deuz_django.storage import leases
from tests.api.support import approval, started
from tests.django.processes import start_manage, wait_until
from tests.django.run_support import (
    PROMPT,
    held_elsewhere,
    short_lock_timeout,
    stored_rows,
)
from tests.reliability.conftest import Children
from tests.reliability.crash_agent import STEPS


def _run(run_id: str = "run-f") -> Run:
    return Run.objects.create(run_id=run_id, agent="slow")


@pytest.mark.django_db(transaction=True)
async def test_the_fence_passes_while_the_lease_is_held_and_raises_once_taken_over() -> (
    None
):
    run = await Run.objects.acreate(run_id="run-f", agent="slow")
    lease = await _acquire(run.run_id, "a")
    lost: list[BaseException] = []
    fence = leases.lease_fence(lease, lost.append)
    await fence()
    await Run.objects.filter(pk=run.pk).aupdate(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    await _acquire(run.run_id, "b")
    with pytest.raises(LeaseLost, match="taken over"):
        await fence()
    assert len(lost) == 1
    await sync_to_async(connections.close_all)()


async def _acquire(run_id: str, owner: str) -> Any:
    return await sync_to_async(leases.acquire)(run_id, owner)


@pytest.mark.django_db(transaction=True)
def test_a_dead_connection_is_discarded_and_the_fence_checks_on_a_new_one() -> None:
    run = _run()
    lease = leases.acquire(run.run_id, "a")
    check = leases.lease_fence(lease)
    connection.ensure_connection()
    dead = connection.connection
    dead.close()  # the server went away under this connection
    async_to_sync(check)()
    assert connection.connection is not dead


@pytest.mark.django_db(transaction=True)
def test_renewals_that_keep_failing_abort_the_leg_before_the_lease_lapses(
    monkeypatch: pytest.MonkeyPatch, effects: Callable[[], list[str]]
) -> None:
    monkeypatch.setenv("DEUZ_TEST_SLOW_SECONDS", "2")
    monkeypatch.setenv("DEUZ_TEST_SLOW_STEP", "1")

    def broken(lease: Any) -> bool:
        raise ConnectionError("the database went away")

    monkeypatch.setattr(leases, "renew", broken)
    run = services.start_run(agent="slow", messages=PROMPT)
    with override_settings(DEUZ={**settings.DEUZ, "LEASE_SECONDS": 0.6}):
        outcome = services.resume_run(run.run_id)
    assert outcome.error is not None
    assert "could not be renewed" in outcome.error
    # Aborted inside step 1's tool (a leg that kept going would start step 2's).
    assert "slow:2:start" not in effects()
    connections.close_all()


@pytest.mark.django_db(transaction=True)
def test_a_leg_that_finds_its_lease_lapsed_leaves_the_run_to_recovery(
    monkeypatch: pytest.MonkeyPatch, effects: Callable[[], list[str]]
) -> None:
    """A leg held up past its lease (its renewals never reached the database, as in a
    frozen process) stops at its next fence. Nobody took the run meanwhile, and the run
    is not marked failed for it: recovery continues it (it once stayed ``running`` with
    the error, never recovered)."""
    monkeypatch.setenv("DEUZ_TEST_SLOW_SECONDS", "1")
    monkeypatch.setenv("DEUZ_TEST_SLOW_STEP", "1")
    monkeypatch.setattr(leases, "renew", lambda lease: True)
    run = services.start_run(agent="slow", messages=PROMPT)
    with override_settings(DEUZ={**settings.DEUZ, "LEASE_SECONDS": 0.5}):
        outcome = services.resume_run(run.run_id)
    assert outcome.error is not None
    assert "lapsed" in outcome.error
    assert "slow:2:start" not in effects()  # stopped after step 1's tool
    run.refresh_from_db()
    assert (run.status, run.lease_owner) == ("running", "")
    assert services.recoverable_runs(0) == [run.run_id]
    connections.close_all()


@pytest.mark.django_db(transaction=True)
def test_taking_a_lease_never_waits_behind_a_stalled_legs_transaction() -> None:
    """A stalled leg holds the run row in an open write transaction. Taking the lease
    answers "busy" at once; a taker that waited instead would hit this test's short lock
    timeout and fail with a database error rather than ``RunBusy``."""
    run = _run()
    stalled_leg = Run.objects.filter(pk=run.pk)
    with (
        held_elsewhere(stalled_leg, title="stalled"),
        short_lock_timeout(),
        pytest.raises(RunBusy),
    ):
        leases.acquire(run.run_id, "recovery")
    assert leases.acquire(run.run_id, "recovery").owner == "recovery"


@pytest.mark.django_db(transaction=True)
def test_a_claim_never_waits_behind_a_transaction_holding_the_runs_approvals(
    make_user: Callable[..., Any],
) -> None:
    """A verdict being recorded (or a stalled process's transaction) holds one of a
    suspended run's approval rows. A claim that settles the rows ("resume now") reads
    the run as busy at once and gives its lease back; one that waited would hit this
    test's short lock timeout and fail with a database error instead."""
    run = started(make_user("ann"))
    verdict_in_flight = Approval.objects.filter(run=run, approval_id="r1")
    with (
        held_elsewhere(verdict_in_flight, reason="deciding"),
        short_lock_timeout(),
        pytest.raises(RunBusy),
    ):
        claim(run.run_id, deny_remaining=True)
    assert Run.objects.get(pk=run.pk).lease_owner == ""  # the lease is given back
    assert approval(run, "r1").is_pending  # nothing written


# -- real processes ------------------------------------------------------------------


def _crashy_run() -> Run:
    run_id = f"paused-{uuid.uuid4().hex[:8]}"
    return services.start_run(
        agent="crashy", messages=[{"role": "user", "content": run_id}], run_id=run_id
    )


def _lease_lapsed(run: Run) -> bool:
    run.refresh_from_db()
    return run.lease_expires_at is not None and run.lease_expires_at < timezone.now()


def _heal(run: Run) -> None:
    """What recovery does once the paused leg's lease lapsed: continue the run here, a
    person saying "it happened" to any call the pause left in doubt."""
    while (outcome := services.resume_run(run.run_id)).status == "suspended":
        for pending in Approval.objects.filter(run=run, status="pending"):
            record_verdict(
                pending,
                None,
                Verdict(approved=True, result=RecordedResult("done")),
                operator="ops",
            )
    assert outcome.status == "completed", outcome


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("paused_in", ["model:1", "charge:1"])
def test_a_leg_paused_past_its_lease_acts_no_more_once_it_wakes(
    paused_in: str, effects: Callable[[], list[str]]
) -> None:
    """SIGSTOP inside a model call or a tool (a GC pause, a blocked loop); the run is
    taken over and finished; woken, the old leg may finish what it was inside, but it
    calls the model no more and starts no tool."""
    run = _crashy_run()
    leg = start_manage(
        "deuz",
        "resume",
        run.run_id,
        DEUZ_LEASE_SECONDS="1",
        DEUZ_TEST_PAUSE_AT=paused_in,
        DEUZ_TEST_PAUSE_SECONDS="3",
    )
    kind, index = paused_in.split(":")
    inside = (
        f"model:{run.run_id}:{index}"
        if kind == "model"
        else (f"charge:{run.run_id}:{index}:start")
    )
    try:
        wait_until(lambda: inside in effects(), f"the leg to enter {paused_in}")
        leg.send_signal(signal.SIGSTOP)
        wait_until(lambda: _lease_lapsed(run), "the paused leg's lease to lapse")
        _heal(run)
        before = effects()
    finally:
        leg.send_signal(signal.SIGCONT)
    leg.communicate(timeout=60)

    woken = effects()[len(before) :]
    assert [line for line in woken if line.endswith(":start")] == []  # no tool started
    assert [line for line in woken if line.startswith("model:")] == []  # no model call
    assert [line for line in effects() if line.startswith("VIOLATION")] == []
    run.refresh_from_db()
    assert run.status == "completed"
    roles = ["user", *["assistant", "tool"] * STEPS, "assistant"]
    assert stored_rows(run) == list(enumerate(roles))  # the stale leg wrote nothing


@pytest.mark.django_db(transaction=True)
def test_a_leg_whose_connection_is_terminated_reconnects_and_repeats_nothing(
    effects: Callable[[], list[str]],
) -> None:
    """PostgreSQL terminates the leg's session mid-tool (a failover, an admin's
    pg_terminate_backend): the leg discards the dead connection, goes on with a new
    one under the lease it still holds, and nothing runs twice."""
    if connection.vendor != "postgresql":
        pytest.skip("pg_terminate_backend is PostgreSQL's")
    run = _crashy_run()
    leg = start_manage(
        "deuz",
        "resume",
        run.run_id,
        DEUZ_LEASE_SECONDS="3",
        DEUZ_TEST_PAUSE_AT="charge:1",
        DEUZ_TEST_PAUSE_SECONDS="1.5",
    )
    wait_until(
        lambda: f"charge:{run.run_id}:1:start" in effects(), "the leg to enter a tool"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        assert cursor.fetchone()[0] >= 1  # the leg's session
    _out, err = leg.communicate(timeout=60)
    assert leg.returncode == 0, err
    log = effects()
    for step in range(STEPS):
        for kind in ("note", "charge"):
            assert log.count(f"{kind}:{run.run_id}:{step}:start") == 1, (kind, step)
        assert log.count(f"model:{run.run_id}:{step}") == 1
    assert [line for line in log if line.startswith("VIOLATION")] == []
    run.refresh_from_db()
    assert (run.status, run.last_error) == ("completed", "")


# -- a process frozen inside its checkpoint transaction -------------------------------

STALL_LEASE = 2.0  # seconds
STALL_SECONDS = 60.0


def _generations(run_ids: list[str]) -> dict[str, int]:
    return dict(
        Run.objects.filter(run_id__in=run_ids).values_list("run_id", "lease_generation")
    )


def _idle_in_transaction() -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND state = 'idle in transaction' AND pid <> pg_backend_pid()"
        )
        return [pid for (pid,) in cursor.fetchall()]


def _session_gone(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid])
        return cursor.fetchone() is None


def _settle_in_doubt() -> bool:
    """A person says "it happened" to every call a stop left in doubt; whether every
    run is completed."""
    for pending in Approval.objects.filter(status="pending"):
        record_verdict(
            pending,
            None,
            Verdict(approved=True, result=RecordedResult("done")),
            operator="ops",
        )
    return not Run.objects.roots().exclude(status="completed").exists()


@pytest.mark.django_db(transaction=True)
def test_a_leg_frozen_inside_its_checkpoint_transaction_holds_up_no_recovery(
    children: Children, effects: Callable[[], list[str]], tmp_path: Path
) -> None:
    """Issue #27's stall harness, with real processes on PostgreSQL and a 2 s lease. A
    server process SIGSTOPs itself for 60 s inside a run's checkpoint transaction, the
    run's row locked (``idle in transaction``); at that moment the process running three
    more runs dies (SIGKILL), so they queue for recovery behind the frozen one. Another
    server's sweeper recovers them within two lease lengths of the stop — the locked row
    is skipped, never waited for — and PostgreSQL ends the frozen transaction once it sat
    idle for a lease length, after which the stopped run is recovered within two lease
    lengths too. Woken, the frozen process acts no more: its save fails on the session
    the server ended, and its leg stops."""
    if connection.vendor != "postgresql":
        pytest.skip("row locks and idle_in_transaction_session_timeout: PostgreSQL's")
    lease = {"DEUZ_LEASE_SECONDS": str(STALL_LEASE)}
    stalled, others = "stalled", ["other-0", "other-1", "other-2"]
    runs = [stalled, *others]
    for run_id in [*runs, "healer-own"]:
        services.start_run(
            agent="crashy",
            messages=[{"role": "user", "content": run_id}],
            run_id=run_id,
        )
    frozen = children(
        [stalled],
        **lease,
        DEUZ_TEST_STOP_IN_SAVE=f"{stalled}:1",
        # Its first model call takes 6 s: time for the healer to start meanwhile.
        DEUZ_TEST_PAUSE_AT="model:0",
        DEUZ_TEST_PAUSE_SECONDS="6",
    )
    doomed = children(
        others, **lease, DEUZ_TEST_PAUSE_AT="model:0", DEUZ_TEST_PAUSE_SECONDS="600"
    )
    wait_until(lambda: all(_generations(runs).values()), "the processes' leases")
    # A server that sweeps: its own run gives it an event loop, on which recovered
    # legs run side by side.
    healer = children(
        ["healer-own"],
        **lease,
        DEUZ_RECOVERY_INTERVAL="0.2",
        DEUZ_RECOVERY_BACKOFF="0.05",
    )
    wait_until(lambda: _generations(["healer-own"])["healer-own"], "the healer")
    try:
        wait_until(
            lambda: f"stopped:{stalled}:1" in effects(),
            "the process to stop in its checkpoint transaction",
        )
        doomed.kill()
        stopped_at = time.monotonic()
        at_stop = _generations(runs)
        [session] = wait_until(_idle_in_transaction, "its session idle in transaction")
        seen: dict[str, float] = {}  # seconds after the stop: when each was seen

        def observe() -> bool:
            now, generations = time.monotonic() - stopped_at, _generations(runs)
            if "ended" not in seen and _session_gone(session):
                seen["ended"] = now
            for run_id in runs:
                if run_id not in seen and generations[run_id] > at_stop[run_id]:
                    seen[run_id] = now
            return len(seen) == len(runs) + 1

        wait_until(observe, "every run's recovery and the frozen transaction's end")
        others_after = max(seen[run_id] for run_id in others)
        print(
            f"stall: others recovered {others_after:.2f} s after the stop; the frozen "
            f"transaction ended after {seen['ended']:.2f} s, its run recovered "
            f"{seen[stalled] - seen['ended']:.2f} s later (lease {STALL_LEASE} s)"
        )
        assert seen[stalled] >= seen["ended"]  # never while its row was locked
        assert others_after <= 2 * STALL_LEASE
        assert seen[stalled] - seen["ended"] <= 2 * STALL_LEASE

        wait_until(_settle_in_doubt, "every run to complete")
        assert healer.poll() is None
        before = effects()
        time.sleep(max(0.0, STALL_SECONDS - (time.monotonic() - stopped_at)))
    finally:
        frozen.send_signal(signal.SIGCONT)
    log = tmp_path / "child-0.log"
    wait_until(
        lambda: f"checkpoint save failed for '{stalled}#1'" in log.read_text(),
        "the woken process to give its save up",
    )
    wait_until(
        lambda: f"lease on run {stalled} was taken over" in log.read_text(),
        "the woken process's leg to stop",
    )

    woken = effects()[len(before) :]
    assert [line for line in woken if line.endswith(":start")] == []  # no tool started
    assert [line for line in woken if line.startswith("model:")] == []  # no model call
    assert [line for line in effects() if line.startswith("VIOLATION")] == []
    roles = ["user", *["assistant", "tool"] * STEPS, "assistant"]
    for run_id in [*runs, "healer-own"]:
        run = Run.objects.get(run_id=run_id)
        assert (run.status, run.journal_open) == ("completed", False), run_id
        assert stored_rows(run) == list(enumerate(roles)), (
            run_id
        )  # none lost or doubled
