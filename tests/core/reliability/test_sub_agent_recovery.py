"""A crash while a durable sub-agent works: the child is continued, never re-run (D8).

The parent's step 2 calls the ``coder`` sub-agent and, after it, a sibling tool (one at a
time). The process dies either inside the child's second step (the child's checkpoint says
``running``) or in the sibling, after the child finished (``completed``). The parent has
only its step-1 checkpoint, so recovery re-runs its step 2 (R7.7); the child must pick up
its own checkpoint instead of starting over, and the run must end as the uninterrupted run
ends — the same history, and the same cumulative usage (R6.7).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from deuz_django.core import Deps, agent_tool, generate_text, tool
from deuz_django.core.durable import (
    AgentCheckpoint,
    DurableSession,
    InMemorySessionStore,
    resume_from_checkpoint,
)
from deuz_django.core.testing import reply
from deuz_django.core.testing.contracts import FixedClock

from ._support import Crash, PositionalModel

RUN_ID = "sub-run"
CHILD_KEY = f"{RUN_ID}::coder#p2"


@dataclass
class Run:
    """One drive of the scenario; ``crash_in`` names the tool that dies on its first call."""

    crash_in: str | None
    effects: list[str] = field(default_factory=list)
    crashed: bool = False

    def effect(self, name: str) -> None:
        self.effects.append(name)
        if name == self.crash_in and not self.crashed:
            self.crashed = True
            raise Crash(name)


async def drive(run: Run) -> InMemorySessionStore:
    @tool
    async def lookup(q: str) -> str:
        run.effect("parent lookup")
        return f"found {q}"

    @tool
    async def sibling(n: int) -> str:
        run.effect("parent sibling")
        return f"sibling {n}"

    @tool
    async def edit(n: int) -> str:
        run.effect(f"child edit {n}")
        return f"edited {n}"

    coder = agent_tool(
        name="coder",
        model=PositionalModel(
            [
                reply(tool_calls=[("k1", "edit", {"n": 1})], usage=(100, 10)),
                reply(tool_calls=[("k2", "edit", {"n": 2})], usage=(200, 20)),
                reply(text="Fixed.", usage=(300, 30)),
            ]
        ),
        tools=[edit],
    )
    parent = PositionalModel(
        [
            reply(tool_calls=[("p1", "lookup", {"q": "bug"})], usage=(1, 1)),
            reply(
                tool_calls=[
                    ("p2", "coder", {"prompt": "Fix it."}),
                    ("p3", "sibling", {"n": 3}),
                ],
                usage=(2, 2),
            ),
            reply(text="All fixed.", usage=(3, 3)),
        ]
    )
    store = InMemorySessionStore()
    options: dict[str, Any] = {
        "model": parent,
        "tools": [lookup, coder, sibling],
        "max_steps": 10,
        "max_tool_concurrency": 1,
        "deps": Deps(clock=FixedClock(), generate_id=lambda: "unused-id"),
    }
    try:
        await generate_text(
            prompt="Fix the bug.", session=DurableSession(store, RUN_ID), **options
        )
    except Crash:
        checkpoint = store.load(RUN_ID)
        assert checkpoint is not None
        assert (checkpoint.status, checkpoint.step_index) == ("running", 1)
        await resume_from_checkpoint(store, RUN_ID, **options)
    return store


def _final(store: InMemorySessionStore, run_id: str) -> AgentCheckpoint:
    checkpoint = store.load(run_id)
    assert checkpoint is not None
    assert checkpoint.status == "completed"
    return checkpoint


STRAIGHT_EFFECTS = ["parent lookup", "child edit 1", "child edit 2", "parent sibling"]
CRASHES = [
    # Killed in the child's step 2: only that step and the sibling run again.
    pytest.param(
        "child edit 2",
        [*STRAIGHT_EFFECTS[:3], *STRAIGHT_EFFECTS[2:]],
        id="child-running",
    ),
    # Killed after the child finished: the child does not run again at all.
    pytest.param(
        "parent sibling", [*STRAIGHT_EFFECTS, "parent sibling"], id="child-completed"
    ),
]


@pytest.mark.parametrize(("crash_in", "effects"), CRASHES)
async def test_a_sub_agent_is_continued_not_rerun_after_a_crash(
    crash_in: str, effects: list[str]
) -> None:
    # SPEC D8, R7.7, R9.3, R9.4
    straight = Run(crash_in=None)
    straight_store = await drive(straight)
    crashed = Run(crash_in=crash_in)
    crashed_store = await drive(crashed)

    assert crashed.crashed
    assert straight.effects == STRAIGHT_EFFECTS
    assert crashed.effects == effects
    assert (
        _final(crashed_store, CHILD_KEY).to_json()
        == _final(straight_store, CHILD_KEY).to_json()
    )
    crashed_parent = _final(crashed_store, RUN_ID)
    straight_parent = _final(straight_store, RUN_ID)
    assert crashed_parent.messages == straight_parent.messages
    assert crashed_parent.step_index == straight_parent.step_index


@pytest.mark.parametrize(("crash_in", "effects"), CRASHES)
async def test_a_continued_sub_agent_usage_is_counted_once_in_the_run(
    crash_in: str, effects: list[str]
) -> None:
    # SPEC R6.7 with D8: the child's checkpointed steps are not re-run, so their usage
    # must still reach the run's cumulative usage — once, as in the uninterrupted run.
    straight_store = await drive(Run(crash_in=None))
    crashed = Run(crash_in=crash_in)
    crashed_store = await drive(crashed)

    assert crashed.effects == effects
    straight = _final(straight_store, RUN_ID).usage
    assert straight.total_tokens == 2 + 4 + 660 + 6
    assert _final(crashed_store, RUN_ID).usage.to_json() == straight.to_json()
