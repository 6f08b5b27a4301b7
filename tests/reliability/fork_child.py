"""A process that forks a run and stops inside the fork's transaction, for the test to
kill it there.

    python -m tests.reliability.fork_child PARENT_RUN_ID STEP FORK_RUN_ID

It forks the run at ``STEP`` as an operator, keeping the step's turn, and SIGSTOPs
itself once the fork's run row, history and journal are written, before the
transaction commits, after recording the effect ``forking:<fork run id>``.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import django


def stop_inside_the_fork() -> None:
    from deuz_django.storage import forking
    from tests.django.agents import record_effect

    write_steps = forking._write_steps

    def write_then_stop(run: Any, steps: Any) -> None:
        write_steps(run, steps)
        record_effect(f"forking:{run.run_id}")
        os.kill(os.getpid(), signal.SIGSTOP)

    forking._write_steps = write_then_stop


def main(parent: str, step: str, fork_id: str) -> None:
    from deuz_django import services

    stop_inside_the_fork()
    services.fork_run(
        parent,
        step=int(step),
        operator="fork-test",
        with_turn=True,
        fork_run_id=fork_id,
    )


if __name__ == "__main__":
    django.setup()
    main(*sys.argv[1:])
