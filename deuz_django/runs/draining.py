"""Graceful shutdown: on SIGTERM (a deploy), a process stops taking new legs, lets its
running legs reach their next boundary within ``SHUTDOWN_GRACE_SECONDS`` (then aborts
them cooperatively), and releases their leases — so another process continues each run at
once, not after its lease lapses. Only then does the server's own SIGTERM handling run.

:func:`install` puts the handler in front of whatever handled SIGTERM before (daphne's
Twisted reactor, a tasks worker, Python's default); a leg calls it as it starts, in
whichever process runs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

from ..conf import deuz_settings
from ..core import AbortController
from ..exceptions import ProcessStopping

logger = logging.getLogger("deuz_django")

# After the grace period, how long aborted legs get to release their leases.
RELEASE_SECONDS = 5.0

_stopping = threading.Event()
_drained = threading.Event()  # the drain is over: SIGTERM may end the process
_legs: dict[str, tuple[AbortController, asyncio.AbstractEventLoop]] = {}
_lock = threading.Lock()


def stopping() -> bool:
    """Whether this process is shutting down (no new leg starts here)."""
    return _stopping.is_set()


def refuse_if_stopping(run_id: str) -> None:
    if _stopping.is_set():
        raise ProcessStopping(run_id)


@contextlib.contextmanager
def leg_running(run_id: str, controller: AbortController) -> Iterator[None]:
    """While a leg runs in this process (on the running event loop): a shutdown can
    stop it."""
    entry = (controller, asyncio.get_running_loop())
    with _lock:
        _legs[run_id] = entry
    try:
        yield
    finally:
        with _lock:
            if _legs.get(run_id) is entry:
                del _legs[run_id]


def stop_at_boundary(run_id: str, controller: AbortController) -> None:
    """Called by a leg after each saved boundary: while shutting down, stop there."""
    if _stopping.is_set() and not controller.signal.aborted:
        controller.abort(ProcessStopping(run_id))


def running_legs() -> int:
    with _lock:
        return len(_legs)


def drain(grace_seconds: float) -> None:
    """Stop taking legs; wait for the running ones to reach a boundary (at most
    ``grace_seconds``), abort those still running, and wait for them to let go."""
    _stopping.set()
    deadline = time.monotonic() + grace_seconds
    while running_legs() and time.monotonic() < deadline:
        time.sleep(0.02)
    with _lock:
        remaining = list(_legs.items())
    for run_id, (controller, loop) in remaining:
        logger.warning("deuz: shutting down; aborting the leg of run %s", run_id)
        with contextlib.suppress(RuntimeError):  # its loop is closed: nothing runs
            loop.call_soon_threadsafe(controller.abort, ProcessStopping(run_id))
    deadline = time.monotonic() + RELEASE_SECONDS
    while running_legs() and time.monotonic() < deadline:
        time.sleep(0.02)


def install() -> None:
    """Handle SIGTERM in this process, before its previous handler. Called where legs
    start in the main thread (a server's loop, a worker's task, a sync caller handing a
    leg to a thread), because servers install their own handler when they start, after
    Django's setup; a no-op elsewhere."""
    if threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGTERM)
    if getattr(previous, "deuz_shutdown", False):
        return

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        if _drained.is_set():  # the default handling, from the main thread, as before
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        if _stopping.is_set():
            return
        logger.info("deuz: SIGTERM; letting %d leg(s) reach a boundary", running_legs())
        threading.Thread(
            target=_drain_then_stop,
            args=(previous, signum, frame),
            name="deuz-shutdown",
            daemon=True,
        ).start()

    on_sigterm.deuz_shutdown = True  # type: ignore[attr-defined]
    signal.signal(signal.SIGTERM, on_sigterm)


def _drain_then_stop(previous: Any, signum: int, frame: FrameType | None) -> None:
    drain(float(deuz_settings.SHUTDOWN_GRACE_SECONDS))
    if callable(previous):
        previous(signum, frame)
    elif previous != signal.SIG_IGN:  # the default: die of SIGTERM, as before
        # Only the main thread may reset a handler: signal it, and its handler does.
        _drained.set()
        os.kill(os.getpid(), signal.SIGTERM)
