"""Forking: the shared contract on the in-memory reference store, and the planner's
rules on what a fork of each kind of run holds."""

from __future__ import annotations

from typing import Any

import pytest

from deuz_django.core import ImagePart, Message, TextPart, ToolUsePart, tool
from deuz_django.core.durable import (
    AgentCheckpoint,
    CheckpointStatus,
    ForkEdit,
    ForkedRun,
    ForkSource,
    InMemorySessionStore,
    InMemoryStepJournal,
    InvalidForkError,
    JournalStep,
    parent_run_id,
    plan_fork,
)
from deuz_django.core.testing.contracts import ForkingStoreContract, make_checkpoint


class TestInMemoryForking(ForkingStoreContract):
    @pytest.fixture
    def store(self) -> InMemorySessionStore:
        return InMemorySessionStore(step_journal=InMemoryStepJournal())


class Source:
    """A :class:`ForkSource` over plain dicts."""

    def __init__(
        self,
        checkpoints: dict[str, AgentCheckpoint],
        steps: dict[str, tuple[JournalStep, ...]] | None = None,
    ) -> None:
        self.checkpoints = checkpoints
        self.steps = steps or {}

    def load(self, run_id: str) -> AgentCheckpoint | None:
        return self.checkpoints.get(run_id)

    def load_steps(self, run_id: str) -> tuple[JournalStep, ...]:
        return self.steps.get(run_id, ())

    def sub_run_ids(self, run_id: str) -> list[str]:
        known = {*self.checkpoints, *self.steps}
        return sorted(k for k in known if parent_run_id(k) == run_id)


def plan(source: Source, step: int = 0, **options: Any) -> tuple[ForkedRun, ...]:
    return plan_fork(
        source, "run-p", step_index=step, run_id="run-f", created_at=7, **options
    )


PAY = Message("assistant", (ToolUsePart("c1", "pay", {"usd": 5}),))


def paying(*, status: CheckpointStatus = "suspended") -> Source:
    """``run-p`` suspended on step 0's ``pay`` call."""
    history = (Message("user", "Pay."), PAY)
    return Source(
        {"run-p": make_checkpoint("run-p", 1, status=status, messages=history)},
        {"run-p": (JournalStep(0, 1, PAY),)},
    )


def test_the_source_protocol_is_what_the_planner_reads() -> None:
    assert isinstance(Source({}), ForkSource)


def test_an_edited_input_is_checked_against_its_tools_schema() -> None:
    @tool(needs_approval=True)
    def pay(usd: int) -> str:
        """Pay."""
        return "paid"

    edit = ForkEdit(tool_call_id="c1", input={"usd": "lots"})
    with pytest.raises(InvalidForkError) as refused:
        plan(paying(), with_turn=True, edit=edit, tools={"pay": pay})
    assert refused.value.problem.field == "edit.input"
    assert "usd" in refused.value.problem.message
    with pytest.raises(InvalidForkError) as unknown:
        plan(paying(), with_turn=True, edit=edit, tools={})
    assert unknown.value.problem.field == "edit.toolCallId"


def test_a_fork_is_a_root_run() -> None:
    with pytest.raises(InvalidForkError) as refused:
        plan_fork(paying(), "run-p", step_index=0, run_id="run-f::x#1", created_at=7)
    assert refused.value.problem.field == "runId"


def test_a_new_message_keeps_the_images_of_the_one_it_replaces() -> None:
    image = ImagePart(b"\x89PNG", "image/png")
    asked = Message("user", (TextPart("Crop this."), image))
    source = Source({"run-p": make_checkpoint("run-p", 0, messages=[asked])})
    (forked,) = plan(source, edit=ForkEdit(message="Rotate this."))
    assert forked.checkpoint is not None
    assert forked.checkpoint.messages == (
        Message("user", (TextPart("Rotate this."), image)),
    )


def test_a_suspended_run_forks_with_its_turn_at_its_latest_step() -> None:
    (forked,) = plan(paying(), with_turn=True)
    assert forked.checkpoint is not None
    assert forked.checkpoint.messages == (Message("user", "Pay."),)
    assert forked.steps == (JournalStep(0, 1, PAY),)


def test_sub_agent_runs_fork_as_they_stand_a_suspended_one_before_its_turn() -> None:
    """The call's child (suspended), its grandchild (completed) and a child that
    never saved a checkpoint; the child of an answered call stays behind."""
    source = paying()
    turn = Message(
        "assistant",
        (ToolUsePart("w1", "worker", {"prompt": "a"}), ToolUsePart("w2", "w", {})),
    )
    source.steps["run-p"] = (JournalStep(0, 1, turn),)
    child, grandchild = "run-p::worker#w1", "run-p::worker#w1::helper#h1"
    asking = Message("assistant", (ToolUsePart("x1", "pay", {}),))
    source.checkpoints[child] = make_checkpoint(
        child,
        2,
        status="suspended",
        messages=[Message("user", "a"), asking],
        agent_path=["worker"],
    )
    source.steps[child] = (JournalStep(1, 1, asking),)
    source.checkpoints[grandchild] = make_checkpoint(grandchild, 2, status="completed")
    source.steps["run-p::w#w2"] = (JournalStep(0, 1, PAY),)
    source.steps["run-p::other#w3"] = (JournalStep(0, 1, PAY),)
    _root, *subs = plan(source, with_turn=True)
    assert [s.run_id for s in subs] == [
        "run-f::w#w2",
        "run-f::worker#w1",
        "run-f::worker#w1::helper#h1",
    ]
    never_saved, worker, helper = subs
    assert never_saved.checkpoint is None
    assert never_saved.steps[0].message == PAY
    assert worker.checkpoint is not None
    assert helper.checkpoint is not None
    assert (worker.checkpoint.status, worker.checkpoint.step_index) == ("running", 1)
    assert worker.checkpoint.messages == (Message("user", "a"),)
    assert worker.checkpoint.agent_path == ("worker",)
    assert (helper.checkpoint.status, helper.checkpoint.usage.total_tokens) == (
        "completed",
        0,
    )


def test_the_edited_calls_sub_agent_starts_afresh() -> None:
    source = paying()
    turn = Message("assistant", (ToolUsePart("w1", "worker", {"prompt": "a"}),))
    source.steps["run-p"] = (JournalStep(0, 1, turn),)
    source.checkpoints["run-p::worker#w1"] = make_checkpoint("run-p::worker#w1", 1)
    edit = ForkEdit(tool_call_id="w1", input={"prompt": "b"})
    assert len(plan(source, with_turn=True, edit=edit)) == 1
