"""A leg SIGKILLed inside a slow tool is re-driven by ``deuz recover`` once its lease lapses:
the run completes, no completed step repeats, and no history row is lost or duplicated
(DESIGN §7).

The leg runs in a real ``manage.py deuz resume`` process on the test's own database, with
a one-second lease (``DEUZ_LEASE_SECONDS``) that it renews while it is alive.
"""

from __future__ import annotations

import io
import os
import signal
from collections.abc import Callable
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone

from deuz_django import services
from deuz_django.approvals.verdicts import Verdict, record_verdict
from deuz_django.core import ToolUsePart
from deuz_django.models import Approval, Run
from tests.django.agents import slow_agent_steps
from tests.django.processes import start_manage, wait_until
from tests.django.run_support import PROMPT, decoded, stored_rows

pytestmark = pytest.mark.django_db(transaction=True)


def lease_lapsed(run: Run) -> bool:
    run.refresh_from_db()
    return run.lease_expires_at is not None and run.lease_expires_at < timezone.now()


def test_a_killed_leg_is_recovered_without_repeating_a_completed_step(
    effects: Callable[[], list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
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
        wait_until(
            lambda: "slow:2:start" in effects(), "the leg to enter step 2's tool"
        )
        assert stored_rows(run) == list(enumerate(["user", "assistant", "tool"]))
    finally:
        os.kill(leg.pid, signal.SIGKILL)
        leg.communicate()
    assert leg.returncode == -signal.SIGKILL
    run.refresh_from_db()
    assert (run.status, run.step_index) == ("running", 1)
    assert run.lease_owner  # the dead leg's lease is still on the row...
    assert services.recoverable_runs(older_than=0) == []  # ...and live until it lapses

    wait_until(lambda: lease_lapsed(run), "the dead leg's lease to lapse")
    monkeypatch.delenv("DEUZ_TEST_SLOW_SECONDS", raising=False)
    out = io.StringIO()
    call_command("deuz", "recover", "--older-than", "0", stdout=out)
    # The killed call started and left no outcome, and ``slow`` is not idempotent: it
    # is never re-run silently, a person is asked.
    assert out.getvalue().strip() == f"recovered {run.run_id}: suspended"
    [in_doubt] = Approval.objects.filter(run=run, status="pending")
    assert (in_doubt.kind, in_doubt.tool_call_id) == ("outcome_unknown", "s2")
    assert effects().count("slow:2:start") == 1
    record_verdict(in_doubt, None, Verdict(approved=True), operator="test")  # run again
    assert services.resume_run(run.run_id).status == "completed"

    log = effects()
    assert log.count("slow:1:start") == log.count("slow:1:end") == 1  # not repeated
    assert log.count("slow:2:start") == 2  # the interrupted call ran again, as asked...
    assert log.count("slow:2:end") == 1  # ...and completed once
    for step in range(3, slow_agent_steps + 1):
        assert log.count(f"slow:{step}:end") == 1
    run.refresh_from_db()
    assert (run.status, run.step_index, run.lease_owner) == (
        "completed",
        slow_agent_steps + 1,
        "",
    )
    roles = ["user", *["assistant", "tool"] * slow_agent_steps, "assistant"]
    assert stored_rows(run) == list(enumerate(roles))
    calls: list[Any] = [
        part.id
        for message in decoded(run)
        for part in message.parts
        if isinstance(part, ToolUsePart)
    ]
    assert calls == [f"s{i}" for i in range(1, slow_agent_steps + 1)]


def test_a_sub_agents_call_left_in_doubt_is_surfaced_as_outcome_unknown(
    effects: Callable[[], list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    run = services.start_run(agent="nested_slow", messages=PROMPT)
    leg = start_manage(
        "deuz",
        "resume",
        run.run_id,
        DEUZ_LEASE_SECONDS="1",
        DEUZ_TEST_SLOW_SECONDS="60",
    )
    try:
        wait_until(lambda: "slow:1:start" in effects(), "the sub-agent's tool")
    finally:
        os.kill(leg.pid, signal.SIGKILL)
        leg.communicate()
    wait_until(lambda: lease_lapsed(run), "the dead leg's lease to lapse")
    monkeypatch.delenv("DEUZ_TEST_SLOW_SECONDS", raising=False)
    outcome = services.resume_run(run.run_id)
    assert outcome.status == "suspended", (effects(), outcome)
    [in_doubt] = Approval.objects.filter(run=run, status="pending")
    assert (in_doubt.kind, in_doubt.tool_call_id, in_doubt.agent_path) == (
        "outcome_unknown",
        "x1",
        ["worker"],
    )
    assert effects().count("slow:1:start") == 1  # not re-run silently
    record_verdict(in_doubt, None, Verdict(approved=True), operator="test")  # run again
    assert services.resume_run(run.run_id).status == "completed"
    assert effects().count("slow:1:end") == 1
