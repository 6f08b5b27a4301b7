"""A server-like process of the crash sweep, killed by the test at a random moment.

It does what daphne does with a WebSocket's ``start`` frame — continues each run it is
given as a leg on its event loop — and runs the recovery sweeper a server runs, so the
runs earlier processes left behind are healed by it with no operator (on that loop once
a leg ran there; given no runs, through ``django.tasks``, as a worker's sweeper does).

A hook stops it at a moment a test could not hit by sending a signal:
``DEUZ_TEST_KILL_AFTER_FINAL=1`` makes it SIGKILL itself right after saving a run's
final (``completed``) checkpoint, before the leg journals its end.

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
    from deuz_django.store import DjangoSessionStore

    save = DjangoSessionStore.save

    def save_then_die(self: DjangoSessionStore, checkpoint: Any) -> None:
        save(self, checkpoint)
        if checkpoint.status == "completed":
            os.kill(os.getpid(), signal.SIGKILL)

    DjangoSessionStore.save = save_then_die  # type: ignore[method-assign]


async def main(run_ids: list[str]) -> None:
    from deuz_django import continuation, recovery

    if os.environ.get("DEUZ_TEST_KILL_AFTER_FINAL"):
        kill_after_the_final_checkpoint()
    for run_id in run_ids:
        await continuation.acontinue_run(run_id, in_process=True)
    recovery.start_sweeper()
    await asyncio.Event().wait()  # until the test kills this process


if __name__ == "__main__":
    faulthandler.register(signal.SIGUSR1)  # the test asks for stacks when stuck
    django.setup()
    asyncio.run(main(sys.argv[1:]))
