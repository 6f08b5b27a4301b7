"""A server-like process of the crash sweep, killed by the test at a random moment.

It does what daphne does with a WebSocket's ``start`` frame — continues each run it is
given as a leg on its event loop — and runs the recovery sweeper a server runs, so the
runs earlier processes left behind are healed by it with no operator (on that loop once
a leg ran there; given no runs, through ``django.tasks``, as a worker's sweeper does).

    python -m tests.reliability.crash_child RUN_ID...
"""

from __future__ import annotations

import asyncio
import faulthandler
import signal
import sys

import django


async def main(run_ids: list[str]) -> None:
    from deuz_django import continuation, recovery

    for run_id in run_ids:
        await continuation.acontinue_run(run_id, in_process=True)
    recovery.start_sweeper()
    await asyncio.Event().wait()  # until the test kills this process


if __name__ == "__main__":
    faulthandler.register(signal.SIGUSR1)  # the test asks for stacks when stuck
    django.setup()
    asyncio.run(main(sys.argv[1:]))
