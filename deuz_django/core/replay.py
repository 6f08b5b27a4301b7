"""Replay: a finished run's steps again — with another model, system prompt or agent
version — the original's *recorded* tool outcomes fed back instead of running any tool.

>>> recorded = RecordedOutcomes.from_messages(original.messages)
>>> try:
...     result = await generate_text(
...         model=other_model,
...         messages=replay_input(original.messages, system="Be brief."),
...         tools=replay_tools(tools, recorded),
...     )
... except ReplayDiverged as diverged:
...     print(diverged)  # the model asked for a call the original never made

A replay tool keeps its tool's name, description and schema — the model sees the same
tools — but never executes: it answers with the recorded outcome of the original's call of
the same tool with the same input (compared as canonical JSON: key order and spacing do not
matter). A call the original made several times takes its outcomes in order: the n-th time
the replay makes it, counted in the replay's own history (so a resumed leg counts the
same), it gets the original's n-th outcome. A call with no recorded outcome is not
executed: the tool raises :class:`~deuz_django.core.exceptions.ReplayDiverged`, which ends
the leg with it as its error.

Nothing waits for a person: a replay tool needs no approval, asks no question and has no
client, whatever its tool did; a sub-agent's tool answers with the sub-agent's recorded
result, so the sub-agent never runs. A replay tool is ``idempotent``: running it again
(after a crash) has no effect anywhere.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .exceptions import ReplayDiverged
from .messages import Message, ToolResultPart, ToolUsePart, coerce_messages
from .tools import Tool, ToolContext, ToolSet, coerce_tools


def call_key(tool_name: str, input: Any) -> str:
    """One call as canonical JSON: the same tool with the same input, however the model
    spelled it (key order, spacing), is the same call."""
    return json.dumps(
        [tool_name, input],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=repr,
    )


@dataclass(frozen=True, slots=True)
class RecordedOutcome:
    """One answered call of the original run: what the model asked, what it was told."""

    tool_name: str
    input: Any
    result: Any
    is_error: bool | None = None


@dataclass(frozen=True, slots=True)
class RecordedOutcomes:
    """The original run's answered calls, by call (:func:`call_key`), in the order they
    were made. A call the original made but never got an outcome of (its run stopped
    while the call waited) is not recorded."""

    calls: Mapping[str, tuple[RecordedOutcome, ...]] = field(default_factory=dict)

    @classmethod
    def from_messages(
        cls, messages: Iterable[Message | dict[str, Any]]
    ) -> RecordedOutcomes:
        """Each tool call of the history's assistant turns with the result that answered
        it (a call id the model re-used in a later turn is matched turn by turn)."""
        calls: dict[str, list[RecordedOutcome]] = {}
        for use, result in answered_calls(coerce_messages(messages)):
            if result is None:
                continue
            calls.setdefault(call_key(use.name, use.input), []).append(
                RecordedOutcome(use.name, use.input, result.result, result.is_error)
            )
        return cls({key: tuple(found) for key, found in calls.items()})

    def outcome(
        self, tool_name: str, input: Any, ordinal: int
    ) -> RecordedOutcome | None:
        """The outcome of the ``ordinal``-th (from 0) such call, if the original had one."""
        found = self.calls.get(call_key(tool_name, input), ())
        return found[ordinal] if ordinal < len(found) else None

    def count(self, tool_name: str, input: Any) -> int:
        """How many outcomes of this very call the original has."""
        return len(self.calls.get(call_key(tool_name, input), ()))


def answered_calls(
    history: Sequence[Message],
) -> list[tuple[ToolUsePart, ToolResultPart | None]]:
    """Every tool call of the history's assistant turns, in order, with the result that
    answered it (``None``: none did). A result answers a call of the latest assistant
    turn before it, so a call id re-used by a later turn is never mixed up."""
    pairs: list[tuple[ToolUsePart, ToolResultPart | None]] = []
    waiting: dict[str, int] = {}
    for message in history:
        if message.role == "assistant":
            waiting = {}
            for part in message.parts:
                if isinstance(part, ToolUsePart):
                    waiting[part.id] = len(pairs)
                    pairs.append((part, None))
            continue
        for part in message.parts:
            if isinstance(part, ToolResultPart) and part.tool_use_id in waiting:
                index = waiting.pop(part.tool_use_id)
                pairs[index] = (pairs[index][0], part)
    return pairs


def replay_input(
    messages: Iterable[Message | dict[str, Any]], *, system: str | None = None
) -> tuple[Message, ...]:
    """What a replay starts from: the original's messages before its first assistant
    turn; with ``system``, its system messages replaced by that one."""
    history = coerce_messages(messages)
    first = next(
        (i for i, m in enumerate(history) if m.role == "assistant"), len(history)
    )
    start = history[:first]
    if system is None:
        return start
    return (Message("system", system), *(m for m in start if m.role != "system"))


def replay_tools(
    tools: ToolSet | Sequence[Tool], recorded: RecordedOutcomes
) -> dict[str, Tool]:
    """``tools`` as replay tools: the same names, descriptions and schemas, answering
    with ``recorded`` outcomes instead of executing (see the module's docstring)."""
    return {
        name: _replaying(declared, recorded)
        for name, declared in coerce_tools(tools).items()
    }


class _RecordedFailure(Exception):
    """The original call failed: raised so the loop answers with the recorded error
    (a string as it was; any other value as its JSON)."""


def _replaying(declared: Tool, recorded: RecordedOutcomes) -> Tool:
    name = declared.name

    async def execute(args: Any, ctx: ToolContext) -> Any:
        found = recorded.outcome(name, args, _made_before(ctx, name, args))
        if found is None:
            raise ReplayDiverged(name, args, recorded=recorded.count(name, args))
        if found.is_error:
            result = found.result
            raise _RecordedFailure(
                result if isinstance(result, str) else json.dumps(result, default=repr)
            )
        return found.result

    return Tool(
        name=name,
        description=declared.description,
        parameters=declared.parameters,
        execute=execute,
        idempotent=True,
    )


def _made_before(ctx: ToolContext, tool_name: str, args: Any) -> int:
    """How many times the replay made this very call before this one: counted in its
    history, up to this call's place in it (the latest turn with its id)."""
    key = call_key(tool_name, args)
    uses = [
        part
        for message in ctx.messages
        if message.role == "assistant"
        for part in message.parts
        if isinstance(part, ToolUsePart)
    ]
    here = next(
        (i for i in range(len(uses) - 1, -1, -1) if uses[i].id == ctx.tool_call_id),
        len(uses),
    )
    return sum(1 for use in uses[:here] if call_key(use.name, use.input) == key)
