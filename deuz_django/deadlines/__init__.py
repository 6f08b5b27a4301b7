"""Deadlines on approvals: a reminder after a delay, and at the deadline either a timeout
(the call is denied, recorded ``expired``, and the run continues) or an escalation (more
people are asked, once, and the deadline moves on).

Configured on the Django side, per agent and per tool, on
:class:`~deuz_django.registry.AgentSpec`::

    AgentSpec(
        model=...,
        tools=[issue_refund, send_email, researcher],
        deadline=Deadline(after=timedelta(days=1)),  # every other gated call
        deadlines={
            "issue_refund": Deadline(
                remind_after=timedelta(minutes=30),
                after=timedelta(hours=4),
                then="escalate",
                escalate_to="group:Finance leads",
                extend_by=timedelta(hours=4),
            ),
            "researcher": Deadline(after=timedelta(minutes=10)),  # its sub-agent's calls
        },
    )

A key is a tool's path: a tool of the agent (``"issue_refund"``), a sub-agent's tool
(``"researcher/save_note"``) or a sub-agent (``"researcher"``: every gated call inside
it). For a call, the most specific key wins, then the agent's ``deadline``. Only gated
calls get deadlines: a call a crash left in doubt is never timed out, as only a person
can say whether it happened. The rows keep what applied when they were recorded
(:mod:`deuz_django.deadlines.rows`), so a deploy that changes a deadline leaves the calls
already waiting as they were.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal

from ..exceptions import InvalidDeadline

DeadlineAction = Literal["deny", "escalate"]
ACTIONS: tuple[DeadlineAction, ...] = ("deny", "escalate")
# The people an escalation goes to (as ``approval_escalated``'s ``to``).
ESCALATION_TARGET = re.compile(r"perm:\w+\.\w+|group:\S.*")
# The reason a timed-out call is denied with starts so (the model reads it; the chat too).
TIMED_OUT = "Timed out"
_UNITS = (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1))


@dataclass(frozen=True, slots=True, kw_only=True)
class Deadline:
    """When a gated call's approval is due, and what happens if nobody decides.

    ``remind_after``: a reminder (``approval_reminder``) once that long after the request.
    ``after``: the deadline. Then ``then="deny"`` times the call out: it is recorded
    ``expired``, the model is told "Timed out: nobody decided within …" and the run goes
    on. ``then="escalate"`` sends ``approval_escalated`` to ``escalate_to``
    (``"perm:<app_label.codename>"`` or ``"group:<name>"``) once and moves the deadline
    ``extend_by`` on; at that deadline the call times out.
    """

    after: timedelta | None = None
    remind_after: timedelta | None = None
    then: DeadlineAction = "deny"
    escalate_to: str = ""
    extend_by: timedelta | None = None

    def __post_init__(self) -> None:
        for name in ("after", "remind_after", "extend_by"):
            value = getattr(self, name)
            if value is not None and (
                not isinstance(value, timedelta) or value <= timedelta(0)
            ):
                raise InvalidDeadline(
                    f"Deadline.{name}: expected a positive timedelta, got {value!r}"
                )
        if self.after is None and self.remind_after is None:
            raise InvalidDeadline(
                "Deadline: give after (the deadline), remind_after (a reminder), or both"
            )
        if self.then not in ACTIONS:
            raise InvalidDeadline(
                f"Deadline.then: expected 'deny' or 'escalate', got {self.then!r}"
            )
        if (
            self.after is not None
            and self.remind_after is not None
            and self.remind_after >= self.after
        ):
            raise InvalidDeadline(
                f"Deadline.remind_after: the reminder ({duration_text(self.remind_after)})"
                f" must come before the deadline ({duration_text(self.after)})"
            )
        if self.then == "escalate":
            self._check_escalation()
        elif self.escalate_to or self.extend_by is not None:
            field_name = "escalate_to" if self.escalate_to else "extend_by"
            raise InvalidDeadline(
                f"Deadline.{field_name}: only a deadline with then='escalate' escalates"
            )

    def _check_escalation(self) -> None:
        if self.after is None:
            raise InvalidDeadline("Deadline.after: an escalation needs a deadline")
        if not isinstance(self.escalate_to, str) or not ESCALATION_TARGET.fullmatch(
            self.escalate_to
        ):
            raise InvalidDeadline(
                "Deadline.escalate_to: expected 'perm:<app_label.codename>' or "
                f"'group:<name>', got {self.escalate_to!r}"
            )
        if self.extend_by is None:
            raise InvalidDeadline(
                "Deadline.extend_by: an escalation gives the people it reaches time "
                "(a timedelta)"
            )

    @property
    def longest_wait(self) -> timedelta:
        """How long a call may wait for a person at most: to the deadline, after an
        escalation's extension — or to the reminder, when there is no deadline."""
        wait = self.after or self.remind_after
        assert wait is not None  # __post_init__ saw one
        return wait + (self.extend_by or timedelta(0))


@dataclass(frozen=True, slots=True)
class DeadlineRules:
    """An agent's deadlines: its default, and those by tool path (see the module
    docstring)."""

    default: Deadline | None = None
    by_path: Mapping[str, Deadline] = field(default_factory=dict)

    def for_call(self, tool_name: str, agent_path: Sequence[str]) -> Deadline | None:
        """The deadline of a call of ``tool_name`` made inside ``agent_path``: the most
        specific path key, then the default."""
        path = [*agent_path, tool_name]
        for end in range(len(path), 0, -1):
            found = self.by_path.get("/".join(path[:end]))
            if found is not None:
                return found
        return self.default

    def named(self) -> list[tuple[str, Deadline]]:
        """Every deadline, named as configured (``deadline``, ``deadlines['path']``)."""
        named = [("deadline", self.default)] if self.default else []
        return named + [(f"deadlines[{p!r}]", d) for p, d in self.by_path.items()]


def duration_text(duration: timedelta) -> str:
    """``4 hours``, ``1 hour 30 minutes``, ``2 seconds``: the two largest units, rounded
    to the smaller one (a sweep acts a few seconds after a deadline, not to the second)."""
    seconds = max(1, round(duration.total_seconds()))
    for index, (_name, size) in enumerate(_UNITS):
        if seconds >= size:
            finer = _UNITS[min(index + 1, len(_UNITS) - 1)][1]
            seconds = round(seconds / finer) * finer
            break
    parts = []
    for name, size in _UNITS:
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count} {name}{'' if count == 1 else 's'}")
    return " ".join(parts[:2])


def timeout_reason(waited: timedelta) -> str:
    """What a timed-out call is denied with: the model reads it, the chat shows it."""
    return f"{TIMED_OUT}: nobody decided within {duration_text(waited)}."


def escalation_label(target: str) -> str:
    """Who an escalation went to, for people: ``Finance leads`` for ``group:Finance
    leads``, ``holders of app.codename`` for ``perm:app.codename``."""
    kind, _, name = target.partition(":")
    return name if kind == "group" else f"holders of {name}"
