"""A server-like process of the crash sweep, killed by the test at a random moment.

It does what daphne does with a WebSocket's ``start`` frame — continues each run it is
given as a leg on its event loop — and runs the recovery sweeper a server runs, so the
runs earlier processes left behind are healed by it with no operator (on that loop once
a leg ran there; given no runs, through ``django.tasks``, as a worker's sweeper does).

Two hooks stop it at a moment a test could not hit by sending a signal:

- ``DEUZ_TEST_KILL_AFTER_FINAL=1``: it SIGKILLs itself right after saving a run's final
  (``completed``) checkpoint, before the leg journals its end;
- ``DEUZ_TEST_STOP_IN_SAVE=<run_id>:<step>``: it SIGSTOPs itself inside the transaction
  that saves that checkpoint, once the run's row is written (and locked: PostgreSQL
  shows the session ``idle in transaction``), after recording the effect
  ``stopped:<run_id>:<step>``; a SIGCONT lets it go on.

    python -m tests.reliability.crash_child RUN_ID...
"""

from __future__ import annotations

import asyncio
import faulthandler
import os
import signal
import sys
from typing import Any

import django


def kill_after_the_final_checkpoint() -> None:
    from deuz_django.storage.store import DjangoSessionStore

    save = DjangoSessionStore.save

    def save_then_die(self: DjangoSessionStore, checkpoint: Any) -> None:
        save(self, checkpoint)
        if checkpoint.status == "completed":
            os.kill(os.getpid(), signal.SIGKILL)

    DjangoSessionStore.save = save_then_die  # type: ignore[method-assign]


def stop_inside_the_checkpoint_transaction(run_id: str, step: int) -> None:
    """The save of that checkpoint takes the ORM's path (a transaction: BEGIN, the run
    row, its messages, COMMIT) rather than the one-statement append, as a suspending or
    rewriting save does; the process stops between the row and the commit."""
    from django.db import connection

    from deuz_django.storage.store import DjangoSessionStore
    from tests.django.agents import record_effect

    appends, write_run = DjangoSessionStore._appends, DjangoSessionStore._write_run
    stopped = False

    def the_orms_path(remembered: Any, checkpoint: Any) -> bool:
        if (checkpoint.run_id, checkpoint.step_index) == (run_id, step):
            return False
        return appends(remembered, checkpoint)

    def write_then_stop(
        self: DjangoSessionStore, pk: int, checkpoint: Any, **expected: Any
    ) -> bool:
        nonlocal stopped
        written = write_run(self, pk, checkpoint, **expected)
        target = (checkpoint.run_id, checkpoint.step_index) == (run_id, step)
        if target and written and not stopped and connection.in_atomic_block:
            stopped = True
            record_effect(f"stopped:{run_id}:{step}")
            os.kill(os.getpid(), signal.SIGSTOP)
        return written

    DjangoSessionStore._appends = staticmethod(the_orms_path)  # type: ignore[method-assign]
    DjangoSessionStore._write_run = write_then_stop  # type: ignore[method-assign]


async def main(run_ids: list[str]) -> None:
    from deuz_django.runs import continuing as continuation
    from deuz_django.runs import recovery

    if os.environ.get("DEUZ_TEST_KILL_AFTER_FINAL"):
        kill_after_the_final_checkpoint()
    if stop_at := os.environ.get("DEUZ_TEST_STOP_IN_SAVE"):
        run_id, _, step = stop_at.rpartition(":")
        stop_inside_the_checkpoint_transaction(run_id, int(step))
    for run_id in run_ids:
        await continuation.astart_here(run_id)
    recovery.start_sweeper()
    await asyncio.Event().wait()  # until the test kills this process


if __name__ == "__main__":
    faulthandler.register(signal.SIGUSR1)  # the test asks for stacks when stuck
    django.setup()
    asyncio.run(main(sys.argv[1:]))
