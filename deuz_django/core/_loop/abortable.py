"""Where a leg stops for the caller's abort (SPEC R3.21, D1), and where a model turn is
interrupted (steering).

An abort is seen at three places: between steps, before a tool batch starts, and in the
middle of a model call, whose stream is cut short and closed. Each raises :class:`Aborted`,
which ends the leg with ``finish(aborted)`` and no checkpoint. An interrupt is seen in a
model call only (:class:`Interrupted`): the turn is discarded and the leg goes on.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from ..abort import AbortSignal
from ..model import LanguageModel, ModelEvent, ModelRequest


class Aborted(Exception):
    """The caller's signal fired; nothing runs after it is seen."""


class Interrupted(Exception):
    """The model turn in progress was interrupted
    (:class:`~deuz_django.core.abort.TurnInterrupter`): it is discarded, and the leg
    goes back to its step boundary."""


def check(signal: AbortSignal | None) -> None:
    """Raise :class:`Aborted` when ``signal`` has fired."""
    if signal is not None and signal.aborted:
        raise Aborted


async def model_events(
    model: LanguageModel,
    request: ModelRequest,
    signal: AbortSignal | None,
    turn: AbortSignal | None = None,
) -> AsyncIterator[ModelEvent]:
    """The model's events, cut short (and the model's stream closed) when ``signal``
    aborts (:class:`Aborted`) or ``turn`` — this turn's own signal — does
    (:class:`Interrupted`).

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
    remove_turn = turn.add_listener(on_abort) if turn is not None else None
    try:
        while True:
            check(signal)
            if turn is not None and turn.aborted:
                raise Interrupted
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
                if turn is not None and not (signal is not None and signal.aborted):
                    raise Interrupted from None
                raise Aborted from None
            finally:
                pulling = False
            yield event
    finally:
        if remove is not None:
            remove()
        if remove_turn is not None:
            remove_turn()
        closer = getattr(events, "aclose", None)
        if closer is not None:
            await closer()
