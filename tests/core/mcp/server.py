"""A real MCP server for the tests, written with the official SDK.

    python tests/core/mcp/server.py stdio --log EFFECTS
    python tests/core/mcp/server.py http PORT --log EFFECTS

Tools that change something append a line to the ``--log`` file, so a test can tell
whether a call reached the server — from another process, over either transport.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

server = MCPServer("files", log_level="WARNING")
effects: Path | None = None


def record(line: str) -> None:
    if effects is not None:
        with effects.open("a", encoding="utf-8") as log:
            log.write(line + "\n")


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@server.tool()
def delete_file(path: str) -> str:
    """Delete a file (only pretends: it records the call)."""
    record(f"delete_file:{path}")
    return f"deleted {path}"


@server.tool()
def fail(why: str) -> str:
    """Fail the way a tool fails: the server answers with isError."""
    raise ToolError(f"cannot do that: {why}")


@server.tool()
def reject() -> str:
    """Fail at the protocol level: the server answers with a JSON-RPC error."""
    raise MCPError(INVALID_PARAMS, "reject refuses every call")


@server.tool()
async def slow(seconds: float) -> str:
    """Take ``seconds`` to answer."""
    await asyncio.sleep(seconds)
    record(f"slow:{seconds}")
    return "finally"


@server.tool()
def whoami() -> int:
    """The server's process id (which connection answered)."""
    return os.getpid()


@server.tool()
def crash() -> str:
    """Die mid-call, as a server process can."""
    os._exit(3)


def main() -> None:
    global effects
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("port", type=int, nargs="?", default=0)
    parser.add_argument("--log", type=Path)
    options = parser.parse_args()
    effects = options.log
    if options.transport == "stdio":
        server.run()
    else:
        server.run("streamable-http", host="127.0.0.1", port=options.port)


if __name__ == "__main__":
    main()
