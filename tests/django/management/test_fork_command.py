"""``manage.py deuz fork``: the new run's id printed, the edits, and the exit codes
(2 bad arguments, 3 not permitted, 1 unknown run or a taken id) — nothing written when
it refuses."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from deuz_django.models import Run
from deuz_django.runs.continuing import join_handed_off
from tests.django.fork_support import asking, pending
from tests.django.processes import run_manage
from tests.django.run_support import background_leg, history

pytestmark = background_leg


def deuz(*args: str) -> str:
    out = io.StringIO()
    call_command("deuz", *args, stdout=out)
    join_handed_off(timeout=60)
    return out.getvalue().strip()


def refused(*args: str) -> CommandError:
    with pytest.raises(CommandError) as caught:
        deuz(*args)
    return caught.value


def test_fork_prints_the_new_runs_id_and_the_fork_is_the_users(ann: Any) -> None:
    parent = asking(ann)
    fork_id = deuz("fork", parent.run_id, "--step", "0", "--as", "ann")
    fork = Run.objects.get(run_id=fork_id)
    assert (fork.owner, fork.forked_from, fork.forked_at_step) == (ann, parent, 0)


def test_fork_takes_a_new_message(ann: Any) -> None:
    parent = asking(ann)
    fork_id = deuz(
        "fork", parent.run_id, "--step", "0", "--message", "Tidy less.", "--as", "ann"
    )
    fork = Run.objects.get(run_id=fork_id)
    assert [m.text for m in history(fork) if m.role == "user"] == ["Tidy less."]


def test_fork_takes_a_calls_new_input_and_an_id(ann: Any) -> None:
    parent = asking(ann)
    options = ["--step", "1", "--with-turn", "--tool-call", "f2", "--as", "ann"]
    input_ = ["--input", '{"to": "bob@example.com"}', "--fork-run-id", "cli-fork"]
    assert deuz("fork", parent.run_id, *options, *input_) == "cli-fork"
    fork = Run.objects.get(run_id="cli-fork")
    assert pending(fork).input == {"to": "bob@example.com"}


def test_an_operator_fork_stays_the_parent_owners(ann: Any) -> None:
    parent = asking(ann)
    fork_id = deuz("fork", parent.run_id, "--step", "1", "--operator", "ops")
    assert Run.objects.get(run_id=fork_id).owner == ann


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["--step", "9", "--as", "ann"], 2, "--step:"),
        (
            ["--step", "1", "--with-turn", "--message", "x", "--as", "ann"],
            2,
            "--message:",
        ),
        (["--step", "1", "--tool-call", "f2", "--as", "ann"], 2, "--tool-call and"),
        (
            [
                "--step",
                "1",
                "--with-turn",
                "--tool-call",
                "f2",
                "--input",
                "{",
                "--as",
                "ann",
            ],
            2,
            "--input: not JSON",
        ),
        (
            [
                "--step",
                "1",
                "--with-turn",
                "--tool-call",
                "f2",
                "--input",
                "{}",
                "--as",
                "ann",
            ],
            2,
            "--input:",
        ),
        (["--step", "1", "--as", "nobody"], 2, "No user 'nobody'"),
        (["--step", "1", "--as", "viewer"], 3, "viewer may not fork"),
        (["--step", "1", "--as", "bob"], 1, "No run"),
        (
            ["--step", "1", "--fork-run-id", "PARENT", "--as", "ann"],
            1,
            "already exists",
        ),
    ],
)
def test_refusals_exit_with_the_commands_codes_and_write_nothing(
    make_user: Callable[..., Any], ann: Any, args: list[str], code: int, says: str
) -> None:
    make_user("bob")
    make_user("viewer", "deuz_django.view_run", staff=True)
    parent = asking(ann)
    args = [parent.run_id if a == "PARENT" else a for a in args]
    error = refused("fork", parent.run_id, *args)
    assert error.returncode == code
    assert says in str(error)
    assert Run.objects.count() == 1


def test_unknown_runs_and_missing_arguments_exit_as_in_a_real_process(ann: Any) -> None:
    missing = run_manage("deuz", "fork", "no-such-run", "--step", "0", "--as", "ann")
    assert missing.returncode == 1
    assert "No run 'no-such-run'." in missing.stderr
    usage = run_manage("deuz", "fork", "no-such-run", "--as", "ann")
    assert usage.returncode == 2
    assert "--step" in usage.stderr
