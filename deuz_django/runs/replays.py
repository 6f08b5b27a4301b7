"""Replays: a finished run's steps again — with another agent (a new model or version)
and/or another system prompt — the original's recorded tool outcomes fed back instead of
executing anything (:mod:`deuz_django.core.replay`).

A replay is a new root run of whoever asked for it, ``replay_of`` its original, with what
was asked to change in ``replay_options``. Its first checkpoint is the original's input
(the messages before the first assistant turn) under the replay's system prompt; from
there it runs like any run — claimed, leased, recovered after a crash — except that every
leg builds its agent with replay tools (:func:`replay_spec`): no tool executes and nothing
waits for a person. A call the original has no outcome of ends the leg
(:class:`~deuz_django.core.ReplayDiverged`), and the leg stops the run with that reason.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Any

from .. import audit
from ..core import (
    Comparison,
    Message,
    RecordedOutcomes,
    ToolResultPart,
    compare_transcripts,
    replay_input,
    replay_tools,
)
from ..core.durable.codec import decode_json
from ..exceptions import NotAReplay, NotPermitted, RunNotFound, RunNotReplayable
from ..models import Run, RunStatus, RunStep
from ..models.audit import AuditAction
from ..models.visibility import Person
from ..permissions import can_replay_run, can_view_run, is_signed_in
from ..registry import AgentSpec, load_agent
from ..storage.db import bounded_atomic
from ..storage.store import DjangoSessionStore
from .transcript import run_messages

REPLAYABLE = (RunStatus.COMPLETED, RunStatus.STOPPED)


def create_replay(
    run_id: str,
    *,
    user: Person | None,
    agent: str | None = None,
    system: str | None = None,
    operator: str = "",
) -> Run:
    """Record a replay of ``run_id`` for ``user`` (or ``operator``, a name from a shell:
    no user rules) with its first checkpoint, ready for its first leg. ``agent`` names
    another registered agent (default: the original's), ``system`` another system
    prompt (default: the agent's own; blank is none given). Nothing is written when it
    raises: :class:`RunNotFound` (not theirs to see), :class:`NotPermitted`,
    :class:`RunNotReplayable` (not finished), :class:`~deuz_django.exceptions.UnknownAgent`."""
    original = _original(run_id, user, operator)
    if original.status not in REPLAYABLE:
        raise RunNotReplayable(
            f"Run '{run_id}' is {original.status}; only a completed or stopped run "
            "can be replayed."
        )
    spec = load_agent(agent or original.agent)
    system = (system or "").strip() or None
    history = replay_input(run_messages(original), system=system or spec.system)
    if not any(m.role == "user" for m in history):
        raise RunNotReplayable(f"Run '{run_id}' has no input to replay.")
    options: dict[str, Any] = {"agent": agent, "system": system}
    if operator:
        options["operator"] = operator
    replay_id = uuid.uuid4().hex
    with bounded_atomic():
        replay = DjangoSessionStore().start(
            replay_id,
            history,
            agent=agent or original.agent,
            owner=user if is_signed_in(user) and not operator else None,
            title=f"Replay of {original.title or original.run_id}"[:200],
            replay_of=original,
            replay_options=options,
        )
        audit.append(
            AuditAction.REPLAY,
            user=None if operator else user,
            operator=operator,
            run_id=original.run_id,
            details={"replay": replay_id, "agent": replay.agent, "system": system},
        )
    return replay


def _original(run_id: str, user: Person | None, operator: str) -> Run:
    if operator:
        found = Run.objects.roots().named(run_id).first()
        if found is None:
            raise RunNotFound(f"No run '{run_id}'.")
        return found
    if not is_signed_in(user):
        raise NotPermitted("Sign in to replay runs.")
    original = Run.objects.visible(user, run_id)
    if not can_replay_run(user, original):
        raise NotPermitted("You may not replay this run.")
    return original


def replay_spec(run: Run, spec: AgentSpec) -> AgentSpec:
    """The agent a leg of ``run`` runs: for a replay, with replay tools (and no
    deadlines: nothing waits for a person); any other run's as it is."""
    if run.replay_options is None:
        return spec
    original = run.replay_of
    if original is None:
        raise RunNotReplayable(
            f"The run replay '{run.run_id}' replays was deleted: its recorded tool "
            "outcomes are gone, and a replay never executes a tool."
        )
    recorded = RecordedOutcomes.from_messages(run_messages(original))
    return replace(
        spec,
        tools=replay_tools(spec.tool_set, recorded),
        deadline=None,
        deadlines={},
    )


def replay_transcript(run: Run) -> tuple[Message, ...]:
    """The replay's history, with the turn it diverged on (or is working on): that
    turn is never checkpointed — its leg ended in it — but the step journal keeps it,
    with the outcomes its other calls were given."""
    history = run_messages(run)
    step = (
        RunStep.objects.filter(run=run, basis=len(history))
        .order_by("-step_index")
        .first()
    )
    if step is None:
        return history
    turn = Message.from_json(decode_json(step.message))
    results = tuple(
        ToolResultPart(
            call.tool_call_id, decode_json(call.result), call.is_error or None
        )
        for call in step.calls.filter(finished=True)
    )
    return (*history, turn, *((Message("tool", results),) if results else ()))


@dataclass(frozen=True, slots=True)
class ReplayComparison:
    """A replay beside its original, step by step."""

    original: Run
    replay: Run
    comparison: Comparison

    @property
    def stopped(self) -> str:
        """Why the replay stopped (empty: it did not)."""
        if self.replay.status != RunStatus.STOPPED:
            return ""
        return self.replay.stop_description


def compare_replay(user: Person | None, replay: Run) -> ReplayComparison:
    """``replay`` lined up with its original; both must be visible to ``user``
    (:class:`NotAReplay` for a run that replays nothing, or whose original is gone)."""
    if replay.replay_options is None:
        raise NotAReplay(f"Run '{replay.run_id}' is not a replay: nothing to compare.")
    original = replay.replay_of
    if original is None:
        raise NotAReplay(
            f"The run replay '{replay.run_id}' replays was deleted: nothing to compare."
        )
    if not can_view_run(user, original):
        raise RunNotFound("You may not see the run this replays.")
    comparison = compare_transcripts(run_messages(original), replay_transcript(replay))
    return ReplayComparison(original, replay, comparison)
