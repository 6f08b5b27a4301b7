"""``deuz fork``: a new run from a step of another, from a shell — through the fork
service every surface calls, as a user under the permission rules or as an operator."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandError

from .. import services
from ..core.durable import ForkEdit, InvalidForkError
from ..exceptions import NotPermitted, RunExists
from ..models import Run
from .deciders import ShellDecider
from .output import BAD_ARGUMENTS, NOT_PERMITTED, RUN_ERROR

# The command's option for each field a refused fork names.
OPTIONS = {
    "step": "--step",
    "withTurn": "--with-turn",
    "edit": "--message / --tool-call",
    "edit.message": "--message",
    "edit.toolCallId": "--tool-call",
    "edit.input": "--input",
    "runId": "--fork-run-id",
}


def fork(
    *,
    run_id: str,
    step: int,
    with_turn: bool,
    message: str | None,
    tool_call: str | None,
    input: str | None,
    fork_run_id: str | None,
    as_user: str | None,
    operator: str | None,
    **common: Any,
) -> Run:
    """Fork ``run_id`` as the command's options say (``common``: those every action
    has); refusals as ``CommandError``\\ s with the command's exit codes. Nothing is
    written when it refuses."""
    forker = ShellDecider.named(
        as_user=as_user,
        operator=operator,
        recorded="recorded in the log as who forked the run",
    )
    if (tool_call is None) != (input is None):
        raise CommandError(
            "--tool-call and --input go together.", returncode=BAD_ARGUMENTS
        )
    try:
        return services.fork_run(
            run_id,
            step=step,
            user=forker.user,
            operator=forker.operator,
            edit=_edit(message, tool_call, input),
            with_turn=with_turn,
            fork_run_id=fork_run_id,
        )
    except InvalidForkError as error:
        option = OPTIONS.get(error.problem.field, error.problem.field)
        raise CommandError(
            f"{option}: {error.problem.message}", returncode=BAD_ARGUMENTS
        ) from None
    except NotPermitted as error:
        raise CommandError(
            f"{as_user} may not fork run '{run_id}': {error}", returncode=NOT_PERMITTED
        ) from None
    except RunExists as error:
        raise CommandError(str(error), returncode=RUN_ERROR) from None


def _edit(
    message: str | None, tool_call: str | None, text: str | None
) -> ForkEdit | None:
    if message is not None:
        return ForkEdit(message=message)
    if tool_call is None or text is None:
        return None
    try:
        value: Any = json.loads(text)
    except ValueError as error:
        raise CommandError(
            f"--input: not JSON ({error})", returncode=BAD_ARGUMENTS
        ) from None
    return ForkEdit(tool_call_id=tool_call, input=value)
