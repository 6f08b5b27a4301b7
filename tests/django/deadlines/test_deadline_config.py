"""Deadlines as configuration: a Deadline is validated when it is built, an agent's
deadlines name tools it has, the most specific one applies to a call, and a deadline
longer than APPROVAL_MAX_AGE is a system check warning (deuz_django.deadlines)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from deuz_django.checks import check_deadlines
from deuz_django.deadlines import (
    Deadline,
    DeadlineRules,
    duration_text,
    escalation_label,
    timeout_reason,
)
from deuz_django.exceptions import InvalidDeadline
from deuz_django.registry import AgentSpec
from tests.django.agents import by_turn, echo, refund, send_email
from tests.django.deadline_agents import REFUND_DEADLINE, timed_nested

HOUR = timedelta(hours=1)


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({}, "Deadline: give after (the deadline), remind_after (a reminder), or both"),
        ({"after": 3600}, "Deadline.after: expected a positive timedelta, got 3600"),
        ({"after": timedelta(0)}, "Deadline.after: expected a positive timedelta"),
        ({"after": -HOUR}, "Deadline.after: expected a positive timedelta"),
        ({"remind_after": "soon"}, "Deadline.remind_after: expected a positive"),
        ({"after": HOUR, "then": "ignore"}, "Deadline.then: expected 'deny' or"),
        (
            {"after": HOUR, "remind_after": 2 * HOUR},
            "Deadline.remind_after: the reminder (2 hours) must come before the "
            "deadline (1 hour)",
        ),
        (
            {"after": HOUR, "escalate_to": "group:Leads"},
            "Deadline.escalate_to: only a deadline with then='escalate' escalates",
        ),
        (
            {"after": HOUR, "extend_by": HOUR},
            "Deadline.extend_by: only a deadline with then='escalate' escalates",
        ),
        (
            {"remind_after": HOUR, "then": "escalate"},
            "Deadline.after: an escalation needs a deadline",
        ),
        (
            {"after": HOUR, "then": "escalate", "escalate_to": "Finance leads"},
            "Deadline.escalate_to: expected 'perm:<app_label.codename>' or "
            "'group:<name>', got 'Finance leads'",
        ),
        (
            {"after": HOUR, "then": "escalate", "escalate_to": "perm:approve"},
            "Deadline.escalate_to: expected 'perm:<app_label.codename>'",
        ),
        (
            {"after": HOUR, "then": "escalate", "escalate_to": "group:Leads"},
            "Deadline.extend_by: an escalation gives the people it reaches time",
        ),
    ],
)
def test_a_deadline_that_cannot_work_is_refused_naming_the_field(
    options: dict[str, Any], problem: str
) -> None:
    with pytest.raises(InvalidDeadline) as raised:
        Deadline(**options)
    assert str(raised.value).startswith(problem)
    assert isinstance(raised.value, ImproperlyConfigured)


def test_a_deadline_is_a_frozen_value_and_says_how_long_a_call_may_wait() -> None:
    assert REFUND_DEADLINE.longest_wait == timedelta(hours=8)
    assert Deadline(remind_after=HOUR).longest_wait == HOUR
    assert Deadline(after=HOUR).then == "deny"
    with pytest.raises(AttributeError):
        REFUND_DEADLINE.after = HOUR  # type: ignore[misc]
    escalating = Deadline(
        after=HOUR, then="escalate", escalate_to="perm:shop.approve", extend_by=HOUR
    )
    assert escalating.escalate_to == "perm:shop.approve"


@pytest.mark.parametrize(
    ("deadlines", "problem"),
    [
        (
            {"refnud": Deadline(after=HOUR)},
            "AgentSpec.deadlines['refnud']: the agent has no such tool",
        ),
        (
            {"echo": Deadline(after=HOUR)},
            "AgentSpec.deadlines['echo']: echo never needs approval",
        ),
        (
            {"refund": HOUR},
            "AgentSpec.deadlines['refund']: expected a Deadline, got "
            "datetime.timedelta(seconds=3600)",
        ),
        ({"": Deadline(after=HOUR)}, "AgentSpec.deadlines['']: expected a tool path"),
        (
            {"researcher/send_mail": Deadline(after=HOUR)},
            "AgentSpec.deadlines['researcher/send_mail']: the agent has no such tool",
        ),
    ],
)
def test_an_agent_deadline_for_a_tool_it_does_not_gate_is_refused(
    deadlines: dict[str, Any], problem: str
) -> None:
    tools = [echo, refund, *timed_nested.tools]  # type: ignore[misc]
    with pytest.raises(InvalidDeadline) as raised:
        AgentSpec(model=by_turn([]), tools=tools, deadlines=deadlines)
    assert str(raised.value).startswith(problem)


def test_an_agent_default_deadline_must_be_a_deadline() -> None:
    with pytest.raises(
        InvalidDeadline, match=r"AgentSpec\.deadline: expected a Deadline"
    ):
        AgentSpec(model=by_turn([]), tools=[refund], deadline=HOUR)  # type: ignore[arg-type]


def test_the_most_specific_deadline_applies_to_a_call() -> None:
    default = Deadline(after=24 * HOUR)
    tool = Deadline(after=HOUR)
    agent = Deadline(after=2 * HOUR)
    inner = Deadline(after=3 * HOUR)
    rules = DeadlineRules(
        default,
        {"send_email": tool, "researcher": agent, "researcher/send_email": inner},
    )
    assert rules.for_call("send_email", ()) is tool
    assert rules.for_call("refund", ()) is default
    assert rules.for_call("send_email", ("researcher",)) is inner
    assert rules.for_call("save_note", ("researcher",)) is agent
    assert rules.for_call("save_note", ("researcher", "deeper")) is agent
    assert DeadlineRules().for_call("refund", ()) is None


def test_a_sub_agent_and_its_tool_may_be_given_deadlines() -> None:
    spec = AgentSpec(
        model=by_turn([]),
        tools=[send_email, *timed_nested.tools],  # type: ignore[misc]
        deadlines={
            "researcher": Deadline(after=HOUR),
            "researcher/send_email": Deadline(after=2 * HOUR),
            "send_email": Deadline(after=3 * HOUR),
        },
    )
    rules = spec.deadline_rules
    assert rules.for_call("send_email", ("researcher",)).after == 2 * HOUR  # type: ignore[union-attr]
    assert rules.for_call("send_email", ()).after == 3 * HOUR  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("duration", "text"),
    [
        (timedelta(seconds=2), "2 seconds"),
        (timedelta(seconds=0.2), "1 second"),
        (timedelta(seconds=90), "1 minute 30 seconds"),
        (timedelta(hours=4), "4 hours"),
        (timedelta(hours=8, seconds=12), "8 hours"),  # a sweep's lag is not news
        (timedelta(hours=1, minutes=30), "1 hour 30 minutes"),
        (timedelta(days=1, hours=3, minutes=20), "1 day 3 hours"),
        (timedelta(minutes=59, seconds=59.6), "1 hour"),
    ],
)
def test_a_duration_is_said_in_its_two_largest_units(
    duration: timedelta, text: str
) -> None:
    assert duration_text(duration) == text


def test_the_timeout_reason_and_escalation_labels_read_as_sentences() -> None:
    assert timeout_reason(4 * HOUR) == "Timed out: nobody decided within 4 hours."
    assert escalation_label("group:Finance leads") == "Finance leads"
    assert escalation_label("perm:shop.approve") == "holders of shop.approve"


def test_a_deadline_longer_than_the_approval_max_age_is_a_warning(
    settings: Any,
) -> None:
    agents = {**settings.DEUZ["AGENTS"]}
    with override_settings(
        DEUZ={**settings.DEUZ, "AGENTS": agents, "APPROVAL_MAX_AGE": 6 * 3600}
    ):
        warnings = check_deadlines()
    assert [w.id for w in warnings] == ["deuz_django.W030"]
    assert warnings[0].msg == (
        "Agent 'timed': deadlines['refund'] lets a call wait 8 hours, longer than "
        "DEUZ['APPROVAL_MAX_AGE'] (6 hours)."
    )
    assert "APPROVAL_MAX_AGE" in (warnings[0].hint or "")


def test_deadlines_within_the_approval_max_age_or_without_one_pass_the_check(
    settings: Any,
) -> None:
    with override_settings(DEUZ={**settings.DEUZ, "APPROVAL_MAX_AGE": 8 * 3600}):
        assert check_deadlines() == []
    with override_settings(DEUZ={**settings.DEUZ, "APPROVAL_MAX_AGE": None}):
        assert check_deadlines() == []
