"""The arguments of ``manage.py deuz``: an action per subcommand (runs, show, resume, stop,
fork, replay, input, recover, sweep, prune, audit), each with its own options; bad arguments exit
with
argparse's 2."""

from __future__ import annotations

from argparse import ArgumentParser, ArgumentTypeError, _SubParsersAction
from typing import Any, NoReturn

from django.core.management.base import CommandError, CommandParser

from ..models import RunStatus
from .auditing import add_audit
from .delegating import add_delegation
from .output import BAD_ARGUMENTS
from .replaying import add_replay


class Parser(CommandParser):
    """Bad arguments exit with argparse's 2, also under ``call_command`` (Django uses 1)."""

    def error(self, message: str) -> NoReturn:
        if self.called_from_command_line:
            super().error(message)
        raise CommandError(f"Error: {message}", returncode=BAD_ARGUMENTS)


def add_actions(parser: ArgumentParser) -> None:
    """Every action of the command, a subparser each."""
    actions = parser.add_subparsers(
        dest="action", metavar="ACTION", required=True, parser_class=Parser
    )
    for add in (
        _runs,
        _show,
        _resume,
        _stop,
        _fork,
        add_replay,
        _input,
        add_delegation,
        _recover,
        _sweep,
        _prune,
        add_audit,
    ):
        add(actions)


def _runs(actions: _SubParsersAction[Any]) -> None:
    """``runs``: list runs."""
    runs = actions.add_parser("runs", help="List runs.")
    runs.add_argument("--status", choices=RunStatus.values)
    runs.add_argument("--agent")
    runs.add_argument("--owner", help="Owner's username.")
    runs.add_argument("--json", action="store_true", help="One JSON object per line.")
    runs.add_argument("--limit", type=int, default=100)


def _show(actions: _SubParsersAction[Any]) -> None:
    """``show RUN``: a run's transcript and approvals."""
    show = actions.add_parser(
        "show", help="Show a run's transcript (sub-agents too) and approvals."
    )
    show.add_argument("run_id")


def _resume(actions: _SubParsersAction[Any]) -> None:
    """``resume RUN``: record verdicts, then run the next leg here."""
    resume = actions.add_parser(
        "resume", help="Record verdicts, then run the next leg."
    )
    resume.add_argument("run_id")
    resume.add_argument("--approve", action="append", default=[], metavar="APPROVAL_ID")
    resume.add_argument("--deny", action="append", default=[], metavar="APPROVAL_ID")
    resume.add_argument("--reason", default="", help="Reason recorded with --deny.")
    resume.add_argument(
        "--deny-remaining",
        action="store_true",
        help="Deny every approval still undecided instead of refusing to resume.",
    )
    decider = resume.add_mutually_exclusive_group()
    decider.add_argument(
        "--as",
        dest="as_user",
        metavar="USERNAME",
        help="Decide as this user, with their permissions.",
    )
    decider.add_argument(
        "--operator",
        metavar="NAME",
        help="An operator override: no user permission rules (the token is still "
        "checked); recorded as such, with NAME.",
    )


def _stop(actions: _SubParsersAction[Any]) -> None:
    """``stop RUN``: stop a run for good."""
    stop = actions.add_parser(
        "stop",
        help="Stop a run for good: now, or before its leg's next model call or "
        "tool execution, in whichever process holds it.",
    )
    stop.add_argument("run_id")
    stop.add_argument("--reason", default="", help="Why (kept with the run).")
    stopper = stop.add_mutually_exclusive_group(required=True)
    stopper.add_argument(
        "--as",
        dest="as_user",
        metavar="USERNAME",
        help="Stop as this user, with their permissions.",
    )
    stopper.add_argument(
        "--operator",
        metavar="NAME",
        help="An operator stop (no user permission rules), recorded with NAME.",
    )


def _fork(actions: _SubParsersAction[Any]) -> None:
    """``fork RUN --step N``: a new run from a step of another."""
    fork = actions.add_parser(
        "fork",
        help="Fork a run at a step: a new run from the history that step answered, "
        "continued in the background. Prints the new run's id.",
    )
    fork.add_argument("run_id")
    fork.add_argument("--step", type=int, required=True, metavar="N")
    fork.add_argument(
        "--with-turn",
        action="store_true",
        help="Keep the step's model turn (its calls are asked for again) instead of "
        "asking the model anew.",
    )
    edit = fork.add_mutually_exclusive_group()
    edit.add_argument(
        "--message",
        metavar="TEXT",
        help="The new text of the user message that started the step.",
    )
    edit.add_argument(
        "--tool-call",
        metavar="ID",
        help="With --with-turn and --input: the call of the kept turn to change.",
    )
    fork.add_argument("--input", metavar="JSON", help="The call's new input, as JSON.")
    fork.add_argument(
        "--fork-run-id", metavar="ID", help="The fork's run id (default: a new one)."
    )
    forker = fork.add_mutually_exclusive_group(required=True)
    forker.add_argument(
        "--as",
        dest="as_user",
        metavar="USERNAME",
        help="Fork as this user, with their permissions (the fork is theirs).",
    )
    forker.add_argument(
        "--operator",
        metavar="NAME",
        help="An operator fork (no user permission rules); the fork stays the "
        "parent owner's.",
    )


def _input(actions: _SubParsersAction[Any]) -> None:
    """``input RUN TEXT``: steer a run."""
    steer = actions.add_parser(
        "input",
        help="Send a run input: delivered at its next step boundary as a user message.",
    )
    steer.add_argument("run_id")
    steer.add_argument("text")
    steer.add_argument(
        "--input-id",
        metavar="ID",
        help="Your id for the input: sent again, nothing is queued twice.",
    )
    sender = steer.add_mutually_exclusive_group(required=True)
    sender.add_argument(
        "--as",
        dest="as_user",
        metavar="USERNAME",
        help="Send as this user, with their permissions.",
    )
    sender.add_argument(
        "--operator",
        metavar="NAME",
        help="An operator's input (no user permission rules), recorded with NAME.",
    )


def _recover(actions: _SubParsersAction[Any]) -> None:
    """``recover``: re-drive runs a dead process left."""
    recover = actions.add_parser(
        "recover", help="Re-drive runs whose process died mid-leg (lease expired)."
    )
    recover.add_argument("--older-than", type=float, default=60.0, metavar="SECONDS")
    recover.add_argument("--dry-run", action="store_true")


def _sweep(actions: _SubParsersAction[Any]) -> None:
    """``sweep``: a process that only sweeps, until SIGTERM or Ctrl-C."""
    sweep = actions.add_parser(
        "sweep",
        help="Sweep (recovery, deadlines, notification retries) every SECONDS until "
        "stopped.",
    )
    sweep.add_argument(
        "--every",
        type=_positive_seconds,
        metavar="SECONDS",
        help="Seconds between sweeps (default: DEUZ['RECOVERY_INTERVAL']).",
    )


def _positive_seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        raise ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not seconds > 0:
        raise ArgumentTypeError(f"must be more than 0 seconds: {text!r}")
    return seconds


def _prune(actions: _SubParsersAction[Any]) -> None:
    """``prune``: delete completed runs and old journals."""
    prune = actions.add_parser(
        "prune",
        help="Delete completed runs, and the stream journals of completed runs older "
        "than DEUZ['STREAM_RETENTION_DAYS'].",
    )
    prune.add_argument("--completed-before", type=float, required=True, metavar="DAYS")
    prune.add_argument("--dry-run", action="store_true")
