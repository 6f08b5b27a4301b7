"""``deuz replay RUN_ID [--agent NAME] [--system TEXT] (--as USERNAME | --operator NAME)``:
replay a completed or stopped run with another agent and/or system prompt, feeding its
recorded tool outcomes back instead of executing any tool (:func:`deuz_django.services.replay_run`).

It prints the replay's run id. The replay's first leg runs like any other run's: queued for
a worker, or — with the immediate backend — in this process, which exits once it ended.
``--as`` replays with that user's permissions (the replay is theirs); ``--operator`` without
the user rules, recorded on the replay with NAME.
"""

from __future__ import annotations

from argparse import _SubParsersAction
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from .. import services
from ..exceptions import NotPermitted, RunNotReplayable
from .deciders import ShellDecider
from .output import NOT_PERMITTED, RUN_ERROR


def add_replay(actions: _SubParsersAction[Any]) -> None:
    """``replay RUN``: replay a finished run, executing no tool."""
    replay = actions.add_parser(
        "replay",
        help="Replay a completed or stopped run with another agent or system prompt, "
        "feeding its recorded tool outcomes back (no tool executes); prints the "
        "replay's run id.",
    )
    replay.add_argument("run_id")
    replay.add_argument(
        "--agent", help="A registered agent to replay with (default: the run's)."
    )
    replay.add_argument(
        "--system",
        metavar="TEXT",
        help="The system prompt to replay with (default: the agent's own).",
    )
    replayer = replay.add_mutually_exclusive_group(required=True)
    replayer.add_argument(
        "--as",
        dest="as_user",
        metavar="USERNAME",
        help="Replay as this user, with their permissions (the replay is theirs).",
    )
    replayer.add_argument(
        "--operator",
        metavar="NAME",
        help="An operator replay (no user permission rules), recorded with NAME.",
    )


class ReplayAction(BaseCommand):
    """The ``replay`` action of ``manage.py deuz``."""

    def handle_replay(
        self,
        *,
        run_id: str,
        agent: str | None,
        system: str | None,
        as_user: str | None,
        operator: str | None,
        **options: Any,
    ) -> None:
        replayer = ShellDecider.named(
            as_user=as_user, operator=operator, recorded="recorded on the replay"
        )
        try:
            replay = services.replay_run(
                run_id,
                user=replayer.user,
                agent=agent,
                system=system,
                operator=replayer.operator,
            )
        except NotPermitted as error:
            raise CommandError(
                f"{as_user} may not replay run '{run_id}': {error}",
                returncode=NOT_PERMITTED,
            ) from None
        except RunNotReplayable as error:
            raise CommandError(str(error), returncode=RUN_ERROR) from None
        self.stdout.write(replay.run_id)
