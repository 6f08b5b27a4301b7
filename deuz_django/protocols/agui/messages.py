"""Messages between AG-UI and a run: the run's history as the ``MESSAGES_SNAPSHOT`` a
front end rebuilds its view from, and the ``RunAgentInput`` messages a thread starts
with as the run's first input."""

from __future__ import annotations

import json
from typing import Any

from ag_ui.core import (
    AssistantMessage,
    FunctionCall,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from ag_ui.core import (
    Message as AguiMessage,
)
from ag_ui.core import (
    TextPart as AguiTextPart,
)

from ...core import Message
from ...core.messages import ToolResultPart, ToolUsePart
from .events import as_content


def snapshot_messages(
    thread_id: str, history: tuple[Message, ...]
) -> list[AguiMessage]:
    """The run's history as AG-UI messages (ids by position: the same on every
    snapshot); a tool message per tool result, against its call's id."""
    out: list[AguiMessage] = []
    for index, message in enumerate(history):
        message_id = f"{thread_id}-{index}"
        if message.role == "system":
            out.append(SystemMessage(id=message_id, content=message.text))
        elif message.role == "user":
            out.append(UserMessage(id=message_id, content=message.text))
        elif message.role == "assistant":
            out.append(_assistant(message_id, message))
        else:
            out += _tool_results(message_id, message)
    return out


def _assistant(message_id: str, message: Message) -> AssistantMessage:
    calls = [
        ToolCall(
            id=part.id,
            function=FunctionCall(name=part.name, arguments=json.dumps(part.input)),
        )
        for part in message.parts
        if isinstance(part, ToolUsePart)
    ]
    return AssistantMessage(
        id=message_id, content=message.text or None, tool_calls=calls or None
    )


def _tool_results(message_id: str, message: Message) -> list[AguiMessage]:
    return [
        ToolMessage(
            id=f"{message_id}-{number}",
            tool_call_id=part.tool_use_id,
            content=as_content(part.result),
            error=as_content(part.result) if part.is_error else None,
        )
        for number, part in enumerate(message.parts)
        if isinstance(part, ToolResultPart)
    ]


def input_messages(messages: list[AguiMessage]) -> list[dict[str, Any]]:
    """What a new thread starts with: the user's (and earlier assistant's) text of the
    input, in order. Tools, context and state of the input are not carried."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, UserMessage | AssistantMessage):
            text = _text(message.content)
            if text:
                out.append({"role": message.role, "content": text})
    return out


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.text for p in content if isinstance(p, AguiTextPart))
    return ""
