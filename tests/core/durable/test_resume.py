"""Resume entry points (SPEC §7, R5.14, D5, D9)."""

from __future__ import annotations

from typing import Any

import pytest

from deuz_django.core import (
    DeuzError,
    Message,
    ModelError,
    StepOverrides,
    Tool,
    ToolResultPart,
    generate_text,
    stream_chat,
)
from deuz_django.core.durable import (
    AgentCheckpoint,
    CheckpointNotFoundError,
    DurableSession,
    RunCompletedError,
    deserialize_checkpoint,
    resume_from_checkpoint,
    resume_stream_from_checkpoint,
    serialize_checkpoint,
)
from deuz_django.core.parts import ErrorPart, StepStartPart, ToolOutputPart
from deuz_django.core.testing import ScriptedModel, reply
from tests.core.support import Probe, RecordingStore, collect, make_deps, tokens, usage


def _gated(probe: Probe | None = None) -> Tool:
    return (probe or Probe("deleted")).tool("delete", needs_approval=True)


async def _suspended(store: Any, run_id: str = "run", **options: Any) -> Any:
    """Leg 1: one gated call (10/5 tokens), suspended."""
    options.setdefault("tools", [_gated()])
    return await generate_text(
        model=ScriptedModel(
            [reply(tool_calls=[("c1", "delete", {"p": 1})], usage=(10, 5))]
        ),
        prompt="go",
        session=DurableSession(store, run_id),
        deps=make_deps(),
        **options,
    )


def _approve(approval_id: str = "c1") -> list[dict[str, Any]]:
    return [{"approval_id": approval_id, "approved": True}]


# -- R7.1, R7.2 ---------------------------------------------------------------------------------


async def test_resume_continues_a_suspended_run_with_the_verdicts() -> None:
    # SPEC R7.2, seed: approved → execute, and the run continues.
    store = RecordingStore()
    await _suspended(store)
    probe = Probe("deleted")
    model = ScriptedModel([reply(text="done", usage=(20, 6))])
    result = await resume_from_checkpoint(
        store,
        "run",
        model=model,
        tools=[_gated(probe)],
        approval_responses=_approve(),
        deps=make_deps(),
    )
    assert probe.calls == [{"p": 1}]
    assert result.text == "done"
    assert result.run_id == "run"
    assert [m.role for m in model.requests[0].messages] == ["user", "assistant", "tool"]
    final = store.load("run")
    assert final is not None
    assert (final.status, final.step_index) == ("completed", 2)


async def test_resume_without_verdicts_denies_the_pending_call() -> None:
    # SPEC R7.2: approval_responses defaults to [] — the unanswered call is denied.
    store = RecordingStore()
    await _suspended(store)
    probe = Probe()
    result = await resume_from_checkpoint(
        store,
        "run",
        model=ScriptedModel([reply(text="ok")]),
        tools=[_gated(probe)],
        deps=make_deps(),
    )
    assert probe.calls == []
    [denial] = result.response_messages[0].content
    assert isinstance(denial, ToolResultPart)
    assert denial.result == "Tool call denied. Reason: No approval response."


@pytest.mark.parametrize("option", ["messages", "session", "prompt", "system"])
async def test_resume_options_exclude_messages_and_session(option: str) -> None:
    # SPEC R7.1: the checkpoint's history is the messages; session derives from the store.
    store = RecordingStore()
    await _suspended(store)
    with pytest.raises(TypeError, match=option):
        await resume_from_checkpoint(
            store, "run", model=ScriptedModel([]), **{option: "x"}
        )


async def test_resume_uses_a_copy_of_the_checkpoint_history() -> None:
    # SPEC R7.2, R3.3: the stored list is never changed.
    store = RecordingStore()
    await _suspended(store)
    stored = store.load("run")
    assert stored is not None
    before = stored.messages
    await resume_from_checkpoint(
        store,
        "run",
        model=ScriptedModel([reply(text="done")]),
        tools=[_gated()],
        approval_responses=_approve(),
        deps=make_deps(),
    )
    assert stored.messages is before
    assert len(stored.messages) == 2


async def test_resume_works_through_the_codec_of_a_persistent_store() -> None:
    # SPEC R8.5: a store that keeps serialized text.
    class TextStore:
        def __init__(self) -> None:
            self.rows: dict[str, str] = {}

        def save(self, checkpoint: AgentCheckpoint) -> None:
            self.rows[checkpoint.run_id] = serialize_checkpoint(checkpoint)

        def load(self, run_id: str) -> AgentCheckpoint | None:
            row = self.rows.get(run_id)
            return deserialize_checkpoint(row) if row is not None else None

    store = TextStore()
    await _suspended(store)
    result = await resume_from_checkpoint(
        store,
        "run",
        model=ScriptedModel([reply(text="done")]),
        tools=[_gated()],
        approval_responses=_approve(),
        deps=make_deps(),
    )
    assert result.text == "done"


# -- R7.3, R7.4: unknown run ids ------------------------------------------------------------------


async def test_resuming_an_unknown_run_raises_checkpoint_not_found() -> None:
    # SPEC R7.3
    model = ScriptedModel([])
    with pytest.raises(CheckpointNotFoundError) as caught:
        await resume_from_checkpoint(RecordingStore(), "nope", model=model)
    error = caught.value
    assert isinstance(error, DeuzError)
    assert str(error) == "No checkpoint found for runId 'nope'."
    assert error.code == "checkpoint_not_found"
    assert error.run_id == "nope"
    assert type(error).__name__ == "CheckpointNotFoundError"
    assert model.requests == []


async def test_the_streaming_twin_surfaces_an_unknown_run_as_an_error_part() -> None:
    # SPEC R7.4: sync return with run_id set; the only part is error; awaitables reject.
    model = ScriptedModel([])
    stream = resume_stream_from_checkpoint(RecordingStore(), "nope", model=model)
    assert stream.run_id == "nope"
    parts = await collect(stream)
    assert len(parts) == 1
    assert isinstance(parts[0], ErrorPart)
    assert isinstance(parts[0].error, CheckpointNotFoundError)
    with pytest.raises(CheckpointNotFoundError, match="No checkpoint found for runId"):
        await stream.usage
    with pytest.raises(CheckpointNotFoundError):
        await stream.finish_reason
    assert model.requests == []


async def test_the_streaming_twin_never_raises_on_bad_options() -> None:
    # SPEC R7.4
    stream = resume_stream_from_checkpoint(
        RecordingStore(), "run", model=ScriptedModel([]), max_steps=-1
    )
    assert stream.run_id == "run"
    assert [p.type for p in await collect(stream)] == ["error"]


# -- D5: completed runs ----------------------------------------------------------------------------


async def _completed(store: RecordingStore) -> None:
    await generate_text(
        model=ScriptedModel([reply(text="all done")]),
        prompt="go",
        tools=[_gated()],
        session=DurableSession(store, "run"),
        deps=make_deps(),
    )


async def test_resuming_a_completed_run_raises_without_calling_the_model() -> None:
    # D5 (Q4): RunCompletedError, a DeuzError naming the escape hatch.
    store = RecordingStore()
    await _completed(store)
    model = ScriptedModel([reply(text="again")])
    with pytest.raises(RunCompletedError) as caught:
        await resume_from_checkpoint(store, "run", model=model, tools=[_gated()])
    assert isinstance(caught.value, DeuzError)
    assert caught.value.run_id == "run"
    assert "escape hatch" in str(caught.value)
    assert "same session" in str(caught.value)
    assert model.requests == []
    assert len(store.saved) == 1


async def test_the_streaming_twin_surfaces_a_completed_run_as_an_error_part() -> None:
    # D5: an error part and rejected awaitables.
    store = RecordingStore()
    await _completed(store)
    model = ScriptedModel([reply(text="again")])
    stream = resume_stream_from_checkpoint(store, "run", model=model, tools=[_gated()])
    parts = await collect(stream)
    assert [type(p) for p in parts] == [ErrorPart]
    assert isinstance(parts[0].error, RunCompletedError)  # type: ignore[union-attr]
    with pytest.raises(RunCompletedError):
        await stream.usage
    with pytest.raises(RunCompletedError):
        await stream.finish_reason
    assert model.requests == []


# -- R7.5, R7.6: what continues and what restarts ------------------------------------------------


async def test_step_index_and_usage_continue_while_per_leg_counters_restart() -> None:
    # SPEC R7.5
    store = RecordingStore()
    await _suspended(store)
    seen: list[tuple[int, int]] = []

    def prepare(info: Any) -> StepOverrides | None:
        seen.append((info.step_index, info.usage.total_tokens))
        return None

    model = ScriptedModel(
        [
            reply(tool_calls=[("c2", "read", {})], usage=(1, 1)),
            reply(tool_calls=[("c3", "read", {})], usage=(1, 1)),
            reply(text="never"),
        ]
    )
    result = await resume_from_checkpoint(
        store,
        "run",
        model=model,
        tools=[_gated(), Probe().tool("read")],
        max_steps=2,  # per leg: two model turns in this leg
        approval_responses=_approve(),
        prepare_step=prepare,
        deps=make_deps(),
    )
    assert seen == [(1, 15), (2, 17)]
    assert len(model.requests) == 2
    assert result.stopped_by == "max_steps"
    assert [s.step_type for s in result.steps] == ["initial", "tool-result"]
    assert result.usage == usage(2, 2)
    assert [c.step_index for c in store.saved] == [1, 2, 3]
    assert store.saved[-1].usage.total_tokens == 19


async def test_a_streaming_resume_settles_before_step_start_at_the_checkpoint_index() -> (
    None
):
    # SPEC R7.6: settled tool-result first; step-start.stepIndex = cp.stepIndex.
    store = RecordingStore()
    await _suspended(store)
    parts = await collect(
        resume_stream_from_checkpoint(
            store,
            "run",
            model=ScriptedModel([reply(text="done")]),
            tools=[_gated()],
            approval_responses=_approve(),
            deps=make_deps(),
        )
    )
    first_step = next(i for i, p in enumerate(parts) if isinstance(p, StepStartPart))
    results = [i for i, p in enumerate(parts) if isinstance(p, ToolOutputPart)]
    assert results == [1]
    assert first_step > results[0]
    assert parts[first_step] == StepStartPart(1)
    assert tokens(parts)[0] == "tool-state:executing"


async def test_the_streaming_resume_has_the_run_id_synchronously() -> None:
    # SPEC R6.9
    store = RecordingStore()
    await _suspended(store)
    stream = resume_stream_from_checkpoint(
        store, "run", model=ScriptedModel([reply(text="x")]), tools=[_gated()]
    )
    assert stream.run_id == "run"
    await stream.consume()


# -- R7.7: the recovery unit is one step -----------------------------------------------------------


async def test_a_crash_after_settle_re_executes_the_approved_tool_on_the_next_resume() -> (
    None
):
    # SPEC R7.7: the checkpoint still says suspended, so the same verdicts run it again.
    store = RecordingStore()
    await _suspended(store)
    probe = Probe("deleted")
    with pytest.raises(ModelError):
        await resume_from_checkpoint(
            store,
            "run",
            model=ScriptedModel([reply(error="process died")]),
            tools=[_gated(probe)],
            approval_responses=_approve(),
            deps=make_deps(),
        )
    checkpoint = store.load("run")
    assert checkpoint is not None
    assert checkpoint.status == "suspended"
    await resume_from_checkpoint(
        store,
        "run",
        model=ScriptedModel([reply(text="done")]),
        tools=[_gated(probe)],
        approval_responses=_approve(),
        deps=make_deps(),
    )
    assert probe.calls == [{"p": 1}, {"p": 1}]


async def test_a_running_checkpoint_resumes_by_re_driving_the_model() -> None:
    # SPEC R7.7: a crash mid-step re-runs that step from the last boundary.
    store = RecordingStore()
    with pytest.raises(ModelError):
        await generate_text(
            model=ScriptedModel(
                [
                    reply(tool_calls=[("c1", "read", {})], usage=(3, 2)),
                    reply(error="died"),
                ]
            ),
            prompt="go",
            tools=[Probe("r").tool("read")],
            max_steps=5,
            session=DurableSession(store, "run"),
            deps=make_deps(),
        )
    model = ScriptedModel([reply(text="recovered", usage=(1, 1))])
    result = await resume_from_checkpoint(
        store, "run", model=model, tools=[Probe().tool("read")], deps=make_deps()
    )
    assert result.text == "recovered"
    assert [m.role for m in model.requests[0].messages] == ["user", "assistant", "tool"]
    final = store.load("run")
    assert final is not None
    assert (final.status, final.step_index, final.usage.total_tokens) == (
        "completed",
        2,
        7,
    )


# -- R5.14 with D9: the escape hatch ---------------------------------------------------------------


async def test_the_escape_hatch_continues_step_index_and_usage() -> None:
    # D9 (Q11): a call whose session.run_id has a checkpoint continues its counters.
    store = RecordingStore()
    await generate_text(
        model=ScriptedModel(
            [reply(tool_calls=[("c1", "pick_color", {})], usage=(10, 5))]
        ),
        prompt="go",
        tools=[Tool(name="pick_color")],
        session=DurableSession(store, "run"),
        deps=make_deps(),
    )
    checkpoint = store.load("run")
    assert checkpoint is not None
    history = [
        *checkpoint.messages,
        Message("tool", (ToolResultPart("c1", "blue"),)),
    ]
    model = ScriptedModel([reply(text="Blue it is.", usage=(20, 6))])
    result = await generate_text(
        model=model,
        messages=history,
        tools=[Tool(name="pick_color")],
        session=DurableSession(store, "run"),
        deps=make_deps(),
    )
    assert result.text == "Blue it is."
    assert result.usage.total_tokens == 26
    final = store.load("run")
    assert final is not None
    assert (final.step_index, final.status) == (2, "completed")
    assert final.usage.total_tokens == 41


async def test_the_escape_hatch_streams_step_start_at_the_continued_index() -> None:
    # D9: the streaming call continues the counters too.
    store = RecordingStore()
    await _suspended(store)
    checkpoint = store.load("run")
    assert checkpoint is not None
    history = [*checkpoint.messages, Message("tool", (ToolResultPart("c1", "done"),))]
    parts = await collect(
        stream_chat(
            model=ScriptedModel([reply(text="ok")]),
            messages=history,
            tools=[_gated()],
            session=DurableSession(store, "run"),
            deps=make_deps(),
        )
    )
    assert parts[0] == StepStartPart(1)
