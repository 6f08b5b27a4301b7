"""``ToolContext.idempotency_key``: one key per call, the same every time the call runs —
in the leg that issued it, on a resume's settle, after a crash, inside sub-agents."""

from __future__ import annotations

import re
from typing import Any

import pytest

from deuz_django.core import Deps, Tool, ToolContext, agent_tool, generate_text, tool
from deuz_django.core.durable import (
    AgentCheckpoint,
    DurableSession,
    InMemorySessionStore,
    resume_from_checkpoint,
)
from deuz_django.core.testing import ScriptedModel, reply
from deuz_django.core.testing.contracts import FixedClock

from .reliability._support import Crash, PositionalModel

KEY = re.compile(r"[0-9a-f]{32}")


class Keys:
    """A ``pay`` tool that records the key of every execution, by tool call id."""

    def __init__(self, *, gated: bool = False, crash_on: str | None = None) -> None:
        self.seen: list[tuple[str, str]] = []

        @tool(needs_approval=gated)
        def pay(usd: int, ctx: ToolContext) -> str:
            """Pay someone."""
            self.seen.append((ctx.tool_call_id, ctx.idempotency_key))
            if ctx.tool_call_id == crash_on and len(self.of(crash_on)) == 1:
                raise Crash("killed after the payment went out")
            return f"paid {usd}"

        self.tool = pay

    def of(self, tool_call_id: str) -> list[str]:
        return [key for call, key in self.seen if call == tool_call_id]


def _deps() -> Deps:
    return Deps(clock=FixedClock(), generate_id=lambda: "generated-id")


def _approve_all(call: Any, messages: Any) -> bool:
    return True


async def test_a_call_run_again_by_settle_in_a_new_leg_keeps_its_key() -> None:
    # The call that a crash leaves without a result runs again when the run resumes
    # (R5.10: an unanswered, ungated call executes on settle) — under the same key.
    keys = Keys()
    store = InMemorySessionStore()
    first = await generate_text(
        model=ScriptedModel(
            [reply(tool_calls=[("c1", "pay", {"usd": 5})]), reply(text="Paid.")]
        ),
        prompt="Pay Ana.",
        tools=[keys.tool],
        max_steps=3,
        session=DurableSession(store, "run-42"),
        deps=_deps(),
    )
    # What the store holds if the process dies after the payment, before its result
    # was saved: the assistant turn that issued the call, unanswered.
    store.save(
        AgentCheckpoint(
            run_id="run-42",
            step_id="run-42#1",
            step_index=1,
            status="running",
            messages=first.messages[:2],
            usage=first.usage,
            created_at=0,
        )
    )
    await resume_from_checkpoint(
        store,
        "run-42",
        model=ScriptedModel([reply(text="Paid.")]),
        tools=[keys.tool],
        deps=_deps(),
    )
    [first_key, settle_key] = keys.of("c1")
    assert first_key == settle_key
    assert KEY.fullmatch(first_key)


async def test_a_call_approved_at_once_or_settled_on_resume_has_one_key() -> None:
    # The same call of the same run, run in the leg that issued it (server mode) or by
    # a resume's settle after a suspension (client mode), is named the same.
    model = [reply(tool_calls=[("c1", "pay", {"usd": 5})]), reply(text="Paid.")]
    at_once = Keys(gated=True)
    await generate_text(
        model=ScriptedModel(model),
        prompt="Pay Ana.",
        tools=[at_once.tool],
        max_steps=3,
        approve_tool_call=_approve_all,
        session=DurableSession(InMemorySessionStore(), "run-42"),
        deps=_deps(),
    )
    later = Keys(gated=True)
    store = InMemorySessionStore()
    suspended = await generate_text(
        model=ScriptedModel(model[:1]),
        prompt="Pay Ana.",
        tools=[later.tool],
        max_steps=3,
        session=DurableSession(store, "run-42"),
        deps=_deps(),
    )
    assert suspended.pending_approvals is not None
    assert later.seen == []
    await resume_from_checkpoint(
        store,
        "run-42",
        model=ScriptedModel(model[1:]),
        tools=[later.tool],
        approval_responses=[{"approval_id": "c1", "approved": True}],
        deps=_deps(),
    )
    assert later.of("c1") == at_once.of("c1")


def _helper(keys: Keys, model: Any) -> Tool:
    return agent_tool(name="helper", model=model, tools=[keys.tool])


async def test_a_sub_agent_call_settled_on_resume_has_the_key_it_has_at_once() -> None:
    # SPEC R9.7, R9.8: a gated call inside a sub-agent suspends the run; the resume's
    # settle runs the sub-agent again, which settles the call — under its first key.
    child = [reply(tool_calls=[("k1", "pay", {"usd": 5})]), reply(text="Paid.")]
    parent = [
        reply(tool_calls=[("a1", "helper", {"prompt": "Pay Ana."})]),
        reply(text="Done."),
    ]
    at_once = Keys(gated=True)
    await generate_text(
        model=PositionalModel(parent),
        prompt="go",
        tools=[_helper(at_once, PositionalModel(child))],
        max_steps=3,
        approve_tool_call=_approve_all,
        session=DurableSession(InMemorySessionStore(), "run-42"),
        deps=_deps(),
    )
    later = Keys(gated=True)
    tools = [_helper(later, PositionalModel(child))]
    store = InMemorySessionStore()
    suspended = await generate_text(
        model=PositionalModel(parent),
        prompt="go",
        tools=tools,
        max_steps=3,
        session=DurableSession(store, "run-42"),
        deps=_deps(),
    )
    assert suspended.pending_approvals is not None
    await resume_from_checkpoint(
        store,
        "run-42",
        model=PositionalModel(parent),
        tools=tools,
        max_steps=3,
        approval_responses=[{"approval_id": "k1", "approved": True}],
        deps=_deps(),
    )
    assert later.of("k1") == at_once.of("k1")
    assert KEY.fullmatch(at_once.of("k1")[0])


async def test_a_sub_agent_call_run_again_after_a_crash_keeps_its_key() -> None:
    # SPEC R7.7: the process dies inside the sub-agent's call; recovery re-runs the
    # parent's unfinished step, the sub-agent starts again and its call runs again —
    # the payment API must see the same key.
    keys = Keys(crash_on="k1")
    parent = PositionalModel(
        [
            reply(tool_calls=[("p1", "pay", {"usd": 1})]),
            reply(tool_calls=[("a1", "helper", {"prompt": "Pay Ana."})]),
            reply(text="Done."),
        ]
    )
    child = PositionalModel(
        [reply(tool_calls=[("k1", "pay", {"usd": 5})]), reply(text="Paid.")]
    )
    options: dict[str, Any] = {
        "model": parent,
        "tools": [keys.tool, _helper(keys, child)],
        "max_steps": 5,
        "deps": _deps(),
    }
    store = InMemorySessionStore()
    with pytest.raises(Crash):
        await generate_text(
            prompt="go", session=DurableSession(store, "run-42"), **options
        )
    await resume_from_checkpoint(store, "run-42", **options)
    [before_crash, after_resume] = keys.of("k1")
    assert before_crash == after_resume
    assert len(keys.of("p1")) == 1  # the parent's first step was saved: not re-run


async def test_different_calls_get_different_keys() -> None:
    # Two calls of one batch, the same call id in two sub-agent calls, at the root and
    # in a sub-agent, and in another run: each is a different call.
    keys = Keys()
    child = PositionalModel(
        [reply(tool_calls=[("c1", "pay", {"usd": 5})]), reply(text="Paid.")]
    )
    parent = PositionalModel(
        [
            reply(
                tool_calls=[
                    ("c1", "pay", {"usd": 1}),
                    ("c2", "pay", {"usd": 2}),
                    ("a1", "helper", {"prompt": "Pay Ana."}),
                    ("a2", "helper", {"prompt": "Pay Bo."}),
                ]
            ),
            reply(text="Done."),
        ]
    )
    for run_id in ("run-42", "run-43"):
        await generate_text(
            model=parent,
            prompt="go",
            tools=[keys.tool, _helper(keys, child)],
            max_steps=3,
            session=DurableSession(InMemorySessionStore(), run_id),
            deps=_deps(),
        )
    all_keys = [key for _, key in keys.seen]
    assert len(all_keys) == 8  # c1, c2 and two sub-agent c1s, in each of two runs
    assert len(set(all_keys)) == 8
    assert all(KEY.fullmatch(key) for key in all_keys)


async def test_without_a_durable_session_the_key_is_stable_for_the_call() -> None:
    # No run id: the key still names the call (from its tool call id) the same way
    # every time it runs, and differs from call to call.
    keys = Keys()
    for _ in range(2):
        await generate_text(
            model=ScriptedModel(
                [
                    reply(
                        tool_calls=[
                            ("c1", "pay", {"usd": 1}),
                            ("c2", "pay", {"usd": 2}),
                        ]
                    ),
                    reply(text="Paid."),
                ]
            ),
            prompt="go",
            tools=[keys.tool],
            max_steps=2,
        )
    assert keys.of("c1")[0] == keys.of("c1")[1]
    assert keys.of("c1")[0] != keys.of("c2")[0]
    durable = Keys()
    await generate_text(
        model=ScriptedModel([reply(tool_calls=[("c1", "pay", {"usd": 1})])]),
        prompt="go",
        tools=[durable.tool],
        session=DurableSession(InMemorySessionStore(), "run-42"),
    )
    assert durable.of("c1") != keys.of("c1")[:1]
