"""Sub-agents without durability: the tool shape, the child run, forwarding, the answer
and usage (SPEC R9.1, R9.2, R9.5–R9.7, R9.13)."""

from __future__ import annotations

from typing import Any

from deuz_django.core import (
    AbortController,
    Message,
    StreamPart,
    ToolCall,
    agent_tool,
    generate_text,
    stream_chat,
)
from deuz_django.core.agents import PROMPT_SCHEMA
from deuz_django.core.parts import SubAgentPart, ToolStatePart
from deuz_django.core.testing import ScriptedModel, reply
from tests.core.support import Probe, collect, tokens, usage


def _parent(*calls: tuple[str, str, Any], final: str = "parent done") -> ScriptedModel:
    return ScriptedModel([reply(tool_calls=list(calls)), reply(text=final)])


async def _ask(tool: Any, prompt: str = "task", **options: Any) -> Any:
    return await generate_text(
        model=_parent(("c1", tool.name, {"prompt": prompt})),
        prompt="go",
        tools=[tool],
        max_steps=2,
        **options,
    )


async def _streamed(tool: Any) -> list[StreamPart]:
    """The parts of a streaming parent that calls ``tool`` once, then answers."""
    return await collect(
        stream_chat(
            model=_parent(("c1", tool.name, {"prompt": "p"})),
            prompt="go",
            tools=[tool],
            max_steps=2,
        )
    )


def _answer(result: Any) -> Any:
    return result.steps[0].tool_results[0]


# -- R9.1 ------------------------------------------------------------------------------------


def test_agent_tool_exposes_a_prompt_schema_and_the_description() -> None:
    # SPEC R9.1
    helper = agent_tool(name="helper", model=ScriptedModel([]), description="Helps.")
    assert helper.name == "helper"
    assert helper.description == "Helps."
    assert helper.parameters == {
        "type": "object",
        "properties": {
            "prompt": {"type": "string", "description": "The task for the sub-agent."}
        },
        "required": ["prompt"],
        "additionalProperties": False,
    }
    assert helper.parameters == PROMPT_SCHEMA
    assert helper.needs_approval is False


async def test_needs_approval_gates_the_call_to_the_sub_agent() -> None:
    # SPEC R9.1: it gates the CALL in the parent's flow.
    child = ScriptedModel([])
    helper = agent_tool(name="helper", model=child, needs_approval=True)
    result = await _ask(helper)
    assert [r.tool_name for r in result.pending_approvals or ()] == ["helper"]
    assert child.requests == []


# -- R9.2: the child run ------------------------------------------------------------------


async def test_the_child_sees_its_system_prompt_and_the_task() -> None:
    # SPEC R9.2: messages = [system(def.system)?, user(prompt)].
    child = ScriptedModel([reply(text="done")])
    helper = agent_tool(name="helper", model=child, system="You help.")
    await _ask(helper, "summarize")
    assert child.requests[0].messages == (
        Message("system", "You help."),
        Message("user", "summarize"),
    )


async def test_the_child_gets_its_own_tools_and_max_steps() -> None:
    # SPEC R9.2: tools = def.tools; max_steps default 10.
    probe = Probe("42")
    child = ScriptedModel(
        [reply(tool_calls=[(f"k{i}", "lookup", {})]) for i in range(12)]
    )
    helper = agent_tool(name="helper", model=child, tools=[probe.tool("lookup")])
    result = await _ask(helper)
    assert len(child.requests) == 10
    assert [t.name for t in child.requests[0].tools] == ["lookup"]
    assert _answer(result).result == "(the sub-agent finished without a text answer)"


async def test_the_child_receives_the_parents_signal_object() -> None:
    # SPEC R9.2: signal = ctx.signal, the same object.
    probe = Probe()
    controller = AbortController()
    child = ScriptedModel([reply(tool_calls=[("k1", "inner", {})]), reply(text="ok")])
    helper = agent_tool(name="helper", model=child, tools=[probe.tool("inner")])
    await _ask(helper, signal=controller.signal)
    assert probe.contexts[0].signal is controller.signal
    assert child.requests[0].signal is controller.signal


async def test_server_mode_is_inherited_at_every_depth() -> None:
    # SPEC R9.2: approve_tool_call = ctx.approve_tool_call.
    asked: list[ToolCall] = []

    def approve(call: ToolCall, messages: Any) -> bool:
        asked.append(call)
        return True

    probe = Probe("ran")
    child = ScriptedModel(
        [reply(tool_calls=[("k1", "risky", {"x": 1})]), reply(text="child ok")]
    )
    helper = agent_tool(
        name="helper", model=child, tools=[probe.tool("risky", needs_approval=True)]
    )
    result = await _ask(helper, approve_tool_call=approve)
    assert asked == [ToolCall("k1", "risky", {"x": 1})]
    assert probe.calls == [{"x": 1}]
    assert _answer(result).result == "child ok"


async def test_the_child_path_is_the_parents_path_plus_its_name() -> None:
    # SPEC R9.2: path = ctx.agentPath + [name]; a tool in the child sees it.
    probe = Probe()
    inner_model = ScriptedModel(
        [reply(tool_calls=[("k2", "leaf", {})]), reply(text="x")]
    )
    coder = agent_tool(name="coder", model=inner_model, tools=[probe.tool("leaf")])
    outer_model = ScriptedModel(
        [reply(tool_calls=[("k1", "coder", {"prompt": "p"})]), reply(text="y")]
    )
    researcher = agent_tool(
        name="researcher", model=outer_model, tools=[coder], max_depth=3
    )
    await _ask(researcher)
    assert probe.contexts[0].agent_path == ("researcher", "coder")


async def test_exceeding_max_depth_is_an_error_result_with_the_path() -> None:
    # SPEC R9.2: the message names the depth and the path; it self-heals.
    inner_model = ScriptedModel([])
    coder = agent_tool(name="coder", model=inner_model, max_depth=1)
    outer_model = ScriptedModel(
        [reply(tool_calls=[("k1", "coder", {"prompt": "p"})]), reply(text="y")]
    )
    researcher = agent_tool(name="researcher", model=outer_model, tools=[coder])
    result = await _ask(researcher)
    assert inner_model.requests == []
    inner_result = outer_model.requests[1].messages[-1].content[0]
    assert inner_result.result == (  # type: ignore[union-attr]
        "agentTool 'coder': max agent depth 1 reached (researcher > coder)."
    )
    assert _answer(result).result == "y"


async def test_a_non_string_prompt_is_an_invalid_arguments_result() -> None:
    # SPEC R3.14.4 for the sub-agent's prompt schema.
    helper = agent_tool(name="helper", model=ScriptedModel([]))
    result = await generate_text(
        model=_parent(("c1", "helper", {"prompt": 3})),
        prompt="go",
        tools=[helper],
        max_steps=2,
    )
    assert _answer(result).result.startswith("Invalid arguments: ")


# -- R9.5: forwarding ------------------------------------------------------------------------


async def test_a_streaming_parent_forwards_child_parts_wrapped_with_the_path() -> None:
    # SPEC R9.5, R9.13: the parent's own states are input-streaming, input-complete,
    # executing, then complete.
    child = ScriptedModel([reply(text="child says hi")])
    helper = agent_tool(name="helper", model=child)
    parts = await _streamed(helper)
    forwarded = [p for p in parts if isinstance(p, SubAgentPart)]
    assert tokens(forwarded) == [
        "sub-agent[helper]:step-start",
        "sub-agent[helper]:text-delta",
        "sub-agent[helper]:step-finish",
        "sub-agent[helper]:finish",
    ]
    own_states = [
        p.state
        for p in parts
        if isinstance(p, ToolStatePart) and p.tool_call_id == "c1"
    ]
    assert own_states == ["input-streaming", "input-complete", "executing", "complete"]


async def test_the_child_tool_states_are_forwarded_too() -> None:
    # SPEC R9.13
    child = ScriptedModel([reply(tool_calls=[("k1", "inner", {})]), reply(text="x")])
    helper = agent_tool(name="helper", model=child, tools=[Probe().tool("inner")])
    parts = await _streamed(helper)
    inner_states = [
        p.part.state
        for p in parts
        if isinstance(p, SubAgentPart) and isinstance(p.part, ToolStatePart)
    ]
    assert inner_states == [
        "input-streaming",
        "input-complete",
        "executing",
        "complete",
    ]


async def test_deeper_parts_arrive_single_wrapped_with_their_longer_path() -> None:
    # SPEC R9.5: never nested wrappers.
    inner_model = ScriptedModel([reply(text="deep")])
    coder = agent_tool(name="coder", model=inner_model)
    outer_model = ScriptedModel(
        [reply(tool_calls=[("k1", "coder", {"prompt": "p"})]), reply(text="y")]
    )
    researcher = agent_tool(
        name="researcher", model=outer_model, tools=[coder], max_depth=3
    )
    parts = await _streamed(researcher)
    forwarded = [p for p in parts if isinstance(p, SubAgentPart)]
    assert all(not isinstance(p.part, SubAgentPart) for p in forwarded)
    assert "sub-agent[researcher/coder]:text-delta" in tokens(forwarded)
    assert "sub-agent[researcher]:text-delta" in tokens(forwarded)


async def test_sub_agent_stream_none_turns_forwarding_off() -> None:
    # SPEC R9.5
    helper = agent_tool(
        name="helper", model=ScriptedModel([reply(text="x")]), sub_agent_stream="none"
    )
    parts = await _streamed(helper)
    assert not any(isinstance(p, SubAgentPart) for p in parts)


# -- R9.6: the answer and usage -------------------------------------------------------------


async def test_the_answer_is_the_last_steps_text() -> None:
    # SPEC R9.6
    child = ScriptedModel([reply(text="first"), reply(text="second")])
    result = await _ask(agent_tool(name="helper", model=child))
    assert _answer(result).result == "first"
    assert _answer(result).is_error is None


async def test_a_blank_last_step_falls_back_to_the_latest_earlier_text() -> None:
    # SPEC R9.6
    child = ScriptedModel(
        [
            reply(text="interim answer", tool_calls=[("k1", "inner", {})]),
            reply(text="   "),
        ]
    )
    helper = agent_tool(name="helper", model=child, tools=[Probe().tool("inner")])
    result = await _ask(helper)
    assert _answer(result).result == "interim answer"


async def test_no_text_at_all_gives_the_placeholder() -> None:
    # SPEC R9.6
    child = ScriptedModel([reply()])
    result = await _ask(agent_tool(name="helper", model=child))
    assert _answer(result).result == "(the sub-agent finished without a text answer)"


async def test_a_tool_less_child_still_runs_the_loop() -> None:
    # SPEC R9.2: the child runs the streaming LOOP (not a single turn), tools or not.
    child = ScriptedModel([reply(text="hi")])
    helper = agent_tool(name="helper", model=child)
    parts = await _streamed(helper)
    assert "sub-agent[helper]:step-start" in tokens(parts)


async def test_child_usage_folds_into_the_parent_leg_but_not_the_step() -> None:
    # SPEC R9.6, R1.16: parent result usage includes the child; step usage does not.
    child = ScriptedModel([reply(text="x", usage=(100, 10))])
    helper = agent_tool(name="helper", model=child)
    model = ScriptedModel(
        [
            reply(tool_calls=[("c1", "helper", {"prompt": "p"})], usage=(10, 5)),
            reply(text="done", usage=(20, 6)),
        ]
    )
    result = await generate_text(model=model, prompt="go", tools=[helper], max_steps=2)
    assert result.usage == usage(130, 21)
    assert result.steps[0].usage == usage(10, 5)


# -- R9.7: client-mode approval without a session ----------------------------------------------


async def test_a_gated_call_in_a_sessionless_sub_agent_is_an_error_result() -> None:
    # SPEC R9.7: the exact message, self-healing as is_error.
    probe = Probe()
    child = ScriptedModel([reply(tool_calls=[("k1", "risky", {})])])
    helper = agent_tool(
        name="helper", model=child, tools=[probe.tool("risky", needs_approval=True)]
    )
    result = await _ask(helper)
    assert probe.calls == []
    outcome = _answer(result)
    assert outcome.is_error is True
    assert outcome.result == (
        "agentTool 'helper': a sub-agent tool call needs approval. Client-mode approval "
        "inside a sub-agent is not supported yet without a durable session — pass a "
        "server-mode approveToolCall on the parent call, or add `session` (1.5 durable "
        "sessions) so the run can suspend and resume."
    )
    assert result.pending_approvals is None
    assert result.text == "parent done"


async def test_a_failing_child_model_is_an_error_result_for_the_parent() -> None:
    # SPEC R3.14.6: the child's error self-heals as the parent's is_error result.
    child = ScriptedModel([reply(error="child model down")])
    result = await _ask(agent_tool(name="helper", model=child))
    assert (_answer(result).result, _answer(result).is_error) == (
        "child model down",
        True,
    )
