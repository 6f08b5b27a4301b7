"""What the in-process reliability tests share: a crash, and a model that survives one."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence

from deuz_django.core import ModelEvent, ModelRequest
from deuz_django.core.testing import ScriptedModel, ScriptedReply


class Crash(BaseException):
    """The process dies here: no ``except Exception`` in the loop stops it, no code after
    it runs, and only what the store already holds survives."""


class PositionalModel:
    """Replies by position: the ``k``-th assistant turn of a history always gets
    ``replies[k]``, so a step replayed after a crash, in any process, gets the same reply.

    ``on_call`` runs at the start of every call (a crash site, a log line).
    """

    def __init__(
        self,
        replies: Sequence[ScriptedReply],
        *,
        on_call: Callable[[], None] | None = None,
    ) -> None:
        self.replies = tuple(replies)
        self.on_call = on_call

    @property
    def model_id(self) -> str:
        return "positional"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if self.on_call is not None:
            self.on_call()
        k = sum(1 for message in request.messages if message.role == "assistant")
        async for event in ScriptedModel([self.replies[k]]).stream(request):
            yield event
