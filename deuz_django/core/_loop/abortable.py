"""Where a leg stops for the caller's abort (SPEC R3.21, D1).

An abort is seen at three places: between steps, before a tool batch starts, and in the
middle of a model call, whose stream is cut short and closed. Each raises :class:`Aborted`,
which ends the leg with ``finish(aborted)`` and no checkpoint.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from ..abort import AbortSignal
from ..model import LanguageModel, ModelEvent, ModelRequest


class Aborted(Exception):
    """The caller's signal fired; nothing runs after it is seen."""


def check(signal: AbortSignal | None) -> None:
    """Raise :class:`Aborted` when ``signal`` has fired."""
    if signal is not None and signal.aborted:
        raise Aborted


async def model_events(
    model: LanguageModel, request: ModelRequest, signal: AbortSignal | None
) -> AsyncIterator[ModelEvent]:
    """The model's events, cut short (and the model's stream closed) when ``signal`` aborts.

    An abort cancels the wait for the model's next event: no task per event, so a leg with
    a signal streams as fast as one without. (Abort from the event loop's thread.)
    """
    events = model.stream(request)
    task = asyncio.current_task()
    pulling = False
    ours = False

    def on_abort() -> None:
        nonlocal ours
        if pulling and task is not None:
            ours = True
            task.cancel()

    remove = signal.add_listener(on_abort) if signal is not None else None
    try:
        while True:
            check(signal)
            pulling = True
            try:
                event = await anext(events)
            except StopAsyncIteration:
                return
            except asyncio.CancelledError:
                if not ours:
                    raise
                assert task is not None
                task.uncancel()
                raise Aborted from None
            finally:
                pulling = False
            yield event
    finally:
        if remove is not None:
            remove()
        closer = getattr(events, "aclose", None)
        if closer is not None:
            await closer()
