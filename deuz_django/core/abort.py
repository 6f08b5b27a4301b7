"""Cooperative cancellation: the ``signal`` option of every loop call.

An :class:`AbortController` owns a signal; ``abort()`` sets it once and wakes everything
waiting on it. The loop, tools and model adapters receive the signal and stop at their next
await point. Aborting is different from a client disconnecting, which never cancels a run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class AbortSignal:
    """Read side of an abort: ``aborted``, ``reason``, ``await signal.wait()``."""

    __slots__ = ("_listeners", "_reason", "aborted")

    def __init__(self) -> None:
        self.aborted = False
        self._reason: BaseException | None = None
        self._listeners: list[Callable[[], None]] = []

    @property
    def reason(self) -> BaseException | None:
        return self._reason

    def add_listener(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` on abort (at once if already aborted); returns a remover."""
        if self.aborted:
            callback()
            return lambda: None
        self._listeners.append(callback)

        def remove() -> None:
            if callback in self._listeners:
                self._listeners.remove(callback)

        return remove

    async def wait(self) -> None:
        if self.aborted:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not future.done():
                future.set_result(None)

        remove = self.add_listener(wake)
        try:
            await future
        finally:
            remove()

    def _fire(self, reason: BaseException) -> None:
        if self.aborted:
            return
        self.aborted = True
        self._reason = reason
        listeners, self._listeners = self._listeners, []
        for callback in listeners:
            callback()


class AbortController:
    """Owns an :class:`AbortSignal`; ``abort()`` is idempotent."""

    __slots__ = ("signal",)

    def __init__(self) -> None:
        self.signal = AbortSignal()

    def abort(self, reason: BaseException | None = None) -> None:
        self.signal._fire(reason or asyncio.CancelledError("aborted"))


def any_signal(*signals: AbortSignal | None) -> AbortSignal:
    """A signal that aborts when any of ``signals`` does (a tool's caller signal + timeout)."""
    combined = AbortController()

    def follow(source: AbortSignal) -> None:
        source.add_listener(lambda: combined.abort(source.reason))

    for signal in signals:
        if signal is not None:
            follow(signal)
    return combined.signal


class TurnInterrupter:
    """Cuts the model turn in progress short, never a tool: steering's ``interrupt``.

    Pass one as a loop call's ``interrupt`` option, and call :meth:`interrupt` (from any
    thread) once an input is queued for the run. A leg in a model turn discards it —
    nothing of it is recorded in the step journal, none of its calls runs — and goes
    back to its step boundary, where it takes the input
    (:mod:`deuz_django.core.durable.inputs`). A leg running tools is left alone: the
    input waits for the next boundary. An interrupt between the boundary's read of the
    queue and the model call interrupts that call at once, so no input waits a whole
    turn because of a race. Without an input queue on the leg's store it does nothing.
    """

    __slots__ = ("_controller", "_loop", "_requested")

    def __init__(self) -> None:
        self._requested = False
        self._controller: AbortController | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def interrupt(self) -> None:
        self._requested = True
        controller, loop = self._controller, self._loop
        if controller is None or loop is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            controller.abort()
        else:
            loop.call_soon_threadsafe(controller.abort)

    # -- the loop's side ----------------------------------------------------------------

    def begin_boundary(self) -> None:
        """The leg is about to read the queue: what was asked before is answered."""
        self._requested = False

    def begin_turn(self) -> AbortSignal:
        """The signal of the model call about to start (aborted at once when an
        interrupt came since :meth:`begin_boundary`)."""
        controller = AbortController()
        self._loop = asyncio.get_running_loop()
        self._controller = controller  # published before the flag is read
        if self._requested:
            controller.abort()
        return controller.signal

    def end_turn(self) -> None:
        self._controller = None
