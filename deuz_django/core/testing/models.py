"""A scripted model for tests and the offline demo.

>>> model = ScriptedModel([
...     reply(tool_calls=[("toolu_1", "get_weather", {"city": "Oslo"})], usage=(10, 5)),
...     reply(text="Sunny in Oslo.", usage=(20, 6)),
... ])

Each call to the model plays the next reply; ``model.requests`` records every request it
received. A tool call streams like a provider's: a first delta with the name and no
arguments, then the arguments as compact JSON.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..exceptions import ModelError, ScriptExhaustedError
from ..model import ModelEvent, ModelRequest
from ..parts import FinishPart, ReasoningDeltaPart, TextDeltaPart, ToolCallDeltaPart
from ..usage import EMPTY_USAGE, FinishReason, Usage


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptedReply:
    text: str | tuple[str, ...] = ()
    tool_calls: tuple[tuple[str, str, Any], ...] = ()
    reasoning: str | None = None
    usage: Usage = EMPTY_USAGE
    finish_reason: FinishReason | None = None
    error: BaseException | None = None
    delay: float = 0.0
    chunk_delay: float = 0.0

    def events(self) -> list[ModelEvent]:
        events: list[ModelEvent] = []
        if self.reasoning:
            events.append(ReasoningDeltaPart(self.reasoning))
        chunks = (self.text,) if isinstance(self.text, str) else self.text
        events.extend(TextDeltaPart(chunk) for chunk in chunks if chunk)
        for call_id, name, arguments in self.tool_calls:
            events.append(ToolCallDeltaPart(call_id, "", name))
            encoded = json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)
            events.append(ToolCallDeltaPart(call_id, encoded))
        return events

    async def play(self) -> AsyncIterator[ModelEvent]:
        """Stream this turn as a provider would, ending with its ``finish``.

        Text chunks are due ``chunk_delay`` apart from the turn's start, as a remote
        model's tokens arrive at their own pace: a busy event loop delays a chunk, not
        every chunk after it."""
        if self.delay:
            await asyncio.sleep(self.delay)
        loop = asyncio.get_running_loop()
        due = loop.time()
        for event in self.events():
            if self.chunk_delay and isinstance(event, TextDeltaPart):
                due += self.chunk_delay
                await asyncio.sleep(max(0.0, due - loop.time()))
            yield event
        if self.error is not None:
            raise self.error
        reason = self.finish_reason or ("tool_calls" if self.tool_calls else "stop")
        yield FinishPart(reason, self.usage)


def reply(
    *,
    text: str | Sequence[str] | None = None,
    tool_calls: Sequence[tuple[str, str, Any]] = (),
    reasoning: str | None = None,
    usage: tuple[int, int] | Usage | None = None,
    finish_reason: FinishReason | None = None,
    error: BaseException | str | None = None,
    delay: float = 0.0,
    chunk_delay: float = 0.0,
) -> ScriptedReply:
    """One model turn. ``text`` may be a list of chunks (one delta each); ``usage`` is
    ``(input_tokens, output_tokens)``; ``error`` is raised after the text streamed;
    ``delay`` (seconds) is waited before the first event and ``chunk_delay`` before each
    text chunk (a model that visibly streams)."""
    if isinstance(usage, tuple):
        usage = Usage(
            input_tokens=usage[0],
            output_tokens=usage[1],
            total_tokens=usage[0] + usage[1],
        )
    if isinstance(error, str):
        error = ModelError(error, provider="scripted")
    return ScriptedReply(
        text=text if isinstance(text, str) else tuple(text or ()),
        tool_calls=tuple(tool_calls),
        reasoning=reasoning,
        usage=usage or EMPTY_USAGE,
        finish_reason=finish_reason,
        error=error,
        delay=delay,
        chunk_delay=chunk_delay,
    )


class FunctionModel:
    """Answers each request with ``respond(request)``: a model driven by the history.

    Its behaviour does not depend on how many calls one instance has seen, so a run
    resumed in another process continues the same script. ``requests`` records every
    request it received.
    """

    provider = "scripted"  # what traces name as ``gen_ai.provider.name``

    def __init__(
        self,
        respond: Callable[[ModelRequest], ScriptedReply],
        *,
        model_id: str = "function",
    ) -> None:
        self.respond = respond
        self.requests: list[ModelRequest] = []
        self._model_id = model_id

    @property
    def model_id(self) -> str:
        return self._model_id

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        async for event in self.respond(request).play():
            yield event


class ScriptedModel(FunctionModel):
    """Plays scripted replies in order; raises :class:`ScriptExhaustedError` past the end."""

    def __init__(
        self, replies: Sequence[ScriptedReply], *, model_id: str = "scripted"
    ) -> None:
        super().__init__(self._next_reply, model_id=model_id)
        self.replies = list(replies)

    def _next_reply(self, request: ModelRequest) -> ScriptedReply:
        index = len(self.requests) - 1  # this request is recorded already
        if index >= len(self.replies):
            raise ScriptExhaustedError(
                f"ScriptedModel: no reply left for call #{index + 1} "
                f"(the script has {len(self.replies)})"
            )
        return self.replies[index]
