"""The run's journal as A2A events: its text deltas become appends to the task's one
artifact, each step's start a ``WORKING`` status update; other parts (tool calls and
results, reasoning, sub-agents' parts) stay on the app's own streams."""

from __future__ import annotations

import json
from collections.abc import Sequence

from a2a.types import a2a_pb2 as a2a

from ...core.journal import Record, is_done

ARTIFACT_ID = "response"


def _part(data: str) -> dict[str, object]:
    part = json.loads(data)
    return part if isinstance(part, dict) else {}


class TextFold:
    """The run's text so far, from its journal records (leg ends and all)."""

    def __init__(self) -> None:
        self.text = ""

    def add(self, records: Sequence[Record]) -> str:
        """Add ``records``; return the text they added."""
        added = "".join(
            str(part.get("text", ""))
            for _seq, data in records
            if not is_done(data) and (part := _part(data)).get("type") == "text-delta"
        )
        self.text += added
        return added


class EventMapper:
    """Records → events for one task of a context, after a snapshot that held ``text``."""

    def __init__(self, task_id: str, context_id: str, text: str = "") -> None:
        self.task_id = task_id
        self.context_id = context_id
        self.fold = TextFold()
        self.fold.text = text

    def events(self, records: Sequence[Record]) -> list[a2a.StreamResponse]:
        found: list[a2a.StreamResponse] = []
        for seq, data in records:
            if is_done(data):
                continue
            part = _part(data)
            if part.get("type") == "step-start":
                found.append(self._working(seq, part.get("step", 0)))
            elif part.get("type") == "text-delta":
                found.append(self._append(str(part.get("text", ""))))
        return found

    def _working(self, seq: int, step: object) -> a2a.StreamResponse:
        """``WORKING`` at each step's start, naming the step and its journal seq."""
        update = a2a.TaskStatusUpdateEvent(
            task_id=self.task_id,
            context_id=self.context_id,
            status=a2a.TaskStatus(state=a2a.TaskState.TASK_STATE_WORKING),
        )
        update.metadata.update(
            {"seq": seq, "step": step if isinstance(step, int) else 0}
        )
        return a2a.StreamResponse(status_update=update)

    def _append(self, text: str) -> a2a.StreamResponse:
        append = bool(self.fold.text)
        self.fold.text += text
        return a2a.StreamResponse(
            artifact_update=a2a.TaskArtifactUpdateEvent(
                task_id=self.task_id,
                context_id=self.context_id,
                append=append,
                artifact=a2a.Artifact(
                    artifact_id=ARTIFACT_ID,
                    name="response",
                    parts=[a2a.Part(text=text)],
                ),
            )
        )
