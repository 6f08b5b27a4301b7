"""Tracing is optional (the ``otel`` extra): without ``opentelemetry`` the core imports and
runs a durable suspend/resume round trip, and never tries to import it again."""

from __future__ import annotations

from .blocked_imports import run_without

SCRIPT = """
    import asyncio

    from deuz_django.core import Tool, generate_text
    from deuz_django.core import tracing
    from deuz_django.core.durable import (
        DurableSession,
        InMemorySessionStore,
        resume_from_checkpoint,
    )
    from deuz_django.core.testing import ScriptedModel, reply


    async def main():
        async def delete(args, ctx):
            return "deleted"

        tools = [Tool(name="delete", execute=delete, needs_approval=True)]
        store = InMemorySessionStore()
        with tracing.run_trace("", agent="ops") as run:
            first = await generate_text(
                model=ScriptedModel([reply(tool_calls=[("c1", "delete", {})])]),
                prompt="clean up", tools=tools,
                session=DurableSession(store=store, run_id="run-1"),
            )
        done = await resume_from_checkpoint(
            store, "run-1", model=ScriptedModel([reply(text="Deleted.")]),
            tools=tools, approval_responses=[{"approval_id": "c1", "approved": True}],
        )
        tracing.record_approval(
            "", tool_name="delete", tool_call_id="c1", approval_id="c1",
            status="approved", requested_at_ns=0, decided_at_ns=1, decider={},
        )
        print(len(first.pending_approvals), done.text, run.started, tracing.INSTALLED)

    asyncio.run(main())
    print("loaded:", sorted(n for n in sys.modules if n.startswith("opentelemetry")))
    """


def test_the_core_runs_without_opentelemetry() -> None:
    completed = run_without(("opentelemetry",), SCRIPT)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines() == ["1 Deleted. False False", "loaded: []"]


def test_the_blocker_really_blocks_opentelemetry() -> None:
    completed = run_without(("opentelemetry",), "import opentelemetry.trace\n")
    assert completed.returncode != 0
    assert "opentelemetry is blocked in this test" in completed.stderr
