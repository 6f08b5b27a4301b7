"""The forking contract's half about runs: a fork continued by the loop re-runs no
recorded call, asks again for every gated one with tokens bound to it, and continues
the sub-agent runs it forked (:class:`~.forking.ForkingStoreContract` includes it)."""

from __future__ import annotations

from typing import Any

from ... import Deps, ModelRequest, ToolResultPart, generate_text, tool
from ..._awaitable import resolve
from ...agents import agent_tool
from ...durable import (
    DurableSession,
    ForkEdit,
    child_run_id,
    create_approval_signer,
    fork_from_checkpoint,
    resume_from_checkpoint,
)
from ..models import FunctionModel, ScriptedReply, reply
from .samples import FixedClock


def by_turn(*replies: ScriptedReply) -> FunctionModel:
    """Reply ``k`` answers the request that follows ``k`` assistant turns."""

    def respond(request: ModelRequest) -> ScriptedReply:
        turns = sum(1 for m in request.messages if m.role == "assistant")
        return replies[min(turns, len(replies) - 1)]

    return FunctionModel(respond)


class Shop:
    """A ``lookup`` and a gated ``pay`` in step 0, then an answer; every execution is
    logged in ``executed``. ``worker=True`` puts ``pay`` in a sub-agent instead."""

    def __init__(self, *, worker: bool = False) -> None:
        self.executed: list[str] = []

        @tool
        def lookup(order: str) -> str:
            """Look an order up."""
            self.executed.append(f"lookup:{order}")
            return "late"

        @tool(needs_approval=True)
        def pay(usd: int) -> str:
            """Pay a customer back."""
            self.executed.append(f"pay:{usd}")
            return f"paid {usd}"

        self.tools: list[Any] = [lookup, pay]
        self.model = by_turn(
            reply(
                tool_calls=[
                    ("c1", "lookup", {"order": "A-7"}),
                    ("c2", "pay", {"usd": 5}),
                ]
            ),
            reply(text="Done."),
        )
        if worker:
            inner = by_turn(
                reply(tool_calls=[("x1", "pay", {"usd": 5})]), reply(text="Paid.")
            )
            self.tools = [agent_tool(name="worker", model=inner, tools=[pay])]
            self.model = by_turn(
                reply(tool_calls=[("p1", "worker", {"prompt": "Pay Ann back."})]),
                reply(text="Done."),
            )
        self.signer = create_approval_signer(secret="fork-secret", clock=FixedClock())

    def options(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "tools": self.tools,
            "max_steps": 4,
            "max_tool_concurrency": 1,
            "approval_signer": self.signer,
            "deps": Deps(clock=FixedClock()),
        }

    async def start(self, store: Any, run_id: str = "run-p") -> Any:
        return await generate_text(
            prompt="Pay Ann back for A-7.",
            session=DurableSession(store, run_id),
            **self.options(),
        )

    async def resume(self, store: Any, run_id: str, *pending: Any, **extra: Any) -> Any:
        """A leg of ``run_id``, approving ``pending`` with their tokens."""
        responses = [
            {"approvalId": p.approval_id, "approved": True, "token": p.token}
            for p in pending
        ]
        return await resume_from_checkpoint(
            store, run_id, approval_responses=responses, **self.options(), **extra
        )


def answers(result: Any) -> dict[str, Any]:
    """Each call's answer in a result's history: its result, or its error."""
    return {
        part.tool_use_id: part.result
        for message in result.messages
        if message.role == "tool"
        for part in message.content
        if isinstance(part, ToolResultPart)
    }


class ForkedRunsContract:
    """Runs forked in ``store`` and continued by the loop."""

    async def test_a_fork_runs_no_recorded_call_again_and_asks_again(
        self, store: Any
    ) -> None:
        shop = Shop()
        first = await shop.start(store)
        (asked,) = first.pending_approvals
        await shop.resume(store, "run-p", asked)
        assert shop.executed == ["lookup:A-7", "pay:5"]
        requests = len(shop.model.requests)
        await fork_from_checkpoint(
            store, "run-p", step_index=0, run_id="run-f", with_turn=True
        )
        forked = await shop.resume(store, "run-f")
        assert len(shop.model.requests) == requests  # the kept turn, no model call
        (again,) = forked.pending_approvals  # approvals are not inherited
        assert (again.tool_call_id, again.token != asked.token) == ("c2", True)
        done = await shop.resume(store, "run-f", again)
        assert done.text == "Done."
        assert answers(done)["c2"] == "paid 5"  # the recorded outcome, reused
        assert shop.executed == ["lookup:A-7", "pay:5"]  # 0 new executions

    async def test_a_token_of_the_parent_approves_nothing_on_the_fork(
        self, store: Any
    ) -> None:
        shop = Shop()
        first = await shop.start(store)
        (asked,) = first.pending_approvals
        await fork_from_checkpoint(
            store, "run-p", step_index=0, run_id="run-f", with_turn=True
        )
        await shop.resume(store, "run-f")
        refused = await shop.resume(store, "run-f", asked)
        assert "bound to another run" in str(answers(refused)["c2"])
        assert shop.executed == ["lookup:A-7"]  # settled: the lookup ran, pay never

    async def test_a_fork_with_an_edited_input_runs_the_edited_call(
        self, store: Any
    ) -> None:
        shop = Shop()
        first = await shop.start(store)
        await shop.resume(store, "run-p", *first.pending_approvals)
        await fork_from_checkpoint(
            store,
            "run-p",
            step_index=0,
            run_id="run-f",
            with_turn=True,
            edit=ForkEdit(tool_call_id="c2", input={"usd": 3}),
        )
        forked = await shop.resume(store, "run-f")
        (asked,) = forked.pending_approvals
        assert asked.input == {"usd": 3}
        done = await shop.resume(store, "run-f", asked)
        assert answers(done) == {"c1": "late", "c2": "paid 3"}
        assert shop.executed == ["lookup:A-7", "pay:5", "pay:3"]

    async def test_a_fork_before_the_turn_asks_the_model_the_new_question(
        self, store: Any
    ) -> None:
        shop = Shop()
        await shop.start(store)
        await fork_from_checkpoint(
            store,
            "run-p",
            step_index=0,
            run_id="run-f",
            edit=ForkEdit(message="Pay Bob back for B-2."),
        )
        await shop.resume(store, "run-f")
        asked = shop.model.requests[-1].messages
        assert [m.text for m in asked if m.role == "user"] == ["Pay Bob back for B-2."]

    async def test_a_sub_agent_run_forks_with_its_parent_and_asks_again(
        self, store: Any
    ) -> None:
        shop = Shop(worker=True)
        first = await shop.start(store)
        (asked,) = first.pending_approvals
        await fork_from_checkpoint(
            store, "run-p", step_index=0, run_id="run-f", with_turn=True
        )
        child = await resolve_load(store, child_run_id("run-f", "worker", "p1"))
        assert child is not None
        assert (child.status, child.usage.total_tokens) == ("running", 0)
        forked = await shop.resume(store, "run-f")
        (again,) = forked.pending_approvals
        assert (again.tool_call_id, again.agent_path) == ("x1", ("worker",))
        assert again.token != asked.token
        done = await shop.resume(store, "run-f", again)
        assert done.text == "Done."
        assert shop.executed == ["pay:5"]
        parent_child = await resolve_load(store, child_run_id("run-p", "worker", "p1"))
        assert parent_child is not None
        assert parent_child.status == "suspended"


async def resolve_load(store: Any, run_id: str) -> Any:
    method = getattr(store, "aload", None) or store.load
    return await resolve(method(run_id))
