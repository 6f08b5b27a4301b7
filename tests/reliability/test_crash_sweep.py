"""The crash sweep: server-like processes are SIGKILLed at random moments with runs in
flight, over and over, and the runs heal with no operator — each next process's recovery
sweeper continues what the dead one left (DESIGN §7, issue #12).

Counted over the whole sweep: at least ``KILLED_RUNS`` distinct runs were mid-leg when
their process was killed (many more than once, while being recovered); afterwards no
run is lost, no message duplicated, no model call made for a turn the step journal
recorded, no tool executed whose outcome it recorded, and every run's stream journal is
closed. A charge a kill left in doubt was put to a person (and ran again only when a
person said so) — or, when the charge tool reconciles (``crashy_reconciling``), was
settled by the tool itself: every run completes unaided, each charge had its effect
exactly once, and no person is asked anything. ``DEUZ_TEST_SEED`` replays a sweep's
random moments.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter
from collections.abc import Callable

import pytest
from django.db import connections
from django.utils import timezone

from deuz_django import services
from deuz_django.approvals.verdicts import RecordedResult, Verdict, record_verdict
from deuz_django.models import Approval, Run
from tests.django.processes import wait_until
from tests.django.run_support import stored_rows, tool_results
from tests.reliability.conftest import Children
from tests.reliability.crash_agent import FINAL_ANSWER, STEPS

pytestmark = pytest.mark.django_db(transaction=True)

KILLED_RUNS = 100  # distinct runs that were mid-leg at a kill, at least
NEW_RUNS_PER_PROCESS = 8
MAX_PROCESSES = 60
SWEEP_ENV = {
    "DEUZ_LEASE_SECONDS": "1",
    "DEUZ_RECOVERY_INTERVAL": "0.2",
    "DEUZ_RECOVERY_BACKOFF": "0.05",
    "DEUZ_RECOVERY_MAX_ATTEMPTS": "1000",
}


def holders(pid: int) -> list[str]:
    """The runs whose lease a process holds right now."""
    return list(
        Run.objects.filter(lease_owner__contains=f":{pid}:").values_list(
            "run_id", flat=True
        )
    )


def settle_in_doubt(rng: random.Random) -> Counter[str]:
    """A person answers every pending "outcome unknown" call, each one of the three ways;
    returns how many times each call was told to run again."""
    again: Counter[str] = Counter()
    for approval in Approval.objects.filter(status="pending").select_related("run"):
        assert approval.kind == "outcome_unknown", approval  # no gated tools here
        assert approval.tool_name == "charge", approval  # note is idempotent
        answer = rng.choice(("happened", "again", "failed"))
        if answer == "happened":
            verdict = Verdict(approved=True, result=RecordedResult("charged (checked)"))
        elif answer == "again":
            verdict = Verdict(approved=True)
            again[f"{approval.run.run_id}:{approval.tool_call_id}"] += 1
        else:
            verdict = Verdict(approved=False, reason="Marked failed.")
        record_verdict(approval, None, verdict, operator="ops")
    return again


@pytest.mark.parametrize("agent", ["crashy", "crashy_reconciling"])
def test_runs_killed_at_random_moments_heal_without_an_operator_and_repeat_nothing(
    children: Children,
    effects: Callable[[], list[str]],
    agent: str,
) -> None:
    reconciling = agent == "crashy_reconciling"
    seed = int(os.environ.get("DEUZ_TEST_SEED") or random.randrange(2**32))
    print(f"crash sweep: DEUZ_TEST_SEED={seed}")  # shown with a failure
    rng = random.Random(seed)
    run_ids: list[str] = []
    killed_mid_leg: set[str] = set()
    kills = 0  # a run may be killed again while it is being recovered
    processes = 0
    while len(killed_mid_leg) < KILLED_RUNS:
        assert processes < MAX_PROCESSES, f"{len(killed_mid_leg)} runs killed mid-leg"
        new = [f"crash-{len(run_ids) + i}" for i in range(NEW_RUNS_PER_PROCESS)]
        for run_id in new:
            services.start_run(
                agent=agent,
                messages=[{"role": "user", "content": run_id}],
                run_id=run_id,
            )
        run_ids += new
        child = children(new, **SWEEP_ENV)
        processes += 1
        pid = child.pid
        wait_until(lambda: holders(pid), "the process to take its runs")  # noqa: B023
        time.sleep(rng.uniform(0, 0.8))
        child.send_signal(signal.SIGKILL)
        child.wait()
        held = holders(pid)
        killed_mid_leg.update(held)
        kills += len(held)

    # One last process, given one more run, is left alive: its sweeper heals everything
    # the others left, on its event loop.
    last = f"crash-{len(run_ids)}"
    services.start_run(
        agent=agent, messages=[{"role": "user", "content": last}], run_id=last
    )
    run_ids.append(last)
    final = children([last], **SWEEP_ENV)

    def healed() -> bool:
        open_runs = Run.objects.roots().exclude(status__in=("completed", "suspended"))
        undecided = Approval.objects.filter(status="pending")
        suspended = Run.objects.roots().filter(status="suspended")
        # A suspended run waits for a person only on calls a kill left in doubt.
        return not open_runs.exists() and suspended.count() <= undecided.count()

    again: Counter[str] = Counter()
    while Run.objects.roots().exclude(status="completed").exists():
        try:
            wait_until(healed, "the sweeper to heal every run")
        except AssertionError as error:
            final.send_signal(signal.SIGUSR1)  # its stacks, into its log
            left = Run.objects.roots().exclude(status="completed")
            columns = ("run_id", "status", "lease_owner", "lease_expires_at")
            raise AssertionError(
                f"{error} at {timezone.now()} (healer {final.pid} alive: "
                f"{final.poll() is None}): {list(left.values_list(*columns))[:5]}"
            ) from None
        if reconciling:  # the tool settles every call in doubt: nobody is asked
            asked = Approval.objects.values_list("run__run_id", "tool_call_id")
            assert not asked.exists(), f"put to a person: {list(asked)}"
        else:
            again += settle_in_doubt(rng)
    assert final.poll() is None  # the healer never crashed
    wait_until(
        lambda: not Run.objects.filter(journal_open=True).exists(),
        "every stream journal to be closed",
    )

    log = effects()
    assert [line for line in log if line.startswith("VIOLATION")] == []
    assert len(run_ids) == Run.objects.roots().filter(status="completed").count()
    roles = ["user", *["assistant", "tool"] * STEPS, "assistant"]
    for run_id in run_ids:
        run = Run.objects.get(run_id=run_id)
        assert stored_rows(run) == list(enumerate(roles)), (
            run_id
        )  # none lost or doubled
        results = tool_results(run)
        assert sorted(results) == sorted(
            f"{kind}{step}" for kind in "nc" for step in range(STEPS)
        )
        for step in range(STEPS):
            assert results[f"n{step}"] == (f"note {step} done", False)
            charged = [
                line
                for line in log
                if line.startswith(f"charge:{run_id}:{step}:effect:")
            ]
            if reconciling:  # the effect exactly once: none lost, none repeated
                assert len(charged) == 1, (run_id, step, charged)
                assert results[f"c{step}"] == (f"charge {step} done", False)
                continue
            # A charge ran at most once, plus once for each time a person said "run it
            # again" (a kill between the journal's start record and the effect leaves
            # a call in doubt that never happened: "at most").
            starts = log.count(f"charge:{run_id}:{step}:start")
            assert starts <= 1 + again[f"{run_id}:c{step}"], (run_id, step, starts)
            assert len(charged) <= starts
            if results[f"c{step}"] == (f"charge {step} done", False):
                assert starts >= 1
        assert (
            FINAL_ANSWER
            in run.messages.order_by("-index").values_list("data", flat=True)[0]
        )
    in_doubt = Approval.objects.filter(kind="outcome_unknown").count()
    waited = Run.objects.roots().filter(approvals__isnull=False).distinct().count()
    found = Counter(
        line.rsplit(":", 1)[1] for line in log if line.startswith("reconciled:")
    )
    assert not reconciling or (in_doubt, waited) == (0, 0)
    print(
        f"crash sweep ({agent}): {processes} processes killed, {len(run_ids)} runs, "
        f"{len(killed_mid_leg)} of them killed mid-leg ({kills} kills of a leg), "
        f"{in_doubt} calls put to a person, {found['happened']} found to have "
        f"happened and {found['did-not-happen']} not by their tool, "
        f"{waited} runs waited for a person"
    )
    connections.close_all()
