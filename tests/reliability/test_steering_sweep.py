"""The steering sweep: runs receive input at random moments while server-like processes
running their legs are SIGKILLed, over and over — inside model calls, tools, saves, and
between a leg taking an input and its checkpoint — and each next process's recovery
sweeper heals what the dead one left (tests/reliability/test_crash_sweep.py's pattern).

Afterwards every run is completed and every input it accepted is in its history exactly
once, in the order it was accepted: none lost, none doubled, none left queued. Input
sent to a run that had completed is refused, never silently dropped.
``DEUZ_TEST_SEED`` replays a sweep's random moments.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections import defaultdict

import pytest
from django.db import connections

from deuz_django import services
from deuz_django.core.durable.inputs import carried_inputs
from deuz_django.exceptions import RunNotSteerable
from deuz_django.models import Run, RunInput, StreamJournalEntry
from deuz_django.storage.store import DjangoSessionStore
from tests.django.processes import wait_until
from tests.reliability.conftest import Children
from tests.reliability.steering_agent import STEPS
from tests.reliability.test_crash_sweep import SWEEP_ENV, holders

pytestmark = pytest.mark.django_db(transaction=True)

KILLED_RUNS = 30  # distinct runs that were mid-leg at a kill, at least
NEW_RUNS_PER_PROCESS = 5
MAX_PROCESSES = 40


class Sender:
    """Sends input to random runs, remembering what each run accepted."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.accepted: dict[str, list[tuple[int, str]]] = defaultdict(list)
        self.refused = 0
        self.sent = 0

    def send_for(self, run_ids: list[str], seconds: float) -> None:
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            run_id = self.rng.choice(run_ids)
            text = f"{run_id} input {self.sent}"
            self.sent += 1
            try:
                queued = services.send_input(run_id, text, operator="sweep")
            except RunNotSteerable:
                self.refused += 1
            else:
                self.accepted[run_id].append((queued.seq, text))
            time.sleep(self.rng.uniform(0, 0.03))


def delivered_in_order(run_id: str) -> list[tuple[int, str]]:
    """The inputs the run's history holds, in history order: ``(seq, text)``."""
    checkpoint = DjangoSessionStore().load(run_id)
    assert checkpoint is not None
    return [
        (seq, message.text)
        for message in checkpoint.messages
        for seq in carried_inputs([message])
    ]


def taken_again() -> int:
    """Inputs a leg took (journaled their delivery) and died with before its checkpoint,
    delivered again by a later leg: their delivery part is journaled more than once."""
    parts = StreamJournalEntry.objects.filter(part__contains="data-input-delivered")
    seen: dict[tuple[int, str], int] = defaultdict(int)
    for run_pk, part in parts.values_list("run_id", "part"):
        seen[(run_pk, part.split('"inputId":"')[1].split('"')[0])] += 1
    return sum(1 for count in seen.values() if count > 1)


def test_inputs_sent_while_legs_are_killed_are_each_delivered_once_in_order(
    children: Children,
) -> None:
    seed = int(os.environ.get("DEUZ_TEST_SEED") or random.randrange(2**32))
    print(f"steering sweep: DEUZ_TEST_SEED={seed}")  # shown with a failure
    rng = random.Random(seed)
    sender = Sender(rng)
    run_ids: list[str] = []
    killed_mid_leg: set[str] = set()
    processes = 0
    while len(killed_mid_leg) < KILLED_RUNS:
        assert processes < MAX_PROCESSES, f"{len(killed_mid_leg)} runs killed mid-leg"
        new = [f"steer-{len(run_ids) + i}" for i in range(NEW_RUNS_PER_PROCESS)]
        for run_id in new:
            services.start_run(
                agent="steered",
                messages=[{"role": "user", "content": run_id}],
                run_id=run_id,
            )
        run_ids += new
        child = children(new, **SWEEP_ENV)
        processes += 1
        pid = child.pid
        wait_until(lambda: holders(pid), "the process to take its runs")  # noqa: B023
        sender.send_for(run_ids, rng.uniform(0, 0.8))
        child.send_signal(signal.SIGKILL)
        child.wait()
        killed_mid_leg.update(holders(pid))

    # One last process is left alive: its sweeper heals every run, as input still comes.
    final = children([], **SWEEP_ENV)
    sender.send_for(run_ids, 1.0)

    def healed() -> bool:
        open_runs = Run.objects.roots().exclude(status="completed")
        queued = RunInput.objects.filter(delivered_at_step=None)
        return not open_runs.exists() and not queued.exists()

    try:
        wait_until(healed, "every run to complete with every input delivered")
    except AssertionError as error:
        final.send_signal(signal.SIGUSR1)  # its stacks, into its log
        left = Run.objects.roots().exclude(status="completed")
        raise AssertionError(
            f"{error}: {list(left.values_list('run_id', 'status', 'lease_owner'))[:5]}"
        ) from None
    assert final.poll() is None  # the healer never crashed

    accepted = sum(len(inputs) for inputs in sender.accepted.values())
    for run_id in run_ids:
        expected = sender.accepted.get(run_id, [])
        assert delivered_in_order(run_id) == expected, run_id  # none lost or doubled
        rows = RunInput.objects.filter(run__run_id=run_id).order_by("seq")
        assert [(r.seq, r.text) for r in rows] == expected, run_id
        assert all(r.delivered_at_step is not None for r in rows), run_id
        checkpoint = DjangoSessionStore().load(run_id)
        assert checkpoint is not None
        ticks = [m for m in checkpoint.messages if m.role == "tool"]
        assert len(ticks) == STEPS, run_id
    print(
        f"steering sweep: {processes} processes killed, {len(run_ids)} runs, "
        f"{len(killed_mid_leg)} killed mid-leg, {accepted} inputs accepted and "
        f"delivered once each ({taken_again()} of them taken by a leg killed before "
        f"its checkpoint), {sender.refused} refused (the run had completed)"
    )
    connections.close_all()
