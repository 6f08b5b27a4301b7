"""The core never imports Django (STYLE rule 1, DESIGN §2): it imports and runs a durable
tool loop with a resume round trip in a process where Django cannot be imported."""

from __future__ import annotations

from .blocked_imports import run_without

# Django and everything built on it.
BLOCKED = ("django", "rest_framework", "channels", "daphne", "asgiref")

SCRIPT = """
    import asyncio
    import sys

    import deuz_django.core
    from deuz_django.core import Tool, generate_text
    from deuz_django.core.durable import (
        DurableSession,
        create_approval_signer,
        deserialize_checkpoint,
        resume_from_checkpoint,
        serialize_checkpoint,
    )
    from deuz_django.core.testing import ScriptedModel, reply


    class TextStore:
        def __init__(self):
            self.rows = {}

        def save(self, checkpoint):
            self.rows[checkpoint.run_id] = serialize_checkpoint(checkpoint)

        def load(self, run_id):
            row = self.rows.get(run_id)
            return deserialize_checkpoint(row) if row is not None else None


    async def main():
        async def delete(args, ctx):
            return "deleted " + args["path"]

        tools = [Tool(name="delete", execute=delete, needs_approval=True)]
        store = TextStore()
        signer = create_approval_signer(secret="s3cret")
        model = ScriptedModel([
            reply(tool_calls=[("c1", "delete", {"path": "/tmp/x"})], usage=(10, 5)),
            reply(text="Deleted.", usage=(20, 6)),
        ])
        first = await generate_text(
            model=model, prompt="clean up", tools=tools, approval_signer=signer,
            session=DurableSession(store=store, run_id="run-1"),
        )
        [pending] = first.pending_approvals
        done = await resume_from_checkpoint(
            store, "run-1", model=model, tools=tools, approval_signer=signer,
            approval_responses=[
                {"approval_id": pending.approval_id, "approved": True,
                 "token": pending.token},
            ],
        )
        final = store.load("run-1")
        print(done.text, final.status, final.step_index, final.usage.total_tokens)

    asyncio.run(main())
    leaked = sorted(
        n for n in sys.modules if n.split(".")[0] in Blocker.BLOCKED
    )
    print("leaked:", leaked)
    """


def test_the_core_runs_a_durable_round_trip_without_django() -> None:
    completed = run_without(BLOCKED, SCRIPT)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines() == ["Deleted. completed 2 41", "leaked: []"]


def test_the_blocker_really_blocks_django() -> None:
    # The check above proves nothing unless importing Django fails in that process.
    completed = run_without(BLOCKED, "import django\n")
    assert completed.returncode != 0
    assert "django is blocked in this test" in completed.stderr
