"""One decision, one execution — as a property, over models that re-use call ids across
steps and legs, replay whole turns, and mix calls a person decides, a grant approves, a
standing rule approves or denies, and calls nobody needs to decide; with the legs run by
``manage.py deuz resume`` processes SIGKILLed at random moments in between.

After every example: each execution of a gated tool started on exactly one decision —
an approving verdict on that very call and tool — no decision authorized two, and no
call had more effects than the decisions it ran on.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connections
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deuz_django import services
from deuz_django.approvals.verdicts import RecordedResult
from deuz_django.models import (
    Approval,
    ApprovalKind,
    ApprovalStatus,
    Run,
    RunCall,
    RunStatus,
)
from deuz_django.models.rules import Grant, GrantScope, StandingRule
from deuz_django.registry import agent_tools
from tests.django.processes import start_manage, wait_until
from tests.reliability.planned_agent import GATED, TOOLS

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.processes]

LEASE_SECONDS = 1.0
MAX_LEGS = 8
CALL_IDS = ("c0", "c1")  # few ids: they keep coming back
AMOUNTS = (1, 2)

calls = st.tuples(
    st.sampled_from(CALL_IDS), st.sampled_from(TOOLS), st.sampled_from(AMOUNTS)
)
turn = st.lists(calls, min_size=1, max_size=2, unique_by=lambda call: call[0])
# A plan replays turns: a few distinct turns, repeated in any order.
plans = st.lists(turn, min_size=1, max_size=3).flatmap(
    lambda turns: st.lists(st.sampled_from(turns), min_size=1, max_size=5)
)
# A leg process takes about a second to start; its model calls take 0.1 s each.
kills = st.lists(st.none() | st.floats(0.8, 2.5), min_size=MAX_LEGS, max_size=MAX_LEGS)
verdicts = st.lists(st.booleans(), min_size=32, max_size=32)


@pytest.fixture
def people(make_user: Callable[..., User]) -> tuple[User, User]:
    return make_user("ann"), make_user("boss", superuser=True)


@settings(
    max_examples=int(os.environ.get("DEUZ_TEST_EXAMPLES", "8")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(plan=plans, kill_after=kills, approve=verdicts)
def test_every_execution_runs_on_one_decision_of_its_own_and_none_runs_twice(
    people: tuple[User, User],
    effects: Callable[[], list[str]],
    monkeypatch: pytest.MonkeyPatch,
    plan: list[list[tuple[str, str, int]]],
    kill_after: list[float | None],
    approve: list[bool],
) -> None:
    ann, boss = people
    monkeypatch.setenv("DEUZ_TEST_PLAN", json.dumps(plan))
    agent_tools.cache_clear()  # this process builds the agent of this plan
    before = Counter(effects())
    run = services.start_run(
        agent="planned", messages=[{"role": "user", "content": "Pay."}], owner=ann
    )
    _deciders(run, boss)
    votes = iter(approve)
    for kill in kill_after:
        _wait_for_lapsed_lease(run)
        run.refresh_from_db()
        if run.status in (RunStatus.COMPLETED, RunStatus.STOPPED):
            break
        _decide_what_waits(run, ann, votes)
        _leg(run, kill)
    _assert_one_decision_per_execution(run, Counter(effects()) - before)


def _deciders(run: Run, boss: User) -> None:
    """A grant for ``grant_pay`` on this run; rules approving ``rule_pay`` and denying
    ``deny_pay`` (made once, for every run)."""
    Grant.objects.create(
        tool_name="grant_pay",
        agent=run.agent,
        scope=GrantScope.RUN,
        run=run,
        created_by=boss,
    )
    for tool, action in (("rule_pay", "approve"), ("deny_pay", "deny")):
        StandingRule.objects.get_or_create(
            tool_name=tool,
            action=action,
            defaults={"reason": f"{tool} is {action}d.", "created_by": boss},
        )


def _decide_what_waits(run: Run, owner: User, votes: Any) -> None:
    """A person answers what the run waits on: approve or deny as drawn; a call a kill
    left in doubt is recorded as having happened (so it never runs again)."""
    for approval in services.current_pending(run).select_related("run"):
        if approval.kind == ApprovalKind.OUTCOME_UNKNOWN:
            services.decide_approval(
                approval, user=owner, approved=True, result=RecordedResult("paid")
            )
        else:
            services.decide_approval(approval, user=owner, approved=next(votes, True))


def _leg(run: Run, kill: float | None) -> None:
    """One leg in a ``deuz resume`` process, SIGKILLed after ``kill`` seconds (if not
    done by then)."""
    leg = start_manage(
        "deuz",
        "resume",
        run.run_id,
        DEUZ_LEASE_SECONDS=str(LEASE_SECONDS),
        DEUZ_TEST_PLAN=os.environ["DEUZ_TEST_PLAN"],
    )
    try:
        leg.wait(timeout=kill if kill is not None else 60)
    except Exception:
        leg.send_signal(signal.SIGKILL)
        leg.wait(timeout=10)
    finally:
        leg.communicate()


def _wait_for_lapsed_lease(run: Run) -> None:
    """A killed leg's lease lapses after its length; until then the run is busy."""

    def free() -> bool:
        row = Run.objects.get(pk=run.pk)
        return (
            not row.lease_owner
            or row.lease_expires_at is None
            or (row.lease_expires_at.timestamp() < time.time())
        )

    wait_until(free, "the killed leg's lease to lapse")


def _assert_one_decision_per_execution(run: Run, effects: Counter[str]) -> None:
    tree = RunCall.objects.filter(step__run__run_id__startswith=run.run_id)
    used: Counter[int] = Counter()
    ran_on: Counter[tuple[str, str]] = Counter()
    for call in tree.select_related("decision"):
        if call.tool_name not in GATED:
            assert call.decision is None
            continue
        decision = call.decision
        assert decision is not None, f"{call} ran on no decision"
        assert decision.status == ApprovalStatus.APPROVED
        assert (decision.tool_call_id, decision.tool_name) == (
            call.tool_call_id,
            call.tool_name,
        )
        assert decision.run_id == run.pk
        used[decision.pk] += 1
        ran_on[(call.tool_name, call.tool_call_id)] += 1
    assert all(count == 1 for count in used.values()), used
    executed: Counter[tuple[str, str]] = Counter()
    for line, count in effects.items():
        name, call_id, _amount = line.split(":")
        executed[(name, call_id)] += count
    for (name, call_id), count in executed.items():
        if name in GATED:
            assert count <= ran_on[(name, call_id)], (name, call_id, count)
    denied = Approval.objects.filter(run=run, tool_name="deny_pay")
    assert not any(executed[("deny_pay", call_id)] for call_id in CALL_IDS)
    assert all(a.status != ApprovalStatus.APPROVED for a in denied)
    connections.close_all()
