"""A failing store never kills a run (SPEC R6.3, R6.10; DESIGN §7).

Durability is best-effort: a ``save`` that raises is logged and the run goes on, and a
store that forgets everything only loses durability. A store that is down altogether —
``save`` and ``load`` both raising — must not kill a fresh run either, whether or not the
caller named the run.
"""

from __future__ import annotations

from typing import Any

import pytest

from deuz_django.core import Deps, generate_text, stream_chat, tool
from deuz_django.core.durable import AgentCheckpoint, DurableSession
from deuz_django.core.testing import ScriptedModel, reply
from deuz_django.core.testing.contracts import FixedClock


class RecordingLogger:
    def __init__(self) -> None:
        self.errors: list[str] = []
        self.warnings: list[str] = []

    def error(self, msg: str, /, *args: object, **kwargs: object) -> None:
        self.errors.append(msg)

    def warning(self, msg: str, /, *args: object, **kwargs: object) -> None:
        self.warnings.append(msg)


class SaveFails:
    """Loads nothing, and every save raises."""

    def save(self, checkpoint: AgentCheckpoint) -> None:
        raise ConnectionError("database is down")

    def load(self, run_id: str) -> AgentCheckpoint | None:
        return None


class Forgetful:
    """Accepts every save and remembers none (R6.10)."""

    def __init__(self) -> None:
        self.saved: list[str] = []

    def save(self, checkpoint: AgentCheckpoint) -> None:
        self.saved.append(checkpoint.step_id)

    def load(self, run_id: str) -> AgentCheckpoint | None:
        return None


class Down(SaveFails):
    """Every call raises, as when the database behind the store is unreachable."""

    def load(self, run_id: str) -> AgentCheckpoint | None:
        raise ConnectionError("database is down")


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _options(store: Any, run_id: str | None, logger: RecordingLogger) -> dict[str, Any]:
    return {
        "model": ScriptedModel(
            [
                reply(tool_calls=[("c1", "add", {"a": 1, "b": 2})], usage=(10, 2)),
                reply(text="3", usage=(12, 1)),
            ]
        ),
        "prompt": "1 + 2?",
        "tools": [add],
        "max_steps": 5,
        "session": DurableSession(store, run_id),
        "deps": Deps(clock=FixedClock(), generate_id=lambda: "gen-1", logger=logger),
    }


SAVE_FAILED = [
    "durable: checkpoint save failed for 'run-1#1' — database is down",
    "durable: checkpoint save failed for 'run-1#2' — database is down",
]


async def test_a_save_that_raises_is_logged_and_the_run_completes() -> None:
    # SPEC R6.3 step 3: the exact log line, once per boundary; the run goes on.
    logger = RecordingLogger()
    result = await generate_text(**_options(SaveFails(), "run-1", logger))
    assert (result.text, result.finish_reason, result.run_id) == ("3", "stop", "run-1")
    assert logger.errors == SAVE_FAILED


async def test_a_save_that_raises_never_breaks_a_stream() -> None:
    logger = RecordingLogger()
    stream = stream_chat(**_options(SaveFails(), "run-1", logger))
    types = [part.type async for part in stream.full_stream]
    assert "error" not in types
    assert types[-1] == "finish"
    assert await stream.text == "3"
    assert logger.errors == SAVE_FAILED


async def test_a_store_that_loads_nothing_still_runs() -> None:
    # SPEC R6.10
    store = Forgetful()
    logger = RecordingLogger()
    result = await generate_text(**_options(store, "run-1", logger))
    assert result.text == "3"
    assert store.saved == ["run-1#1", "run-1#2"]
    assert logger.errors == []


@pytest.mark.parametrize("run_id", [None, "run-1"], ids=["generated-id", "named-run"])
async def test_a_store_that_is_down_never_kills_a_fresh_run(run_id: str | None) -> None:
    # DESIGN §7; seed: "Durability must never be a run-killer." The D9 counter lookup
    # for a named run reads the store too, and must be as best-effort as the saves.
    logger = RecordingLogger()
    result = await generate_text(**_options(Down(), run_id, logger))
    assert result.text == "3"
    expected_id = run_id or "gen-1"
    assert result.run_id == expected_id
    assert [e for e in logger.errors if "save failed" in e] == [
        f"durable: checkpoint save failed for '{expected_id}#{n}' — database is down"
        for n in (1, 2)
    ]
