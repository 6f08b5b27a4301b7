"""The ``mcp`` extra is optional: without the SDK the core imports and runs, and using an
MCP server says which extra to install."""

from __future__ import annotations

import textwrap

import deuz_django.core.mcp

from .support import run_python

SCRIPT = textwrap.dedent(
    """
    import asyncio
    import sys

    class BlockMCP:
        # Refuse the SDK and its own packages, as if the extra were not installed.
        BLOCKED = ("mcp", "mcp_types")

        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in self.BLOCKED:
                raise ImportError(f"{name} is blocked in this test")
            return None

    sys.meta_path.insert(0, BlockMCP())

    import deuz_django.core
    import deuz_django.core.mcp
    from deuz_django.core import generate_text, tool
    from deuz_django.core.mcp import MCPNotInstalledError, MCPServer, Stdio
    from deuz_django.core.testing import ScriptedModel, reply

    @tool
    def echo(text: str) -> str:
        return text

    async def main():
        model = ScriptedModel([
            reply(tool_calls=[("c1", "echo", {"text": "hi"})]), reply(text="ok"),
        ])
        result = await generate_text(model=model, prompt="go", tools=[echo], max_steps=3)
        print(result.text)

    asyncio.run(main())
    try:
        MCPServer("files", Stdio("files-server"))
    except MCPNotInstalledError as error:
        print(isinstance(error, ImportError), error)
    print("leaked:", sorted(n for n in sys.modules if n.split(".")[0] in BlockMCP.BLOCKED))
    """
)


def test_the_core_runs_without_the_sdk_and_mcp_servers_name_the_extra() -> None:
    completed = run_python(SCRIPT)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines() == [
        "ok",
        "True MCP servers need the official 'mcp' SDK, which is not installed: "
        'pip install "deuz-django[mcp]"',
        "leaked: []",
    ]


def test_the_blocker_really_blocks_the_sdk() -> None:
    probe = SCRIPT.split("import deuz_django.core\n")[0] + "import mcp\n"
    completed = run_python(probe)
    assert completed.returncode != 0
    assert "mcp is blocked in this test" in completed.stderr


def test_the_mcp_surface_is_pinned() -> None:
    assert deuz_django.core.mcp.__all__ == [
        "MCPNotInstalledError",
        "MCPServer",
        "MCPServerError",
        "MCPTool",
        "MCPToolError",
        "Stdio",
        "StreamableHTTP",
    ]
