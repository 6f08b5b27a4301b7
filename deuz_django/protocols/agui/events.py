"""A run's stream journal as AG-UI events.

Each journal record (one UI part of :mod:`deuz_django.core.wire`, at its ``seq``) maps to
zero or more AG-UI events, all sent under the record's ``seq`` as their SSE ``id:``, so a
reader that rejoins after a ``seq`` gets exactly the events of the records after it:

==========================  ==========================================================
journal part                AG-UI events
==========================  ==========================================================
``text-delta``              ``TEXT_MESSAGE_START`` (the first of a message),
                            ``TEXT_MESSAGE_CONTENT``; any other part ends the message
                            (``TEXT_MESSAGE_END``)
``tool-call``               ``TOOL_CALL_START``, ``TOOL_CALL_ARGS`` (the input as
                            JSON), ``TOOL_CALL_END``
``tool-result``             ``TOOL_CALL_RESULT`` against the call's own id
``data-<name>``             ``CUSTOM`` named ``<name>``
``error``                   ``RUN_ERROR`` (the run's stream ends)
==========================  ==========================================================

The other parts (reasoning, streamed call arguments, steps, tool states, costs,
sub-agents' parts) have no event yet. A message's id is its first record's: the
same on every replay of the journal.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    RunErrorEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

TEXT_DELTA = "text-delta"


def text_message_id(thread_id: str, seq: int) -> str:
    """The id of the text message whose first delta is the record at ``seq``."""
    return f"{thread_id}-text-{seq}"


def as_content(value: Any) -> str:
    """A tool's output as the text of its AG-UI result: a string as it is, anything
    else as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


@dataclass(slots=True)
class EventMapper:
    """Maps one thread's records, in order, to events; ``open_text`` is the text
    message still open (a reader that rejoins mid-message starts with it open)."""

    thread_id: str
    open_text: str | None = None
    failed: bool = False

    def map(self, seq: int, data: str) -> list[BaseEvent]:
        part = json.loads(data)
        kind = part.get("type", "")
        if kind == TEXT_DELTA:
            return self._text(seq, part.get("text", ""))
        events = self.end_text()
        if kind == "tool-call":
            events += _tool_call(part)
        elif kind == "tool-result":
            events.append(
                ToolCallResultEvent(
                    message_id=f"{part['toolCallId']}-result",
                    tool_call_id=part["toolCallId"],
                    content=as_content(part.get("output")),
                    role="tool",
                )
            )
        elif kind.startswith("data-"):
            events.append(
                CustomEvent(name=kind.removeprefix("data-"), value=part.get("payload"))
            )
        elif kind == "error":
            self.failed = True
            message = part.get("message") or "the run failed"
            events.append(RunErrorEvent(message=message, code="run_failed"))
        return events

    def end_text(self) -> list[BaseEvent]:
        """``TEXT_MESSAGE_END`` for the open message, if one is open."""
        if self.open_text is None:
            return []
        message_id, self.open_text = self.open_text, None
        return [TextMessageEndEvent(message_id=message_id)]

    def reopen(self) -> list[BaseEvent]:
        """The start of the message a rejoining reader joins in the middle of."""
        if self.open_text is None:
            return []
        return [TextMessageStartEvent(message_id=self.open_text, role="assistant")]

    def _text(self, seq: int, text: str) -> list[BaseEvent]:
        events: list[BaseEvent] = []
        if self.open_text is None:
            self.open_text = text_message_id(self.thread_id, seq)
            events.append(
                TextMessageStartEvent(message_id=self.open_text, role="assistant")
            )
        if text:
            events.append(
                TextMessageContentEvent(message_id=self.open_text, delta=text)
            )
        return events


def _tool_call(part: dict[str, Any]) -> list[BaseEvent]:
    call_id = part["toolCallId"]
    return [
        ToolCallStartEvent(tool_call_id=call_id, tool_call_name=part["toolName"]),
        ToolCallArgsEvent(tool_call_id=call_id, delta=json.dumps(part.get("input"))),
        ToolCallEndEvent(tool_call_id=call_id),
    ]


def open_text_before(records: list[tuple[int, str]], seq: int) -> int | None:
    """The seq of the first delta of the text message still open at ``seq``, given
    the records up to ``seq`` (``None``: none is open, or it began before them)."""
    first = None
    for record_seq, data in reversed(records):
        if record_seq > seq:
            continue
        if json.loads(data).get("type") != TEXT_DELTA:
            break
        first = record_seq
    return first
