"""The legs :func:`~deuz_django.runs.continuing.hand_off` gave this process to run (the
immediate backend): each known until it ends, so a test or a script can wait for them
(:func:`join_handed_off`), and run in a thread of its own when no server's event loop
takes it (:func:`start_in_thread`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import Future, wait

from asgiref.sync import async_to_sync
from django.db import connections

from ..storage.leases import Lease
from . import draining
from .claims import run_legs
from .outcomes import LegOutcome

logger = logging.getLogger("deuz_django")

_handed_off: set[Future[LegOutcome]] = set()
_handed_off_lock = threading.Lock()


def track(ended: Future[LegOutcome]) -> None:
    """Know the handed-off leg that ``ended`` settles until it ends."""
    with _handed_off_lock:
        _handed_off.add(ended)
    ended.add_done_callback(_forget)


def join_handed_off(timeout: float | None = None) -> None:
    """Wait until every leg this process handed off
    (:func:`~deuz_django.runs.continuing.hand_off`) has ended — what a test does before
    it looks at a run a request resumed. ``TimeoutError`` after ``timeout`` seconds."""
    with _handed_off_lock:
        legs = list(_handed_off)
    _done, running = wait(legs, timeout)
    if running:
        raise TimeoutError(f"{len(running)} handed-off leg(s) still running")


async def ajoin_handed_off() -> None:
    """:func:`join_handed_off` for async callers (bound it with ``asyncio.timeout``):
    the legs handed to this event loop go on while it waits."""
    with _handed_off_lock:
        legs = [asyncio.wrap_future(leg) for leg in _handed_off]
    if legs:
        await asyncio.wait(legs)


def start_in_thread(lease: Lease, ended: Future[LegOutcome]) -> None:
    """The leg in a thread of its own. Not a daemon: an exiting interpreter (a command,
    a script) waits for it, as a SIGTERM drain does."""
    draining.install()  # from the main thread (a script, a sync server's worker)
    threading.Thread(
        target=_run_in_thread, args=(lease, ended), name=f"deuz-leg-{lease.run_id}"
    ).start()


def _run_in_thread(lease: Lease, ended: Future[LegOutcome]) -> None:
    try:
        ended.set_result(_legs_then_close(lease))
    except BaseException as error:
        logger.error("deuz: leg of run %s failed", lease.run_id, exc_info=error)
        ended.set_exception(error)


def _legs_then_close(lease: Lease) -> LegOutcome:
    """The run's legs, then this thread's database connections closed: the legs'
    database calls ran in this thread (asgiref's ``async_to_sync`` runs them in the
    thread that called it)."""
    try:
        return async_to_sync(run_legs)(lease)
    finally:
        connections.close_all()


def _forget(leg: Future[LegOutcome]) -> None:
    with _handed_off_lock:
        _handed_off.discard(leg)
