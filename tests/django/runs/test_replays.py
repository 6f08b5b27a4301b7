"""Replaying a finished run through the run service: the recorded tool outcomes are fed
back and no tool executes; another agent and system prompt reach the model; a call the
original never made stops the replay; who may replay whose run (deuz_django.runs.replays)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User

from deuz_django import services
from deuz_django.core import Message, ToolResultPart
from deuz_django.exceptions import (
    NotAReplay,
    NotPermitted,
    RunNotFound,
    RunNotReplayable,
    UnknownAgent,
)
from deuz_django.models import Run, RunStatus
from deuz_django.runs.replays import compare_replay, create_replay
from tests.django import replay_agents
from tests.django.replay_support import finished, replayed
from tests.django.run_support import history, suspended

pytestmark = pytest.mark.django_db(transaction=True)

# What the original executed, sorted: its two calls run side by side once approved.
ORIGINAL_EFFECTS = ["echo:hi", "send_email:ann@example.com"]


def _results(run: Run) -> list[ToolResultPart]:
    return [
        part
        for message in history(run)
        if message.role == "tool"
        for part in message.parts
        if isinstance(part, ToolResultPart)
    ]


def test_a_replay_executes_no_tool_and_is_fed_the_recorded_outcomes(
    ann: User, effects: Callable[[], list[str]]
) -> None:
    original = finished(ann)
    assert sorted(effects()) == ORIGINAL_EFFECTS
    replay = replayed(original, ann, agent="mailing_v2")
    assert (
        sorted(effects()) == ORIGINAL_EFFECTS
    )  # nothing ran again, not even the gated call
    assert (replay.status, replay.last_error) == (RunStatus.COMPLETED, "")
    assert not replay.approvals.exists()  # the gated call asked nobody
    assert (replay.replay_of, replay.owner, replay.agent) == (
        original,
        ann,
        "mailing_v2",
    )
    assert replay.replay_options == {"agent": "mailing_v2", "system": None}
    # The calls came in another order; each got the original's outcome of that call.
    assert [(p.tool_use_id, p.result) for p in _results(replay)] == [
        ("x1", "sent to ann@example.com"),
        ("x2", "hi"),
    ]
    assert history(replay)[-1].text == "Mailed Ann, briefly."


def test_the_other_agent_and_system_prompt_reach_the_model(
    ann: User, effects: Callable[[], list[str]]
) -> None:
    original = finished(ann)
    replay_agents.SEEN.clear()
    replayed(original, ann, agent="mailing_v2")
    replayed(original, ann, agent="mailing_v2", system="Answer in French.")
    first, second = (r.messages for r in replay_agents.SEEN[::2])
    user_input = Message("user", "Refund order A-1 and email Ann.")
    assert first[:2] == (Message("system", "You mail people, briefly."), user_input)
    assert second[:2] == (Message("system", "Answer in French."), user_input)
    assert len(second) == 2  # the original's input, and nothing after it
    # Every leg of the replay saw the prompt: it is the replay's first message.
    assert replay_agents.SEEN[3].messages[0] == Message("system", "Answer in French.")


def test_a_replay_without_another_agent_reuses_the_originals(ann: User) -> None:
    replay = replayed(finished(ann), ann)
    assert (replay.agent, replay.status) == ("mailing", RunStatus.COMPLETED)
    assert compare_replay(ann, replay).comparison.same


def test_a_call_the_original_never_made_stops_the_replay_unexecuted(
    ann: User, effects: Callable[[], list[str]]
) -> None:
    original = finished(ann)
    replay = replayed(original, ann, agent="diverging")
    assert sorted(effects()) == ORIGINAL_EFFECTS
    assert replay.status == RunStatus.STOPPED
    assert replay.last_error == ""  # a stop, not a failure
    assert replay.stop_description == (
        'Stopped by the system: The replayed model asked for send_email({"to": '
        '"bob@example.com"}), which the original run never made; it was not '
        "executed, and the replay stops here."
    )
    compared = compare_replay(ann, replay)
    assert compared.stopped == replay.stop_description
    step = compared.comparison.steps[1]
    assert compared.comparison.steps[0].differences == ("calls",)  # no send_email
    assert step.differences == ("text", "calls")
    assert step.replay is not None
    (call,) = step.replay.calls
    assert (call.tool_name, call.answered, call.only_here) == (
        "send_email",
        False,
        True,
    )


def test_the_comparison_marks_where_the_transcripts_differ(ann: User) -> None:
    original = finished(ann)
    compared = compare_replay(ann, replayed(original, ann, agent="mailing_v2"))
    body = compared.comparison.to_json()
    assert body["firstDivergence"] == 1
    assert [s["differences"] for s in body["steps"]] == [[], ["text"]]
    assert body["steps"][1]["original"]["text"] == "Mailed Ann."
    assert body["steps"][1]["replay"]["text"] == "Mailed Ann, briefly."


def test_only_a_completed_or_stopped_run_is_replayed(ann: User) -> None:
    run = suspended("mailing", owner=ann)
    with pytest.raises(RunNotReplayable, match="is suspended; only a completed"):
        services.replay_run(run.run_id, user=ann)
    assert not Run.objects.exclude(pk=run.pk).exists()


def test_an_unknown_agent_is_refused_and_nothing_is_written(ann: User) -> None:
    original = finished(ann)
    with pytest.raises(UnknownAgent, match="Unknown agent 'nope'"):
        services.replay_run(original.run_id, user=ann, agent="nope")
    assert list(Run.objects.all()) == [original]


def test_other_users_runs_are_not_found_and_staff_need_replay_run(
    ann: User, make_user: Callable[..., User]
) -> None:
    original = finished(ann)
    with pytest.raises(RunNotFound):
        services.replay_run(original.run_id, user=make_user("bob"))
    viewer = make_user("viewer", "deuz_django.view_run", staff=True)
    with pytest.raises(NotPermitted, match="You may not replay this run"):
        services.replay_run(original.run_id, user=viewer)
    with pytest.raises(NotPermitted, match="Sign in"):
        services.replay_run(original.run_id, user=None)
    replayer = make_user(
        "replayer", "deuz_django.view_run", "deuz_django.replay_run", staff=True
    )
    replay = replayed(original, replayer)
    assert (replay.owner, replay.status) == (replayer, RunStatus.COMPLETED)
    assert Run.objects.count() == 2


def test_an_operator_replays_without_user_rules_and_is_recorded(ann: User) -> None:
    replay = replayed(finished(ann), None, operator="oncall")
    assert replay.owner is None
    assert replay.replay_options == {
        "agent": None,
        "system": None,
        "operator": "oncall",
    }
    assert replay.status == RunStatus.COMPLETED


def test_a_run_that_replays_nothing_has_no_comparison(ann: User) -> None:
    with pytest.raises(NotAReplay, match="is not a replay"):
        compare_replay(ann, finished(ann))


def test_a_replay_whose_original_was_deleted_never_runs_a_tool(
    ann: User, effects: Callable[[], list[str]]
) -> None:
    original = finished(ann)
    replay = create_replay(original.run_id, user=ann)
    services.delete_run(original.run_id)
    outcome = services.resume_run(replay.run_id)
    assert outcome.error is not None
    assert "was deleted: its recorded tool outcomes are gone" in outcome.error
    assert sorted(effects()) == ORIGINAL_EFFECTS
