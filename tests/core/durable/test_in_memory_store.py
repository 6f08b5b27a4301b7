"""The store contract on the in-memory reference store, and on an async JSONL-file store.

The JSONL store is the smallest persistent store the codec allows (the seed's "a JSONL
file"); its methods are coroutines, so the contract also covers the awaitable path of the
protocol that the loops take for async stores.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from deuz_django.core.durable import (
    AgentCheckpoint,
    InMemorySessionStore,
    create_in_memory_session_store,
    deserialize_checkpoint,
    serialize_checkpoint,
)
from deuz_django.core.testing.contracts import SessionStoreContract, make_checkpoint


class JsonlSessionStore:
    """An append-only log: a line per save (the codec's text) or per delete (a tombstone).

    The last line about a run id decides it. Lines split on ``\\n`` only: the codec keeps
    U+2028 raw, which :meth:`str.splitlines` would treat as a line break.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    async def save(self, checkpoint: AgentCheckpoint) -> None:
        await asyncio.to_thread(self._append, serialize_checkpoint(checkpoint))

    async def load(self, run_id: str) -> AgentCheckpoint | None:
        latest = (await asyncio.to_thread(self._latest)).get(run_id)
        return deserialize_checkpoint(latest) if latest is not None else None

    async def delete(self, run_id: str) -> None:
        await asyncio.to_thread(self._append, json.dumps({"deleted": run_id}))

    async def list(self) -> list[str]:
        return list(await asyncio.to_thread(self._latest))

    def _append(self, line: str) -> None:
        with self.path.open("a", encoding="utf-8", newline="\n") as log:
            log.write(line + "\n")

    def _latest(self) -> dict[str, str]:
        """Run id to the text of its latest checkpoint, in order of first save."""
        latest: dict[str, str] = {}
        if not self.path.exists():
            return latest
        for line in self.path.read_text("utf-8").split("\n"):
            if not line:
                continue
            record = json.loads(line)
            if "deleted" in record:
                latest.pop(record["deleted"], None)
            else:
                latest[record["runId"]] = line
        return latest


class TestInMemorySessionStore(SessionStoreContract):
    @pytest.fixture
    def store(self) -> InMemorySessionStore:
        return create_in_memory_session_store()

    def test_keeps_the_saved_object_itself(self, store: InMemorySessionStore) -> None:
        # SPEC R8.5: the in-memory store keeps references; immutability makes that safe.
        checkpoint = make_checkpoint("run-ref")
        store.save(checkpoint)
        assert store.load("run-ref") is checkpoint


class TestJsonlSessionStore(SessionStoreContract):
    @pytest.fixture
    async def store(self, tmp_path: Path) -> JsonlSessionStore:
        return JsonlSessionStore(tmp_path / "runs.jsonl")

    async def test_each_save_is_one_line_of_codec_text(
        self, store: JsonlSessionStore
    ) -> None:
        # SPEC R8.1: what a persistent store writes is the codec's text, verbatim.
        checkpoint = make_checkpoint("run-line")
        await store.save(checkpoint)
        assert store.path.read_text("utf-8") == serialize_checkpoint(checkpoint) + "\n"
