"""``manage.py deuz replay``: prints the replay's run id; the replay executes no tool; bad
arguments, unknown agents, unfinished runs and refused users exit with their codes, and
nothing is written."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User

from deuz_django.models import Run, RunStatus
from deuz_django.runs.continuing import join_handed_off
from tests.django.management.test_command import deuz, fails
from tests.django.replay_support import finished
from tests.django.run_support import suspended

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_replay_prints_its_run_id_and_executes_no_tool(
    ann: User, effects: Callable[[], list[str]]
) -> None:
    original = finished(ann)
    printed = deuz(
        "replay",
        original.run_id,
        "--agent",
        "mailing_v2",
        "--system",
        "Be brief.",
        "--as",
        "ann",
    )
    join_handed_off(timeout=60)
    replay = Run.objects.get(replay_of=original)
    assert printed == f"{replay.run_id}\n"
    assert (replay.status, replay.owner, replay.agent) == (
        RunStatus.COMPLETED,
        ann,
        "mailing_v2",
    )
    assert replay.replay_options == {"agent": "mailing_v2", "system": "Be brief."}
    assert sorted(effects()) == ["echo:hi", "send_email:ann@example.com"]


def test_an_operator_replays_any_run_and_is_recorded(ann: User) -> None:
    original = finished(ann)
    deuz("replay", original.run_id, "--operator", "oncall")
    join_handed_off(timeout=60)
    replay = Run.objects.get(replay_of=original)
    assert replay.owner is None
    assert replay.replay_options["operator"] == "oncall"


def test_a_replay_needs_a_replayer(ann: User) -> None:
    original = finished(ann)
    assert fails("replay", original.run_id).returncode == 2
    assert fails("replay", original.run_id, "--operator", " ").returncode == 2
    assert fails("replay", original.run_id, "--as", "nobody").returncode == 2
    assert Run.objects.count() == 1


def test_an_unknown_agent_or_an_unfinished_run_exits_1_and_writes_nothing(
    ann: User,
) -> None:
    original = finished(ann)
    unknown = fails("replay", original.run_id, "--agent", "nope", "--as", "ann")
    assert unknown.returncode == 1
    assert str(unknown).startswith("Unknown agent 'nope' (registered: ")
    waiting = suspended("mailing", owner=ann)
    not_done = fails("replay", waiting.run_id, "--as", "ann")
    assert not_done.returncode == 1
    assert "is suspended; only a completed or stopped run" in str(not_done)
    assert Run.objects.count() == 2


def test_other_users_need_replay_run(ann: User, make_user: Callable[..., User]) -> None:
    original = finished(ann)
    make_user("bob")
    assert fails("replay", original.run_id, "--as", "bob").returncode == 1  # unseen
    make_user("viewer", "deuz_django.view_run", staff=True)
    denied = fails("replay", original.run_id, "--as", "viewer")
    assert denied.returncode == 3
    assert "viewer may not replay run" in str(denied)
    assert Run.objects.count() == 1
