"""Gated MCP tools: the run suspends before the server is called; an approved resume — in
a fresh process, or with a freshly built server object — reaches the server; a denied one
never does. The tool list comes from the agent's spec, never from the checkpoint."""

from __future__ import annotations

import asyncio
import json
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from deuz_django.core import Message, ToolResultPart, generate_text
from deuz_django.core.durable import (
    AgentCheckpoint,
    DurableSession,
    create_approval_signer,
    create_in_memory_session_store,
    deserialize_checkpoint,
    resume_from_checkpoint,
    serialize_checkpoint,
)
from deuz_django.core.mcp import MCPServer
from deuz_django.core.testing import ScriptedModel, reply

from .support import HTTPProcess, effects_in, run_python

SECRET = "mcp-test-secret"
GATED = {"tool_options": {"delete_file": {"needs_approval": True}}}


class FileStore:
    """A session store in one JSON file: what a second process can read."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def save(self, checkpoint: AgentCheckpoint) -> None:
        self.path.write_text(serialize_checkpoint(checkpoint), encoding="utf-8")

    def load(self, run_id: str) -> AgentCheckpoint | None:
        if not self.path.exists():
            return None
        return deserialize_checkpoint(self.path.read_text(encoding="utf-8"))


def tool_results(messages: Sequence[Message]) -> list[ToolResultPart]:
    return [p for m in messages for p in m.parts if isinstance(p, ToolResultPart)]


async def suspend(server: MCPServer, store: Any, path: str) -> Any:
    """The first leg: the model asks to delete ``path``, which needs approval."""
    result = await generate_text(
        model=ScriptedModel(
            [reply(tool_calls=[("c1", "files__delete_file", {"path": path})])]
        ),
        prompt="Delete it.",
        tools=await server.tools(),
        session=DurableSession(store, "run-mcp"),
        approval_signer=create_approval_signer(secret=SECRET),
    )
    [pending] = result.pending_approvals
    assert pending.tool_name == "files__delete_file"
    return pending


RESUME_IN_A_FRESH_PROCESS = textwrap.dedent(
    """
    import asyncio, json, sys
    from pathlib import Path
    from deuz_django.core.durable import create_approval_signer, resume_from_checkpoint
    from deuz_django.core.mcp import MCPServer
    from deuz_django.core.testing import ScriptedModel, reply
    from tests.core.mcp.support import stdio_transport
    from tests.core.mcp.test_approvals import GATED, SECRET, FileStore

    store_path, effects, approval_id, token = sys.argv[1:]

    async def main():
        # This process has never seen the server: the spec lists it again.
        server = MCPServer("files", stdio_transport(Path(effects)), **GATED)
        done = await resume_from_checkpoint(
            FileStore(Path(store_path)), "run-mcp",
            model=ScriptedModel([reply(text="Deleted it.")]),
            tools=await server.tools(),
            approval_signer=create_approval_signer(secret=SECRET),
            approval_responses=[
                {"approvalId": approval_id, "approved": True, "token": token}
            ],
        )
        results = [
            part.result for m in done.messages for part in m.parts
            if getattr(part, "type", "") == "tool_result"
        ]
        print(json.dumps([done.text, results]))

    asyncio.run(main())
    """
)


async def test_an_approved_call_resumed_in_a_fresh_process_reaches_the_server(
    stdio_server: Callable[..., MCPServer], effects: Path, tmp_path: Path
) -> None:
    store = FileStore(tmp_path / "checkpoint.json")
    pending = await suspend(stdio_server(**GATED), store, "/tmp/report.txt")
    assert effects_in(effects) == []  # suspended before the server heard of it

    resumed = await asyncio.to_thread(
        run_python,
        RESUME_IN_A_FRESH_PROCESS,
        str(store.path),
        str(effects),
        pending.approval_id,
        pending.token,
    )

    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout.splitlines()[-1]) == [
        "Deleted it.",
        ["deleted /tmp/report.txt"],
    ]
    assert effects_in(effects) == ["delete_file:/tmp/report.txt"]
    checkpoint = store.load("run-mcp")
    assert checkpoint is not None
    assert checkpoint.status == "completed"


async def test_an_approved_call_resumed_with_a_fresh_server_object_reaches_it(
    http_server: Callable[..., MCPServer], http_process: HTTPProcess, unique: str
) -> None:
    store = create_in_memory_session_store()
    pending = await suspend(http_server(**GATED), store, f"/tmp/{unique}")

    rebuilt = http_server(**GATED)  # as a registry rebuilds the spec: nothing cached
    done = await resume_from_checkpoint(
        store,
        "run-mcp",
        model=ScriptedModel([reply(text="Deleted it.")]),
        tools=await rebuilt.tools(),
        approval_signer=create_approval_signer(secret=SECRET),
        approval_responses=[
            {
                "approvalId": pending.approval_id,
                "approved": True,
                "token": pending.token,
            }
        ],
    )

    assert done.text == "Deleted it."
    assert f"delete_file:/tmp/{unique}" in effects_in(http_process.effects)


async def test_a_denied_call_never_reaches_the_server(
    stdio_server: Callable[..., MCPServer], effects: Path
) -> None:
    store = create_in_memory_session_store()
    pending = await suspend(stdio_server(**GATED), store, "/tmp/keep-me")

    done = await resume_from_checkpoint(
        store,
        "run-mcp",
        model=ScriptedModel([reply(text="I left it alone.")]),
        tools=await stdio_server(**GATED).tools(),
        approval_signer=create_approval_signer(secret=SECRET),
        approval_responses=[
            {"approvalId": pending.approval_id, "approved": False, "reason": "No."}
        ],
    )

    assert done.text == "I left it alone."
    [result] = tool_results(done.messages)
    assert (result.result, result.is_error) == ("Tool call denied. Reason: No.", True)
    assert effects_in(effects) == []
