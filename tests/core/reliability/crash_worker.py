"""The child process of the crash test: one leg of a four-step durable run.

    python -m tests.core.reliability.crash_worker start|resume STORE_DIR LOG HANG_IN

``start`` begins run ``crash-run``: two quick tool steps, then a third step that hangs —
in its tool (``HANG_IN=tool``: the tool logs that it started, then sleeps) or in its model
call (``HANG_IN=model``) — so the parent can SIGKILL it there. ``resume`` continues the run
from its latest checkpoint with a model scripted to replay step 3 and then answer. Every
side effect (each model call, each tool execution, each checkpoint save) is a line in
``LOG``, prefixed with the mode, so the parent can tell which process did what.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from urllib.parse import quote

from deuz_django.core import PrepareStepInfo, generate_text, tool
from deuz_django.core.durable import (
    AgentCheckpoint,
    DurableSession,
    deserialize_checkpoint,
    resume_from_checkpoint,
    serialize_checkpoint,
)
from deuz_django.core.testing import ScriptedModel, reply

RUN_ID = "crash-run"
PROMPT = "Record 1 and 2, then the slow 3."
FINAL_TEXT = "All done."
HANG_SECONDS = 3600.0


def append_line(path: Path, line: str) -> None:
    """Append and fsync, so the line is on disk before the next effect can happen."""
    with path.open("a", encoding="utf-8") as log:
        log.write(line + "\n")
        log.flush()
        os.fsync(log.fileno())


class FileSessionStore:
    """One JSON file per run (the codec's text), replaced atomically at every save.

    A save writes a temporary file, fsyncs it and renames it over the old one, so a
    process killed mid-save leaves the previous checkpoint whole. Each save also appends
    ``"<stepIndex> <status>"`` to ``audit`` for the test to read.
    """

    def __init__(self, directory: Path, audit: Path, label: str) -> None:
        self.directory = directory
        self.audit = audit
        self.label = label

    def _path(self, run_id: str) -> Path:
        return self.directory / f"{quote(run_id, safe='')}.json"

    def save(self, checkpoint: AgentCheckpoint) -> None:
        final = self._path(checkpoint.run_id)
        temporary = final.with_name(f".{final.name}.{os.getpid()}.tmp")
        with temporary.open("w", encoding="utf-8") as out:
            out.write(serialize_checkpoint(checkpoint))
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, final)
        append_line(
            self.audit,
            f"{self.label} save {checkpoint.step_index} {checkpoint.status}",
        )

    def load(self, run_id: str) -> AgentCheckpoint | None:
        path = self._path(run_id)
        if not path.exists():
            return None
        return deserialize_checkpoint(path.read_text("utf-8"))


async def main(mode: str, store_dir: Path, log: Path, hang_in: str) -> None:
    hang = mode == "start"

    @tool
    def record(n: int) -> str:
        """A quick step with a side effect."""
        append_line(log, f"{mode} record {n}")
        return f"recorded {n}"

    @tool
    def slow(n: int) -> str:
        """A slow step: the side effect happens first, then the wait."""
        append_line(log, f"{mode} slow {n}")
        if hang and hang_in == "tool":
            time.sleep(HANG_SECONDS)
        return f"slow {n} finished"

    def log_model_call(info: PrepareStepInfo) -> None:
        append_line(log, f"{mode} model {info.step_index}")

    step_3 = reply(
        tool_calls=[("call_3", "slow", {"n": 3})],
        usage=(30, 3),
        delay=HANG_SECONDS if hang and hang_in == "model" else 0.0,
    )
    final = reply(text=FINAL_TEXT, usage=(40, 4))
    store = FileSessionStore(store_dir, log, mode)
    options = {
        "tools": [record, slow],
        "max_steps": 10,
        "prepare_step": log_model_call,
    }
    if mode == "start":
        model = ScriptedModel(
            [
                reply(tool_calls=[("call_1", "record", {"n": 1})], usage=(10, 1)),
                reply(tool_calls=[("call_2", "record", {"n": 2})], usage=(20, 2)),
                step_3,
                final,
            ]
        )
        await generate_text(
            model=model,
            prompt=PROMPT,
            session=DurableSession(store, RUN_ID),
            **options,
        )
    else:
        model = ScriptedModel([step_3, final])
        await resume_from_checkpoint(store, RUN_ID, model=model, **options)


if __name__ == "__main__":
    mode_arg, store_arg, log_arg, hang_arg = sys.argv[1:]
    asyncio.run(main(mode_arg, Path(store_arg), Path(log_arg), hang_arg))
