"""An agent whose tools come from an MCP server (the core tests' server, over stdio).

The server object lives at module level, so its tool list is fetched once per process and
every ``load_agent`` after that rebuilds the spec from the cache. The server records what
it did in ``EFFECTS`` (one file per test process).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from deuz_django.core.mcp import MCPServer
from deuz_django.core.testing import reply
from deuz_django.registry import AgentSpec
from tests.core.mcp.support import stdio_transport

from .agents import TOOL_PERMISSION, by_turn

EFFECTS = Path(tempfile.gettempdir()) / f"deuz-mcp-effects-{os.getpid()}.log"

FILES = MCPServer(
    "files",
    stdio_transport(EFFECTS),
    options={"needs_approval": True},
    tool_options={
        "echo": {"needs_approval": False},
        "delete_file": {"approval_permission": TOOL_PERMISSION},
    },
)


def files_agent() -> AgentSpec:
    return AgentSpec(
        model=by_turn(
            [
                reply(
                    tool_calls=[
                        ("m1", "files__delete_file", {"path": "/srv/report.txt"})
                    ],
                    usage=(12, 4),
                ),
                reply(text="The report is gone.", usage=(20, 5)),
            ]
        ),
        tools=FILES.tools_sync(),
    )
