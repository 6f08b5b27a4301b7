"""Durable sub-agents: child checkpoints, bubbling approvals, verdicts at any depth and
resume of children (SPEC R9.3, R9.4, R9.6–R9.11, D8)."""

from __future__ import annotations

from typing import Any

import pytest

from deuz_django.core import (
    Tool,
    ToolApprovalRequest,
    agent_tool,
    generate_text,
    stream_chat,
)
from deuz_django.core.durable import (
    DurableSession,
    resume_from_checkpoint,
    resume_stream_from_checkpoint,
)
from deuz_django.core.parts import StepStartPart, ToolApprovalRequestPart
from deuz_django.core.testing import ScriptedModel, reply
from tests.core.support import Probe, RecordingStore, collect, make_deps


def _shell(probe: Probe | None = None) -> Tool:
    return (probe or Probe("ran")).tool("run_shell", needs_approval=True)


async def _start(
    store: RecordingStore, parent: ScriptedModel, tools: list[Tool]
) -> Any:
    return await generate_text(
        model=parent,
        prompt="go",
        tools=tools,
        max_steps=5,
        session=DurableSession(store, "root"),
        deps=make_deps(),
    )


async def _resume(
    store: RecordingStore, parent: ScriptedModel, tools: list[Tool], *verdicts: Any
) -> Any:
    return await resume_from_checkpoint(
        store,
        "root",
        model=parent,
        tools=tools,
        max_steps=5,
        approval_responses=[
            v if isinstance(v, dict) else {"approval_id": v, "approved": True}
            for v in verdicts
        ],
        deps=make_deps(),
    )


# -- R9.3: child keys ----------------------------------------------------------------------
async def test_a_child_checkpoints_under_parent_name_and_tool_call_id() -> None:
    # SPEC R9.3: f"{parentRunId}::{name}#{toolCallId}", with agentPath and its own stepId.
    store = RecordingStore()
    child = ScriptedModel([reply(tool_calls=[("k1", "run_shell", {"cmd": "ls"})])])
    coder = agent_tool(name="coder", model=child, tools=[_shell()])
    parent = ScriptedModel([reply(tool_calls=[("c1", "coder", {"prompt": "fix"})])])
    result = await _start(store, parent, [coder])
    assert store.list() == ["root::coder#c1", "root"]
    [child_checkpoint] = store.saved_for("root::coder#c1")
    assert child_checkpoint.status == "suspended"
    assert child_checkpoint.agent_path == ("coder",)
    assert child_checkpoint.step_id == "root::coder#c1#1"
    assert child_checkpoint.to_json()["agentPath"] == ["coder"]
    # SPEC R9.8: the parent's pending approvals are the child's, tagged with agent_path.
    assert result.pending_approvals == (
        ToolApprovalRequest(
            approval_id="k1",
            tool_call_id="k1",
            tool_name="run_shell",
            input={"cmd": "ls"},
            agent_path=("coder",),
        ),
    )


def _nested(inner: ScriptedModel, outer: ScriptedModel, shell: Tool) -> Tool:
    coder = agent_tool(name="coder", model=inner, tools=[shell])
    return agent_tool(name="researcher", model=outer, tools=[coder])


async def test_nested_children_key_under_their_parent_child_and_bubble_the_path() -> (
    None
):
    # SPEC R9.3: root::researcher#c1::coder#c2; agent_path bubbles up unchanged.
    store = RecordingStore()
    inner = ScriptedModel([reply(tool_calls=[("c3", "run_shell", {})])])
    outer = ScriptedModel([reply(tool_calls=[("c2", "coder", {"prompt": "p"})])])
    researcher = _nested(inner, outer, _shell())
    parent = ScriptedModel([reply(tool_calls=[("c1", "researcher", {"prompt": "p"})])])
    result = await _start(store, parent, [researcher])
    assert set(store.list()) == {
        "root",
        "root::researcher#c1",
        "root::researcher#c1::coder#c2",
    }
    [request] = result.pending_approvals or ()
    assert request.agent_path == ("researcher", "coder")
    deepest = store.load("root::researcher#c1::coder#c2")
    assert deepest is not None
    assert deepest.agent_path == ("researcher", "coder")
    middle = store.load("root::researcher#c1")
    assert middle is not None
    assert middle.status == "suspended"
    assert [r.agent_path for r in middle.pending_approvals or ()] == [
        ("researcher", "coder")
    ]


async def test_a_verdict_reaches_a_call_two_levels_down() -> None:
    # SPEC R9.10: the resume leg's verdicts are forwarded to every level.
    store = RecordingStore()
    probe = Probe("shell output")
    inner = ScriptedModel(
        [reply(tool_calls=[("c3", "run_shell", {})]), reply(text="coder done")]
    )
    outer = ScriptedModel(
        [
            reply(tool_calls=[("c2", "coder", {"prompt": "p"})]),
            reply(text="research done"),
        ]
    )
    tools = [_nested(inner, outer, _shell(probe))]
    parent = ScriptedModel(
        [
            reply(tool_calls=[("c1", "researcher", {"prompt": "p"})]),
            reply(text="all done"),
        ]
    )
    await _start(store, parent, tools)
    result = await _resume(store, parent, tools, "c3")
    assert probe.calls == [{}]
    assert result.text == "all done"
    assert result.pending_approvals is None
    assert {run: store.load(run).status for run in store.list()} == {  # type: ignore[union-attr]
        "root": "completed",
        "root::researcher#c1": "completed",
        "root::researcher#c1::coder#c2": "completed",
    }
    # R9.6: the parent's tool result is the child's answer.
    assert result.messages[2].content[0].result == "research done"  # type: ignore[union-attr]


async def test_a_denial_at_depth_reaches_the_nested_call() -> None:
    # SPEC R9.10
    store = RecordingStore()
    probe = Probe()
    inner = ScriptedModel(
        [reply(tool_calls=[("c3", "run_shell", {})]), reply(text="coder gave up")]
    )
    outer = ScriptedModel(
        [reply(tool_calls=[("c2", "coder", {"prompt": "p"})]), reply(text="r")]
    )
    tools = [_nested(inner, outer, _shell(probe))]
    parent = ScriptedModel(
        [reply(tool_calls=[("c1", "researcher", {"prompt": "p"})]), reply(text="end")]
    )
    await _start(store, parent, tools)
    await _resume(
        store, parent, tools, {"approval_id": "c3", "approved": False, "reason": "no"}
    )
    assert probe.calls == []
    inner_settle = inner.requests[1].messages[-1].content[0]
    assert inner_settle.result == "Tool call denied. Reason: no"  # type: ignore[union-attr]


# -- parallel sub-agents -------------------------------------------------------------------
async def test_two_parallel_calls_of_one_sub_agent_both_suspend_and_both_resume() -> (
    None
):
    # SPEC R9.3 (no collisions), kept decision: every suspension's requests surface.
    store = RecordingStore()
    probe = Probe("ok")

    def child_for(call: str) -> Any:
        return [reply(tool_calls=[(call, "run_shell", {"n": call})]), reply(text=call)]

    class PerPrompt:
        """One scripted child per prompt: the two calls share the tool, not the script."""

        model_id = "per-prompt"

        def __init__(self) -> None:
            self.models = {
                "a": ScriptedModel(child_for("ka")),
                "b": ScriptedModel(child_for("kb")),
            }

        def stream(self, request: Any) -> Any:
            prompt = next(m.content for m in request.messages if m.role == "user")
            return self.models[prompt].stream(request)

    coder = agent_tool(name="coder", model=PerPrompt(), tools=[_shell(probe)])
    parent = ScriptedModel(
        [
            reply(
                tool_calls=[
                    ("c1", "coder", {"prompt": "a"}),
                    ("c2", "coder", {"prompt": "b"}),
                ]
            ),
            reply(text="both done"),
        ]
    )
    first = await _start(store, parent, [coder])
    assert [r.approval_id for r in first.pending_approvals or ()] == ["ka", "kb"]
    assert {"root::coder#c1", "root::coder#c2"} <= set(store.list())
    result = await _resume(store, parent, [coder], "ka", "kb")
    assert sorted(c["n"] for c in probe.calls) == ["ka", "kb"]
    assert result.text == "both done"
    [tool_message] = [m for m in result.response_messages if m.role == "tool"]
    assert [p.result for p in tool_message.content] == ["ka", "kb"]  # type: ignore[union-attr]


async def test_siblings_of_a_suspending_sub_agent_are_discarded_and_rerun() -> None:
    # SPEC R9.9: no tool message for the suspended step; siblings run again on resume.
    store = RecordingStore()
    sibling = Probe("sibling result")
    child = ScriptedModel(
        [reply(tool_calls=[("k1", "run_shell", {})]), reply(text="child done")]
    )
    tools = [
        agent_tool(name="coder", model=child, tools=[_shell()]),
        sibling.tool("read"),
    ]
    parent = ScriptedModel(
        [
            reply(tool_calls=[("c1", "read", {}), ("c2", "coder", {"prompt": "p"})]),
            reply(text="done"),
        ]
    )
    first = await _start(store, parent, tools)
    assert len(sibling.calls) == 1
    assert [m.role for m in first.messages] == ["user", "assistant"]
    assert first.steps[0].tool_results == ()
    result = await _resume(store, parent, tools, "k1")
    assert len(sibling.calls) == 2
    [tool_message] = [m for m in result.response_messages if m.role == "tool"]
    assert [p.result for p in tool_message.content] == ["sibling result", "child done"]  # type: ignore[union-attr]


# -- D8: children are resumed, never restarted ---------------------------------------------
async def test_a_completed_child_returns_its_answer_without_new_model_calls() -> None:
    # D8 (Q9): a completed child checkpoint gives back its final answer.
    store = RecordingStore()
    quick_model = ScriptedModel([reply(text="quick answer", usage=(7, 0))])
    slow_model = ScriptedModel(
        [reply(tool_calls=[("k1", "run_shell", {})]), reply(text="slow answer")]
    )
    tools = [
        agent_tool(name="quick", model=quick_model, tools=[Probe().tool("lookup")]),
        agent_tool(name="slow", model=slow_model, tools=[_shell()]),
    ]
    parent = ScriptedModel(
        [
            reply(
                tool_calls=[
                    ("c1", "quick", {"prompt": "p"}),
                    ("c2", "slow", {"prompt": "p"}),
                ]
            ),
            reply(text="done"),
        ]
    )
    await _start(store, parent, tools)
    quick = store.load("root::quick#c1")
    assert quick is not None
    assert quick.status == "completed"
    result = await _resume(store, parent, tools, "k1")
    assert len(quick_model.requests) == 1
    [tool_message] = [m for m in result.response_messages if m.role == "tool"]
    assert [p.result for p in tool_message.content] == ["quick answer", "slow answer"]  # type: ignore[union-attr]
    # The completed child's usage is not counted a second time in this leg.
    assert result.usage.input_tokens == 0


async def test_a_running_child_continues_from_its_own_checkpoint() -> None:
    # D8 (Q9): a child whose process died mid-run continues; it is not restarted.
    store = RecordingStore()
    flaky_model = ScriptedModel(
        [
            reply(tool_calls=[("k9", "lookup", {})], usage=(5, 0)),
            reply(error="child process died"),
            reply(text="flaky recovered"),
        ]
    )
    slow_model = ScriptedModel(
        [reply(tool_calls=[("k1", "run_shell", {})]), reply(text="slow answer")]
    )
    tools = [
        agent_tool(name="flaky", model=flaky_model, tools=[Probe("v").tool("lookup")]),
        agent_tool(name="slow", model=slow_model, tools=[_shell()]),
    ]
    parent = ScriptedModel(
        [
            reply(
                tool_calls=[
                    ("c1", "flaky", {"prompt": "p"}),
                    ("c2", "slow", {"prompt": "p"}),
                ]
            ),
            reply(text="done"),
        ]
    )
    await _start(store, parent, tools)
    flaky = store.load("root::flaky#c1")
    assert flaky is not None
    assert (flaky.status, flaky.step_index) == ("running", 1)
    result = await _resume(store, parent, tools, "k1")
    # The third call continued from the running checkpoint's history.
    assert len(flaky_model.requests) == 3
    assert [m.role for m in flaky_model.requests[2].messages] == [
        "user",
        "assistant",
        "tool",
    ]
    flaky = store.load("root::flaky#c1")
    assert flaky is not None
    assert (flaky.status, flaky.step_index) == ("completed", 2)
    assert flaky.usage.input_tokens == 5
    [tool_message] = [m for m in result.response_messages if m.role == "tool"]
    assert [p.result for p in tool_message.content] == [
        "flaky recovered",
        "slow answer",
    ]  # type: ignore[union-attr]


async def test_a_tool_less_completed_child_is_not_re_run() -> None:
    # D8 with R9.2: a child without tools still runs the loop, so it checkpoints too.
    store = RecordingStore()
    plain_model = ScriptedModel([reply(text="plain answer")])
    slow_model = ScriptedModel(
        [reply(tool_calls=[("k1", "run_shell", {})]), reply(text="slow answer")]
    )
    tools = [
        agent_tool(name="plain", model=plain_model),
        agent_tool(name="slow", model=slow_model, tools=[_shell()]),
    ]
    parent = ScriptedModel(
        [
            reply(
                tool_calls=[
                    ("c1", "plain", {"prompt": "p"}),
                    ("c2", "slow", {"prompt": "p"}),
                ]
            ),
            reply(text="done"),
        ]
    )
    await _start(store, parent, tools)
    await _resume(store, parent, tools, "k1")
    assert len(plain_model.requests) == 1


# -- R9.8, R9.6: the suspending leg --------------------------------------------------------
async def test_a_suspending_child_reports_its_usage_before_the_parent_suspends() -> (
    None
):
    # SPEC R9.6: the child's leg usage is in the parent's result and checkpoint (B8).
    store = RecordingStore()
    child = ScriptedModel([reply(tool_calls=[("k1", "run_shell", {})], usage=(40, 2))])
    coder = agent_tool(name="coder", model=child, tools=[_shell()])
    parent = ScriptedModel(
        [reply(tool_calls=[("c1", "coder", {"prompt": "p"})], usage=(10, 5))]
    )
    result = await _start(store, parent, [coder])
    assert result.usage.total_tokens == 57
    root = store.load("root")
    assert root is not None
    assert root.usage.total_tokens == 57
    assert result.steps[0].usage.total_tokens == 15
    assert result.finish_reason == "tool_calls"


async def test_a_streaming_parent_surfaces_each_child_request_top_level_with_path() -> (
    None
):
    # SPEC R9.8: one top-level tool-approval-request per request, with agentPath.
    store = RecordingStore()
    child = ScriptedModel([reply(tool_calls=[("k1", "run_shell", {})])])
    coder = agent_tool(name="coder", model=child, tools=[_shell()])
    parent = ScriptedModel([reply(tool_calls=[("c1", "coder", {"prompt": "p"})])])
    parts = await collect(
        stream_chat(
            model=parent,
            prompt="go",
            tools=[coder],
            session=DurableSession(store, "root"),
            deps=make_deps(),
        )
    )
    top = [p for p in parts if isinstance(p, ToolApprovalRequestPart)]
    assert [p.to_json() for p in top] == [
        {
            "type": "tool-approval-request",
            "approvalId": "k1",
            "toolCallId": "k1",
            "toolName": "run_shell",
            "input": {},
            "agentPath": ["coder"],
        }
    ]


# -- R9.11: several rounds -----------------------------------------------------------------
async def test_a_resumed_child_that_asks_again_re_suspends_the_parent_in_settle() -> (
    None
):
    # SPEC R9.11, R9.8 (B9): steps [], text "", finish "stop", no response messages;
    # each round adds boundaries and cumulative usage.
    store = RecordingStore()
    probe = Probe("ran")
    child = ScriptedModel(
        [
            reply(tool_calls=[("k1", "run_shell", {"n": 1})], usage=(10, 0)),
            reply(tool_calls=[("k2", "run_shell", {"n": 2})], usage=(20, 0)),
            reply(text="child finished", usage=(30, 0)),
        ]
    )
    coder = agent_tool(name="coder", model=child, tools=[_shell(probe)])
    parent = ScriptedModel(
        [
            reply(tool_calls=[("c1", "coder", {"prompt": "p"})], usage=(1, 0)),
            reply(text="parent finished", usage=(2, 0)),
        ]
    )
    first = await _start(store, parent, [coder])
    assert [r.approval_id for r in first.pending_approvals or ()] == ["k1"]

    second = await _resume(store, parent, [coder], "k1")
    assert [r.approval_id for r in second.pending_approvals or ()] == ["k2"]
    assert second.steps == ()
    assert second.text == ""
    assert second.finish_reason == "stop"
    assert second.response_messages == ()
    assert second.usage.total_tokens == 20

    third = await _resume(store, parent, [coder], "k2")
    assert third.text == "parent finished"
    assert [c["n"] for c in probe.calls] == [1, 2]
    root = store.load("root")
    assert root is not None
    assert (root.status, root.step_index, root.usage.total_tokens) == (
        "completed",
        3,
        63,
    )
    assert [c.status for c in store.saved_for("root")] == [
        "suspended",
        "suspended",
        "completed",
    ]
    child_checkpoint = store.load("root::coder#c1")
    assert child_checkpoint is not None
    assert (child_checkpoint.status, child_checkpoint.step_index) == ("completed", 3)


async def test_after_a_settle_re_suspension_the_next_step_start_skips_one() -> None:
    # SPEC R6.6: after a B9 boundary, the next leg's first step-start is one higher
    # than the number of model steps run so far.
    store = RecordingStore()
    child = ScriptedModel(
        [
            reply(tool_calls=[("k1", "run_shell", {})]),
            reply(tool_calls=[("k2", "run_shell", {})]),
            reply(text="child finished"),
        ]
    )
    coder = agent_tool(name="coder", model=child, tools=[_shell()])
    parent = ScriptedModel(
        [reply(tool_calls=[("c1", "coder", {"prompt": "p"})]), reply(text="end")]
    )
    await _start(store, parent, [coder])
    await _resume(store, parent, [coder], "k1")
    parts = await collect(
        resume_stream_from_checkpoint(
            store,
            "root",
            model=parent,
            tools=[coder],
            max_steps=5,
            approval_responses=[{"approval_id": "k2", "approved": True}],
            deps=make_deps(),
        )
    )
    starts = [p for p in parts if isinstance(p, StepStartPart)]
    assert starts == [StepStartPart(2)]  # one model step ran before (index 0)


async def test_verdicts_for_another_level_are_ignored_there() -> None:
    # SPEC R9.10: the parent sees no verdict for its own sub-agent call and re-executes it.
    store = RecordingStore()
    child = ScriptedModel(
        [reply(tool_calls=[("k1", "run_shell", {})]), reply(text="child finished")]
    )
    coder = agent_tool(name="coder", model=child, tools=[_shell()])
    parent = ScriptedModel(
        [reply(tool_calls=[("c1", "coder", {"prompt": "p"})]), reply(text="end")]
    )
    await _start(store, parent, [coder])
    result = await _resume(store, parent, [coder], "k1", "unrelated")
    assert result.text == "end"


class _Crash(BaseException):
    """The process dies: nothing in the loop catches it."""


async def test_a_child_finished_before_a_crash_is_counted_once_when_the_step_reruns() -> (
    None
):
    # D8 with R6.7: the parent's re-run step finds the completed child; its usage, never
    # saved in the parent, is counted now — once.
    store = RecordingStore()
    crashed = False

    async def sibling(args: Any, ctx: Any) -> str:
        nonlocal crashed
        if not crashed:
            crashed = True
            raise _Crash
        return "sibling ok"

    child = ScriptedModel(
        [reply(tool_calls=[("k1", "lookup", {})], usage=(100, 0)), reply(text="answer")]
    )
    tools = [
        agent_tool(name="coder", model=child, tools=[Probe().tool("lookup")]),
        Tool(name="sibling", execute=sibling),
        Probe().tool("read"),
    ]
    step_2 = reply(
        tool_calls=[("c2", "coder", {"prompt": "p"}), ("c3", "sibling", {})],
        usage=(2, 0),
    )
    parent = ScriptedModel(
        [
            reply(tool_calls=[("c1", "read", {})], usage=(1, 0)),
            step_2,
            step_2,  # the re-run of the step the crash cut
            reply(text="done", usage=(3, 0)),
        ]
    )
    options: dict[str, Any] = {
        "tools": tools,
        "max_steps": 5,
        "max_tool_concurrency": 1,
    }
    with pytest.raises(_Crash):
        await generate_text(
            model=parent,
            prompt="go",
            session=DurableSession(store, "root"),
            deps=make_deps(),
            **options,
        )
    root = store.load("root")
    assert root is not None
    assert (root.status, root.usage.input_tokens) == ("running", 1)
    result = await resume_from_checkpoint(
        store, "root", model=parent, deps=make_deps(), **options
    )
    assert result.text == "done"
    assert len(child.requests) == 2  # not re-run
    final = store.load("root")
    assert final is not None
    assert final.usage.input_tokens == 1 + 100 + 2 + 3
