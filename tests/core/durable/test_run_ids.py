"""Sub-agent run ids: one format, built and read by the helpers of ``core.durable``."""

from __future__ import annotations

import pytest

from deuz_django.core import agent_tool, generate_text
from deuz_django.core.durable import (
    DurableSession,
    child_run_id,
    child_run_id_prefix,
    create_in_memory_session_store,
    is_child_run_id,
    parent_run_id,
    root_run_id,
)
from deuz_django.core.testing import ScriptedModel, reply

GRANDCHILD = "run-42::coder#toolu_1::tester#toolu_7"


def test_a_child_run_id_names_parent_agent_and_call() -> None:
    # SPEC R9.3: f"{parentRunId}::{name}#{toolCallId}", nesting as deep as the agents.
    assert child_run_id("run-42", "coder", "toolu_1") == "run-42::coder#toolu_1"
    assert child_run_id("run-42::coder#toolu_1", "tester", "toolu_7") == GRANDCHILD


@pytest.mark.parametrize(
    ("run_id", "parent", "root", "child"),
    [
        ("run-42", None, "run-42", False),
        ("run-42::coder#toolu_1", "run-42", "run-42", True),
        (GRANDCHILD, "run-42::coder#toolu_1", "run-42", True),
    ],
)
def test_a_run_id_is_read_back_into_its_parent_and_root(
    run_id: str, parent: str | None, root: str, child: bool
) -> None:
    # SPEC R9.3
    assert parent_run_id(run_id) == parent
    assert root_run_id(run_id) == root
    assert is_child_run_id(run_id) is child


def test_every_descendant_starts_with_the_child_prefix() -> None:
    # SPEC R9.3: a prefix query finds the whole tree below a run, and nothing beside it.
    prefix = child_run_id_prefix("run-42")
    assert child_run_id("run-42", "coder", "c1").startswith(prefix)
    assert GRANDCHILD.startswith(prefix)
    assert not "run-420".startswith(prefix)
    assert not "run-42".startswith(prefix)


async def test_the_loop_checkpoints_a_sub_agent_under_child_run_id() -> None:
    # SPEC R9.3: the key the loop uses is the helper's.
    store = create_in_memory_session_store()
    coder = agent_tool(name="coder", model=ScriptedModel([reply(text="Fixed.")]))
    parent = ScriptedModel(
        [reply(tool_calls=[("c1", "coder", {"prompt": "fix"})]), reply(text="Done.")]
    )
    await generate_text(
        model=parent,
        prompt="go",
        tools=[coder],
        max_steps=3,
        session=DurableSession(store, "run-42"),
    )
    assert store.list() == [child_run_id("run-42", "coder", "c1"), "run-42"]
