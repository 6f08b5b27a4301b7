"""Checkpoints at every step boundary (SPEC §6: R6.1–R6.10, the B1–B9 table, D1)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from deuz_django.core import (
    AbortController,
    Message,
    Tool,
    agent_tool,
    generate_text,
    step_count_is,
    stream_chat,
)
from deuz_django.core.durable import (
    AgentCheckpoint,
    DurableSession,
    resume_from_checkpoint,
)
from deuz_django.core.parts import StreamPart
from deuz_django.core.testing import ScriptedModel, reply
from tests.core.support import (
    FakeClock,
    HangingModel,
    Probe,
    RecordingLogger,
    RecordingStore,
    make_deps,
    usage,
)


def _weather() -> Tool:
    return Probe({"temp": 22}).tool("get_weather")


def _gated(name: str = "delete") -> Tool:
    return Probe("deleted").tool(name, needs_approval=True)


async def _leg(store: RecordingStore, model: ScriptedModel, **options: Any) -> Any:
    options.setdefault("max_steps", 10)
    return await generate_text(
        model=model,
        prompt="go",
        session=DurableSession(store, "run"),
        deps=make_deps(),
        **options,
    )


# -- R6.4: the boundary table --------------------------------------------------------------


async def _b1(store: RecordingStore) -> None:
    await _leg(
        store,
        ScriptedModel([reply(tool_calls=[("c1", "get_weather", {})]), reply(text="x")]),
        tools=[_weather()],
    )


async def _b2(store: RecordingStore) -> None:
    await _leg(
        store,
        ScriptedModel([reply(tool_calls=[(f"c{i}", "flaky", {})]) for i in range(3)]),
        tools=[Probe(error="down").tool("flaky")],
    )


async def _b3(store: RecordingStore) -> None:
    await _leg(
        store,
        ScriptedModel([reply(tool_calls=[("c1", "get_weather", {})])]),
        tools=[_weather()],
        stop_when=step_count_is(1),
    )


async def _b4(store: RecordingStore) -> None:
    await _leg(store, ScriptedModel([reply(text="hello")]), tools=[_weather()])


async def _b7(store: RecordingStore) -> None:
    await _leg(
        store,
        ScriptedModel([reply(tool_calls=[("c1", "delete", {"p": 1})])]),
        tools=[_gated()],
    )


async def _b7_client(store: RecordingStore) -> None:
    await _leg(
        store,
        ScriptedModel([reply(tool_calls=[("c1", "pick", {})])]),
        tools=[Tool(name="pick")],
    )


def _coder(child: ScriptedModel) -> Tool:
    return agent_tool(name="coder", model=child, tools=[_gated("run_shell")])


async def _b8(store: RecordingStore) -> None:
    child = ScriptedModel([reply(tool_calls=[("k1", "run_shell", {})])])
    await _leg(
        store,
        ScriptedModel([reply(tool_calls=[("c1", "coder", {"prompt": "p"})])]),
        tools=[_coder(child)],
    )


async def _b9(store: RecordingStore) -> None:
    child = ScriptedModel(
        [
            reply(tool_calls=[("k1", "run_shell", {})]),
            reply(tool_calls=[("k2", "run_shell", {})]),
        ]
    )
    parent = ScriptedModel([reply(tool_calls=[("c1", "coder", {"prompt": "p"})])])
    await _leg(store, parent, tools=[_coder(child)])
    await resume_from_checkpoint(
        store,
        "run",
        model=parent,
        tools=[_coder(child)],
        max_steps=10,
        approval_responses=[{"approval_id": "k1", "approved": True}],
        deps=make_deps(),
    )


BOUNDARIES: list[tuple[str, Callable[[RecordingStore], Awaitable[None]], Any]] = [
    # (case, scenario, (statuses saved for "run", last role, pending call ids or None))
    ("B1 tool step, no stop", _b1, (["running", "completed"], "assistant", None)),
    ("B2 runaway guard", _b2, (["running", "running", "completed"], "tool", None)),
    ("B3 stop condition", _b3, (["completed"], "tool", None)),
    ("B4 natural completion", _b4, (["completed"], "assistant", None)),
    ("B7 client-mode break", _b7, (["suspended"], "assistant", ["c1"])),
    ("B7 client tool only", _b7_client, (["suspended"], "assistant", None)),
    ("B8 sub-agent suspended", _b8, (["suspended"], "assistant", ["k1"])),
    (
        "B9 re-suspended in settle",
        _b9,
        (["suspended", "suspended"], "assistant", ["k2"]),
    ),
]


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [(s, e) for _, s, e in BOUNDARIES],
    ids=[c for c, _, _ in BOUNDARIES],
)
async def test_each_boundary_saves_its_status_history_and_pending_approvals(
    scenario: Callable[[RecordingStore], Awaitable[None]], expected: Any
) -> None:
    # SPEC R6.4
    statuses, last_role, pending = expected
    store = RecordingStore()
    await scenario(store)
    saved = store.saved_for("run")
    assert [c.status for c in saved] == statuses
    final = saved[-1]
    assert final.messages[-1].role == last_role
    if pending is None:
        assert final.pending_approvals is None
        assert "pendingApprovals" not in final.to_json()
    else:
        assert [r.approval_id for r in final.pending_approvals or ()] == pending


async def test_b1_running_boundary_ends_with_the_tool_message() -> None:
    # SPEC R6.4 B1: the intermediate running checkpoint ends with the tool message.
    store = RecordingStore()
    await _b1(store)
    assert store.saved[0].messages[-1].role == "tool"


async def test_b9_keeps_the_pre_settle_history() -> None:
    # SPEC R6.4 B9: unchanged pre-settle history; the boundary still counts (R6.6).
    store = RecordingStore()
    await _b9(store)
    before, after = store.saved_for("run")
    assert after.messages == before.messages
    assert (before.step_index, after.step_index) == (1, 2)


# -- R6.3: what a checkpoint holds ---------------------------------------------------------------


async def test_step_id_and_step_index_count_boundaries() -> None:
    # SPEC R6.3, R6.6
    store = RecordingStore()
    model = ScriptedModel(
        [
            reply(tool_calls=[("c1", "get_weather", {})]),
            reply(tool_calls=[("c2", "get_weather", {})]),
            reply(text="done"),
        ]
    )
    await _leg(store, model, tools=[_weather()])
    assert [(c.step_index, c.step_id) for c in store.saved] == [
        (1, "run#1"),
        (2, "run#2"),
        (3, "run#3"),
    ]


async def test_checkpoint_json_keys_are_in_the_reference_order() -> None:
    # SPEC R6.3
    store = RecordingStore()
    await _b7(store)
    assert list(store.saved[0].to_json()) == [
        "version",
        "runId",
        "stepId",
        "stepIndex",
        "status",
        "messages",
        "usage",
        "pendingApprovals",
        "createdAt",
    ]
    assert store.saved[0].version == 1


async def test_created_at_is_the_injected_clock_at_save_time() -> None:
    # SPEC R6.3, R6.8
    clock = FakeClock(5_000)

    async def tick(args: Any, ctx: Any) -> str:
        clock.ms += 250
        return "ok"

    store = RecordingStore()
    model = ScriptedModel([reply(tool_calls=[("c1", "tick", {})]), reply(text="x")])
    await generate_text(
        model=model,
        prompt="go",
        tools=[Tool(name="tick", execute=tick)],
        max_steps=3,
        session=DurableSession(store, "run"),
        deps=make_deps(clock=clock),
    )
    assert [c.created_at for c in store.saved] == [5_250, 5_250]


async def test_checkpoint_usage_is_cumulative_across_legs_and_results_are_per_leg() -> (
    None
):
    # SPEC R6.7: their example — a 15-token leg, then a 26-token leg: 41 in the store.
    store = RecordingStore()
    first = await _leg(
        store,
        ScriptedModel([reply(tool_calls=[("c1", "delete", {})], usage=(10, 5))]),
        tools=[_gated()],
    )
    assert first.usage.total_tokens == 15
    second = await resume_from_checkpoint(
        store,
        "run",
        model=ScriptedModel([reply(text="done", usage=(20, 6))]),
        tools=[_gated()],
        approval_responses=[{"approval_id": "c1", "approved": True}],
        deps=make_deps(),
    )
    assert second.usage.total_tokens == 26
    final = store.load("run")
    assert final is not None
    assert final.usage == usage(30, 11)
    assert final.usage.total_tokens == 41


async def test_sub_agent_usage_is_in_the_parent_checkpoint() -> None:
    # SPEC R6.7: including sub-agent usage folded in via report_usage.
    store = RecordingStore()
    helper = agent_tool(name="helper", model=ScriptedModel([reply(usage=(100, 0))]))
    await _leg(
        store,
        ScriptedModel(
            [
                reply(tool_calls=[("c1", "helper", {"prompt": "p"})], usage=(1, 1)),
                reply(usage=(1, 1)),
            ]
        ),
        tools=[helper],
    )
    assert store.saved_for("run")[0].usage.total_tokens == 102


# -- R6.3.3: best-effort saves -------------------------------------------------------------------


async def _weather_leg(store: Any, logger: RecordingLogger) -> Any:
    """A tool step and an answer: two boundaries, saved into ``store``."""
    model = ScriptedModel(
        [reply(tool_calls=[("c1", "get_weather", {})]), reply(text="ok")]
    )
    return await generate_text(
        model=model,
        prompt="go",
        tools=[_weather()],
        max_steps=3,
        session=DurableSession(store, "run"),
        deps=make_deps(logger=logger),
    )


class FailingOnce(RecordingStore):
    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.error = error
        self.attempts = 0

    def save(self, checkpoint: AgentCheckpoint) -> None:
        self.attempts += 1
        if self.attempts == 1:
            raise self.error
        super().save(checkpoint)


async def test_a_failing_save_is_logged_with_the_reference_message_and_the_run_goes_on() -> (
    None
):
    # SPEC R6.3.3: logger.error(f"durable: checkpoint save failed for '{stepId}' — {detail}")
    store = FailingOnce(OSError("disk full"))
    logger = RecordingLogger()
    result = await _weather_leg(store, logger)
    assert result.text == "ok"
    assert [msg for msg, _ in logger.errors] == [
        "durable: checkpoint save failed for 'run#1' — disk full"
    ]
    # R6.3.1: step_index was incremented even though the save failed.
    assert [c.step_index for c in store.saved] == [2]


async def test_an_async_store_is_awaited() -> None:
    # SPEC R6.1: save/load may be sync or async.
    class AsyncStore:
        def __init__(self) -> None:
            self.data: dict[str, AgentCheckpoint] = {}

        async def save(self, checkpoint: AgentCheckpoint) -> None:
            await asyncio.sleep(0)
            self.data[checkpoint.run_id] = checkpoint

        async def load(self, run_id: str) -> AgentCheckpoint | None:
            return self.data.get(run_id)

    store = AsyncStore()
    await generate_text(
        model=ScriptedModel([reply(tool_calls=[("c1", "delete", {})])]),
        prompt="go",
        tools=[_gated()],
        session=DurableSession(store, "run"),
        deps=make_deps(),
    )
    resumed = await resume_from_checkpoint(
        store,
        "run",
        model=ScriptedModel([reply(text="done")]),
        tools=[_gated()],
        approval_responses=[{"approval_id": "c1", "approved": True}],
        deps=make_deps(),
    )
    assert resumed.text == "done"
    assert store.data["run"].status == "completed"


async def test_a_store_that_never_loads_still_runs() -> None:
    # SPEC R6.10: the loop never reads a checkpoint back during a leg.
    class WriteOnly:
        def __init__(self) -> None:
            self.saves = 0

        def save(self, checkpoint: AgentCheckpoint) -> None:
            self.saves += 1

        def load(self, run_id: str) -> None:
            return None

    store = WriteOnly()
    result = await _weather_leg(store, RecordingLogger())
    assert result.text == "ok"
    assert store.saves == 2


# -- R6.5: where the save sits in the stream -----------------------------------------------------


async def test_streaming_saves_before_the_next_step_start_and_before_finish() -> None:
    # SPEC R6.5: a consumer who sees finish knows every save of the leg was attempted.
    seen: list[StreamPart] = []
    at_save: list[str] = []

    class Watching(RecordingStore):
        async def save(self, checkpoint: AgentCheckpoint) -> None:  # type: ignore[override]
            for _ in range(10):  # let the reader catch up with what was emitted
                await asyncio.sleep(0)
            at_save.append(seen[-1].type)
            super().save(checkpoint)

    stream = stream_chat(
        model=ScriptedModel(
            [reply(tool_calls=[("c1", "get_weather", {})]), reply(text="done")]
        ),
        prompt="go",
        tools=[_weather()],
        max_steps=3,
        session=DurableSession(Watching(), "run"),
        deps=make_deps(),
    )
    async for part in stream.full_stream:
        seen.append(part)
    # Each save came after the step's last part and before the next step-start/finish.
    assert at_save == ["tool-state", "step-finish"]


# -- D1: an aborted step is never checkpointed --------------------------------------------------


@pytest.mark.parametrize("entry", ["generate_text", "stream_chat"])
async def test_an_aborted_step_is_never_checkpointed(entry: str) -> None:
    # D1, SPEC R6.4 (NOT checkpointed: an aborted step, in both entry points).
    controller = AbortController()
    store = RecordingStore()
    options: dict[str, Any] = {
        "model": HangingModel(on_hang=controller.abort),
        "prompt": "go",
        "tools": [_weather()],
        "signal": controller.signal,
        "session": DurableSession(store, "run"),
    }
    if entry == "generate_text":
        result = await generate_text(**options)
        finish = result.finish_reason
    else:
        stream = stream_chat(**options)
        finish = await stream.finish_reason
    assert finish == "aborted"
    assert store.saved == []


# -- R6.2, R6.9: run ids --------------------------------------------------------------------------


async def test_a_session_without_run_id_gets_one_from_generate_id() -> None:
    # SPEC R6.2, R6.9
    store = RecordingStore()
    result = await generate_text(
        model=ScriptedModel([reply(text="x")]),
        prompt="go",
        tools=[_weather()],
        session=DurableSession(store),
        deps=make_deps(),
    )
    assert result.run_id == "id-1"
    assert store.saved[0].run_id == "id-1"


async def test_run_id_is_only_on_durable_results() -> None:
    # SPEC R6.9
    result = await generate_text(
        model=ScriptedModel([reply(text="x")]), prompt="go", tools=[_weather()]
    )
    assert result.run_id is None


async def test_the_in_memory_store_keeps_the_latest_save_per_run() -> None:
    # SPEC R6.1
    store = RecordingStore()
    await _b1(store)
    assert store.load("run") is store.saved[-1]
    assert store.list() == ["run"]
    store.delete("run")
    assert store.load("run") is None


async def test_a_checkpoint_holds_the_effective_history_as_a_tuple() -> None:
    # SPEC R6.3: messages is the history at the boundary.
    store = RecordingStore()
    await _b4(store)
    assert store.saved[0].messages[0] == Message("user", "go")
    assert isinstance(store.saved[0].messages, tuple)


async def test_a_store_that_cannot_load_never_kills_a_named_fresh_run() -> None:
    # SPEC R6.3.3, R6.10 with D9: the counter lookup is as best-effort as the saves.
    class LoadFails(RecordingStore):
        def load(self, run_id: str) -> AgentCheckpoint | None:
            raise ConnectionError("database is down")

    logger = RecordingLogger()
    store = LoadFails()
    result = await _weather_leg(store, logger)
    assert result.text == "ok"
    assert [msg for msg, _ in logger.errors] == [
        "durable: checkpoint load failed for 'run' — database is down"
    ]
    assert [c.step_index for c in store.saved] == [1, 2]
