"""Tools: definition, argument handling, execution outcomes, concurrency and timeouts
(SPEC R1.11–R1.14, R3.13–R3.15)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from deuz_django.core import (
    AbortController,
    InvalidInputError,
    Reconciliation,
    Tool,
    ToolContext,
    ToolResultPart,
    Usage,
    generate_text,
    stream_chat,
    tool,
)
from deuz_django.core.durable import DurableSession, create_in_memory_session_store
from deuz_django.core.parts import TextDeltaPart, ToolOutputPart
from deuz_django.core.testing import ScriptedModel, reply
from tests.core.support import NeverClock, Probe, make_deps


def _results(result: Any) -> list[ToolResultPart]:
    tool_message = next(m for m in result.response_messages if m.role == "tool")
    return list(tool_message.content)


async def _one_call(
    tools: Any, name: str, args: Any, **options: Any
) -> list[ToolResultPart]:
    model = ScriptedModel([reply(tool_calls=[("c1", name, args)]), reply(text="ok")])
    result = await generate_text(
        model=model, prompt="go", tools=tools, max_steps=2, **options
    )
    return _results(result)


# -- R1.11, R1.12: definitions and validation -----------------------------------------


def test_tool_decorator_builds_a_json_schema_from_the_signature() -> None:
    # DESIGN §3, SPEC R1.11
    @tool
    def get_weather(city: str, days: int = 1) -> str:
        """Weather for a city.

        More detail the model does not need."""
        return city

    assert get_weather.name == "get_weather"
    assert get_weather.description == "Weather for a city."
    assert get_weather.parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer", "default": 1},
        },
        "required": ["city"],
        "additionalProperties": False,
    }


def test_the_context_parameter_is_not_shown_to_the_model() -> None:
    # SPEC R1.13: a parameter annotated ToolContext receives the context.
    @tool
    def whoami(ctx: ToolContext) -> str:
        return ctx.tool_call_id

    assert whoami.parameters["properties"] == {}


async def test_a_raw_json_schema_is_not_validated() -> None:
    # SPEC R1.12: execute receives the parsed args as they are.
    probe = Probe()
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    raw = probe.tool("raw")
    raw = Tool(name="raw", parameters=schema, execute=raw.execute)
    await _one_call([raw], "raw", {"n": "not a number", "extra": True})
    assert probe.calls == [{"n": "not a number", "extra": True}]


async def test_invalid_arguments_become_an_error_result_without_executing() -> None:
    # SPEC R3.14.4, DESIGN §3: "Invalid arguments: " + the issues joined by "; ".
    ran: list[Any] = []

    @tool
    def add(a: int, b: int) -> int:
        ran.append((a, b))
        return a + b

    [result] = await _one_call([add], "add", {"a": "x"})
    assert result.is_error is True
    assert result.result.startswith("Invalid arguments: ")
    assert "a: " in result.result
    assert "; b: " in result.result
    assert ran == []


async def test_validated_arguments_are_coerced_before_execute() -> None:
    # DESIGN §3: arguments validated before execute.
    @tool
    def add(a: int, b: int) -> int:
        return a + b

    [result] = await _one_call([add], "add", {"a": 2, "b": 3})
    assert result.result == 5
    assert result.is_error is None


# -- R1.13: the execute context -------------------------------------------------------


async def test_execute_context_carries_the_call_history_signal_and_deps() -> None:
    # SPEC R1.13: messages include this step's assistant turn; the caller's signal object.
    probe = Probe()
    controller = AbortController()
    deps = make_deps()
    await _one_call(
        [probe.tool("t")], "t", {"x": 1}, signal=controller.signal, deps=deps
    )
    [ctx] = probe.contexts
    assert ctx.tool_call_id == "c1"
    assert ctx.tool_name == "t"
    assert [m.role for m in ctx.messages] == ["user", "assistant"]
    assert ctx.signal is controller.signal
    assert ctx.deps is deps
    assert ctx.session is None
    assert ctx.approval_responses is None


async def test_execute_context_has_the_session_on_durable_loops() -> None:
    # SPEC R1.13: session is {store, runId} when the loop is durable.
    probe = Probe()
    store = create_in_memory_session_store()
    await _one_call([probe.tool("t")], "t", {}, session=DurableSession(store, "run-1"))
    [ctx] = probe.contexts
    assert ctx.session == DurableSession(store, "run-1")


async def test_report_usage_adds_to_the_leg_usage() -> None:
    # SPEC R1.13, R9.6: reportUsage folds extra usage into the leg total.
    async def execute(args: Any, ctx: ToolContext) -> str:
        ctx.report_usage(Usage(input_tokens=100, total_tokens=100))
        return "ok"

    model = ScriptedModel([reply(tool_calls=[("c1", "t", {})], usage=(1, 1)), reply()])
    result = await generate_text(
        model=model, prompt="go", tools=[Tool(name="t", execute=execute)], max_steps=2
    )
    assert result.usage.total_tokens == 102
    assert result.steps[0].usage.total_tokens == 2


# -- R1.14, R3.14: outcomes ------------------------------------------------------------


async def test_success_result_has_no_is_error_key() -> None:
    # SPEC R3.14.7
    [result] = await _one_call([Probe({"temp": 22}).tool("t")], "t", {})
    assert result.to_json() == {
        "type": "tool_result",
        "toolUseId": "c1",
        "result": {"temp": 22},
    }


async def test_unknown_tool_lists_the_available_tools() -> None:
    # SPEC R3.14.2
    [result] = await _one_call(
        [Probe().tool("alpha"), Probe().tool("beta")], "gamma", {}
    )
    assert result.result == 'No such tool: "gamma". Available tools: alpha, beta.'
    assert result.is_error is True


@pytest.mark.parametrize("name", ["keys", "__class__", "get", "__init__"])
async def test_a_tool_name_is_looked_up_as_an_own_key_only(name: str) -> None:
    # SPEC R3.14.2: never resolved through attributes or defaults.
    [result] = await _one_call([Probe().tool("alpha")], name, {})
    assert result.result == f'No such tool: "{name}". Available tools: alpha.'


async def test_a_raised_message_becomes_the_error_result() -> None:
    # SPEC R3.14.6
    [result] = await _one_call([Probe(error="disk full").tool("t")], "t", {})
    assert (result.result, result.is_error) == ("disk full", True)


async def test_a_raise_without_message_gets_the_generic_text() -> None:
    # SPEC R3.14.6
    async def execute(args: Any, ctx: Any) -> Any:
        raise RuntimeError

    [result] = await _one_call([Tool(name="t", execute=execute)], "t", {})
    assert result.result == "Tool 't' threw during execution."
    assert result.is_error is True


async def test_sync_tools_run_in_a_worker_thread() -> None:
    # DESIGN §3 (kept decision): sync tools never block the event loop.
    threads: list[threading.Thread] = []

    def execute(args: Any, ctx: Any) -> str:
        threads.append(threading.current_thread())
        return "ok"

    [result] = await _one_call([Tool(name="t", execute=execute)], "t", {})
    assert result.result == "ok"
    assert threads[0] is not threading.main_thread()


# -- R3.13: concurrency ----------------------------------------------------------------


async def _parallel(count: int, **options: Any) -> tuple[int, list[Any]]:
    running = 0
    peak = 0

    async def execute(args: Any, ctx: Any) -> Any:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        for _ in range(5):
            await asyncio.sleep(0)
        running -= 1
        return args["i"]

    calls = [(f"c{i}", "t", {"i": i}) for i in range(count)]
    model = ScriptedModel([reply(tool_calls=calls), reply(text="ok")])
    result = await generate_text(
        model=model,
        prompt="go",
        tools=[Tool(name="t", execute=execute)],
        max_steps=2,
        **options,
    )
    return peak, [r.result for r in _results(result)]


async def test_tool_calls_run_concurrently_up_to_the_default_cap_of_five() -> None:
    # SPEC R2.3, R3.13
    peak, _ = await _parallel(7)
    assert peak == 5


async def test_max_tool_concurrency_caps_the_batch() -> None:
    # SPEC R3.13: cap = max(1, min(max_tool_concurrency, calls)).
    peak, _ = await _parallel(4, max_tool_concurrency=2)
    assert peak == 2
    peak, _ = await _parallel(3, max_tool_concurrency=1)
    assert peak == 1


async def test_max_tool_concurrency_zero_runs_the_calls_one_at_a_time() -> None:
    # SPEC R3.13: the cap is max(1, …), so 0 behaves like 1; every call still runs.
    peak, results = await _parallel(3, max_tool_concurrency=0)
    assert peak == 1
    assert results == [0, 1, 2]


@pytest.mark.parametrize("cap", [-1, 1.5, True, None])
async def test_max_tool_concurrency_must_be_a_non_negative_integer(cap: Any) -> None:
    with pytest.raises(InvalidInputError, match="max_tool_concurrency"):
        await _parallel(1, max_tool_concurrency=cap)


async def test_results_come_back_in_call_order_not_completion_order() -> None:
    # SPEC R3.13
    second_done = asyncio.Event()
    finished: list[str] = []

    async def slow(args: Any, ctx: Any) -> str:
        await second_done.wait()
        finished.append("slow")
        return "slow"

    async def fast(args: Any, ctx: Any) -> str:
        finished.append("fast")
        second_done.set()
        return "fast"

    model = ScriptedModel(
        [reply(tool_calls=[("c1", "slow", {}), ("c2", "fast", {})]), reply()]
    )
    result = await generate_text(
        model=model,
        prompt="go",
        tools=[Tool(name="slow", execute=slow), Tool(name="fast", execute=fast)],
        max_steps=2,
    )
    assert finished == ["fast", "slow"]
    assert [r.result for r in _results(result)] == ["slow", "fast"]


# -- R3.15: timeouts -------------------------------------------------------------------


async def test_a_tool_past_its_timeout_is_abandoned_with_the_reference_text() -> None:
    # SPEC R3.14.5, R3.15: the timer comes from the injected clock.
    signals: list[Any] = []

    async def stuck(args: Any, ctx: ToolContext) -> str:
        signals.append(ctx.signal)
        await asyncio.Event().wait()
        return "never"

    [result] = await _one_call(
        [Tool(name="stuck", execute=stuck, timeout_ms=50)],
        "stuck",
        {},
        deps=make_deps(),
    )
    assert result.result == "Tool 'stuck' timed out after 50ms and was abandoned."
    assert result.is_error is True
    [signal] = signals
    assert signal.aborted
    assert isinstance(signal.reason, TimeoutError)
    assert str(signal.reason) == "Tool execution exceeded 50ms."


async def test_a_tool_that_finishes_first_is_not_timed_out() -> None:
    # SPEC R3.15: the timer only decides when it fires first (here it never fires).
    [result] = await _one_call(
        [Probe("fine").tool("t", timeout_ms=50)],
        "t",
        {},
        deps=make_deps(clock=NeverClock()),
    )
    assert (result.result, result.is_error) == ("fine", None)


async def test_a_timeout_caps_the_signal_but_keeps_the_callers_abort() -> None:
    # SPEC R3.15: with a cap, the tool gets a combined signal that follows the caller's.
    probe = Probe()
    controller = AbortController()
    await _one_call(
        [probe.tool("t", timeout_ms=50)],
        "t",
        {},
        signal=controller.signal,
        deps=make_deps(clock=NeverClock()),
    )
    [ctx] = probe.contexts
    assert ctx.signal is not controller.signal
    controller.abort()
    assert ctx.signal.aborted


@pytest.mark.parametrize("timeout_ms", [None, 0, -5])
async def test_without_a_positive_cap_the_tool_gets_the_callers_signal_object(
    timeout_ms: float | None,
) -> None:
    # SPEC R3.15: only positive values arm a timer; no cap → same signal identity.
    probe = Probe()
    controller = AbortController()
    await _one_call(
        [probe.tool("t", timeout_ms=timeout_ms)], "t", {}, signal=controller.signal
    )
    assert probe.contexts[0].signal is controller.signal


async def test_a_sync_tool_can_emit_parts_from_its_worker_thread() -> None:
    # SPEC R1.13 (emitPart), R4.2: parts a sync tool emits arrive, in order, before its
    # result, although the tool runs off the event loop.
    def chatty(args: Any, ctx: ToolContext) -> str:
        assert ctx.emit_part is not None
        for word in ("one", "two", "three"):
            ctx.emit_part(TextDeltaPart(word))
        return "spoke"

    model = ScriptedModel([reply(tool_calls=[("c1", "chatty", {})]), reply()])
    stream = stream_chat(
        model=model,
        prompt="go",
        tools=[Tool(name="chatty", execute=chatty)],
        max_steps=2,
    )
    parts = [p async for p in stream.full_stream]
    emitted = [p.text for p in parts if isinstance(p, TextDeltaPart)]
    assert emitted == ["one", "two", "three"]
    last_text = max(i for i, p in enumerate(parts) if isinstance(p, TextDeltaPart))
    result_at = next(i for i, p in enumerate(parts) if isinstance(p, ToolOutputPart))
    assert last_text < result_at


def test_idempotent_and_editable_are_data_on_the_tool() -> None:
    # Both default to False and travel with the Tool, however it was built.
    plain = Tool(name="t")
    assert (plain.idempotent, plain.editable) == (False, False)
    flagged = Tool(name="t", idempotent=True, editable=True)
    assert (flagged.idempotent, flagged.editable) == (True, True)

    @tool(idempotent=True, editable=True, needs_approval=True)
    def send(to: str) -> str:
        """Send a message."""
        return to

    assert (send.idempotent, send.editable, send.needs_approval) == (True, True, True)

    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    assert (ping.idempotent, ping.editable) == (False, False)


def _found(args: Any, ctx: ToolContext) -> Reconciliation:
    return Reconciliation.cannot_tell()


def test_reconcile_travels_with_the_tool_and_excludes_idempotent() -> None:
    @tool(reconcile=_found)
    def refund(usd: int) -> str:
        """Refund."""
        return "refunded"

    assert (refund.reconcile, refund.idempotent) == (_found, False)
    assert Tool(name="t").reconcile is None
    # An idempotent call in doubt runs again: its reconcile would never be asked.
    with pytest.raises(InvalidInputError, match="exclude each other"):
        Tool(name="t", idempotent=True, reconcile=_found)


def test_only_a_call_that_happened_has_a_found_outcome() -> None:
    assert Reconciliation.happened({"id": "re_1"}) == Reconciliation(
        "happened", {"id": "re_1"}, False
    )
    assert Reconciliation.happened("declined", is_error=True).is_error
    assert Reconciliation.did_not_happen().status == "did-not-happen"
    assert Reconciliation.cannot_tell().status == "cannot-tell"
    with pytest.raises(InvalidInputError):
        Reconciliation("did-not-happen", "refunded")
    with pytest.raises(InvalidInputError):
        Reconciliation("maybe")  # type: ignore[arg-type]
