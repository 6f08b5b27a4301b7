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
