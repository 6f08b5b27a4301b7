"""A readable transcript of a run's history — the run's own and each sub-agent's under its
agent path — for the ``deuz show`` command and the admin's run page."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from ..core.durable import child_run_id_prefix
from ..core.messages import (
    ImagePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolResultPart,
    ToolUsePart,
)
from ..models import Run
from ..storage.store import DjangoSessionStore


def pretty(value: Any) -> str:
    """Tool inputs and results as indented JSON (bytes shown by size)."""
    return json.dumps(
        value, indent=2, ensure_ascii=False, default=_describe, sort_keys=False
    )


def compact(value: Any) -> str:
    """Tool inputs and results as one line of JSON (bytes shown by size)."""
    return json.dumps(value, ensure_ascii=False, default=_describe)


def _describe(value: Any) -> str:
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<{len(value)} bytes>"
    return repr(value)


# A tool input or result longer than this is shown folded, its first lines as a preview.
FOLD_LINES = 20
FOLD_CHARS = 2000
PREVIEW_LINES = 8
PREVIEW_CHARS = 600


@dataclass(frozen=True, slots=True)
class Entry:
    """One line of the transcript: who said it, what kind it is, and the text."""

    role: str
    kind: str  # text | reasoning | image | tool-call | tool-result | tool-error
    text: str
    label: str = ""
    message_index: int = 0  # the position of its message in the history

    @property
    def line_count(self) -> int:
        return self.text.count("\n") + 1

    @property
    def preview(self) -> str | None:
        """The start of a long tool input or result (``None``: show it whole)."""
        if not self.kind.startswith("tool-"):
            return None
        if self.line_count <= FOLD_LINES and len(self.text) <= FOLD_CHARS:
            return None
        start = "\n".join(self.text.split("\n", PREVIEW_LINES)[:PREVIEW_LINES])
        return start[:PREVIEW_CHARS] + "…"


def transcript(messages: Iterable[Message]) -> Iterator[Entry]:
    names: dict[str, str] = {}  # tool call id: tool name, for the results' labels
    for index, message in enumerate(messages):
        for entry in _entries(message, names):
            yield replace(entry, message_index=index)


def _entries(message: Message, names: dict[str, str]) -> Iterator[Entry]:
    for part in message.parts:
        if isinstance(part, TextPart):
            yield Entry(message.role, "text", part.text)
        elif isinstance(part, ReasoningPart):
            yield Entry(
                message.role,
                "reasoning",
                "(encrypted)" if part.encrypted else part.text,
            )
        elif isinstance(part, ImagePart):
            size = (
                f"{len(part.image)} bytes"
                if isinstance(part.image, bytes)
                else part.image[:60]
            )
            yield Entry(
                message.role, "image", f"[image {part.media_type or ''} {size}]"
            )
        elif isinstance(part, ToolUsePart):
            names[part.id] = part.name
            yield Entry(
                message.role,
                "tool-call",
                pretty(part.input),
                f"{part.name} ({part.id})",
            )
        elif isinstance(part, ToolResultPart):
            kind = "tool-error" if part.is_error else "tool-result"
            result = (
                part.result if isinstance(part.result, str) else pretty(part.result)
            )
            label = f"{names.get(part.tool_use_id, '?')} ({part.tool_use_id})"
            yield Entry(message.role, kind, result, label)


def transcript_lines(entries: Iterable[Entry]) -> Iterator[str]:
    """Entries as text lines (``[role] kind label: text``), continuation lines indented."""
    for entry in entries:
        head = f"[{entry.role}] {entry.kind}" + (
            f" {entry.label}" if entry.label else ""
        )
        body = entry.text.replace("\n", "\n    ")
        yield f"{head}: {body}"


@dataclass(frozen=True, slots=True)
class Section:
    """The transcript of one run of the tree: the root, or a sub-agent at ``path``."""

    run: Run
    path: str
    entries: list[Entry]


def run_messages(run: Run) -> tuple[Message, ...]:
    checkpoint = DjangoSessionStore().load(run.run_id)
    return checkpoint.messages if checkpoint is not None else ()


def sections(run: Run) -> list[Section]:
    """The root's transcript, then each sub-agent's, labelled by its agent path."""
    prefix = child_run_id_prefix(run.run_id)
    children = Run.objects.filter(run_id__startswith=prefix).order_by("pk")
    found = [Section(run, "", list(transcript(run_messages(run))))]
    for child in children:
        path = " › ".join(child.agent_path or [child.run_id.removeprefix(prefix)])
        found.append(Section(child, path, list(transcript(run_messages(child)))))
    return found
